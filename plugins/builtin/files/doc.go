// Package files holds Kiln's file tools, ls, read_file, write_file,
// edit_file, glob and grep (Tools, ToolsWith), over the one view of files
// every run sees:
//
//	/grants/<name>/...          each folder the user granted (core.Grant),
//	                            read-only unless Writable, reached only
//	                            through plugins/grantfs
//	/memories/<name>.md         the long-term memory files (flat, at most
//	                            MaxMemoryFile bytes each), only while
//	                            memory is on: off, the paths do not exist
//	                            and ls / does not show them
//	/attachments/<id>/<name>    the thread's attachments, read-only
//	/skills/<name>/...          for a subagent's run (core.CallEnv.Skill),
//	                            the folder of the skill it follows,
//	                            read-only, from Options.SkillFiles; a
//	                            symbolic link in it is never followed and
//	                            a file with several hard links is refused
//	anything else               the thread's virtual files (core.VirtualFS),
//	                            committed with the step that wrote them
//
// Any other name under /skills/ is refused, and so is all of /skills/ for
// a run that follows no skill. A path whose first segment is reserved
// (grants, memories, attachments, skills) is never a virtual file, and
// neither is one whose first segment names an entry of the host's root
// folder (/etc, /home, /tmp, ...): those are refused with a message
// saying the tools never reach host paths outside /grants/<name>/. A relative path starts in the run's working
// folder (/grants/<name>/) or, without one, at /. Empty and "." segments
// are dropped; ".." is refused, never cleaned.
//
// A tool learns its run from core.CallEnvFrom and takes the grants, the
// memory setting and the attachments from it at every call, so a grant
// revoked between two calls is gone for the second. Outside a run the
// tools fail. A tool's failure (a bad path, a refusal, no match) is a
// failed result whose text is the *core.Error's message; a failure of the
// store behind the virtual files is returned as the error of Call.
//
// write_file and edit_file are core.LocalCallers: a call whose path is an
// absolute virtual path only changes the thread's virtual files; a call on
// a grant, a memory file, a skill's file or a relative path is not local.
package files
