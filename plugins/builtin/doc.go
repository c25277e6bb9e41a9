// Package builtin holds the models and tools that ship inside the Kiln
// binary. They implement core.Model and core.Tool exactly as an external
// plugin would, so the engine cannot tell them apart.
//
// # Models
//
// Models returns both built-in models by reference name.
//
// "scripted" (Scripted) plays the run's user message as a script, one model
// turn per line; it is deterministic, for tests and reproducible demos:
//
//	# a comment; blank lines and lines starting with # are ignored
//	tool echo {"msg": "hi"}      one turn calling one tool; the arguments
//	                             must be a JSON object ({} for none) and the
//	                             name matches [A-Za-z0-9_.:-]+
//	parallel                     one turn calling every tool line up to end
//	  tool sleep {"ms": 10}      (at least one)
//	  tool echo {}
//	end
//	text All done.               one turn replying with the text; a turn
//	                             without tool calls ends the run, so text
//	                             must be the last line
//
// (The right-hand column is commentary, not script.) Whitespace around a line
// is ignored. If the script does not end with text, the turn after its last
// line ends the run with "Done: ran N tool calls." Tool call IDs are
// call_<run>_<turn>_<i>: <run> is the last six characters of the run ID
// (after the prefix before its first underscore), <turn> the 0-based model turn of the run, <i> the
// position in the turn.
//
// "demo" (Demo) is the offline assistant used when no AI provider is
// configured. Every reply starts with DemoLabel. It echoes the user's text,
// asks to append it to demo/notes.txt (which the server's default policy
// holds for approval, so it shows up in the Action queue) and then reports
// whether the human approved, rejected or answered the call, and how to
// configure a real provider.
//
// Both models are stateless: the turn to play is the number of assistant
// messages after the last user message, so calling them again after a crash
// gives the same answer. Text is streamed through delta word by word. Usage
// counts whitespace-separated words.
//
// # Tools
//
// Tools returns echo, append_file (confined to a scratch directory) and
// sleep. A tool's failure is a failed result (IsError) with the text of a
// *core.Error: "invalid: ..." for bad arguments, "forbidden: ..." for paths
// that would leave the scratch directory. A call cut off because its
// context ended returns the context's error instead.
package builtin
