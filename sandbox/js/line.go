package js

import "strings"

// scriptCommand returns the JavaScript command that cmd runs, and
// whether it runs one: cmd itself when cmd[0] is "js" or "node", or the
// words of line when cmd is ["sh", "-c", line] and line is one simple
// command of literal words (plainWords) whose first is "js" or "node",
// as the execution API sends a command line.
func scriptCommand(cmd []string) ([]string, bool) {
	if isScript(cmd[0]) {
		return cmd, true
	}
	if len(cmd) != 3 || cmd[0] != "sh" || cmd[1] != "-c" {
		return nil, false
	}
	words, ok := plainWords(cmd[2])
	if !ok || len(words) == 0 || !isScript(words[0]) {
		return nil, false
	}
	return words, true
}

func isScript(name string) bool { return name == "js" || name == "node" }

// special are the characters that, unquoted, make a line more than
// literal words to a POSIX shell: operators, redirections, expansions,
// globs, comments and the starts of compound commands.
const special = "|&;<>()$`*?[]#~{}!\n"

// plainWords splits line as a POSIX shell splits a simple command of
// literal words: blanks separate words; '...' quotes everything; "..."
// quotes everything but \" \\ \$ \` and backslash-newline, its escapes;
// an unquoted backslash quotes the next character (and with a newline
// is removed). ok is false for a line with anything else in it (a
// special character unquoted, $ or ` within double quotes, an
// unterminated quote), which only the shell can run.
func plainWords(line string) (words []string, ok bool) {
	var w strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
			continue
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			closed := false
			for i++; i < len(line) && !closed; i++ {
				switch d := line[i]; {
				case d == '"':
					closed = true
					i-- // the loop's i++ passes it
				case d == '$' || d == '`':
					return nil, false
				case d == '\\' && i+1 < len(line) && strings.IndexByte("\"\\$`\n", line[i+1]) >= 0:
					if line[i+1] != '\n' {
						w.WriteByte(line[i+1])
					}
					i++
				default:
					w.WriteByte(d)
				}
			}
			if !closed {
				return nil, false
			}
		case c == '\\':
			if i+1 == len(line) {
				return nil, false
			}
			i++
			if line[i] == '\n' {
				continue
			}
			w.WriteByte(line[i])
		case strings.IndexByte(special, c) >= 0:
			return nil, false
		default:
			w.WriteByte(c)
		}
		inWord = true
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, true
}
