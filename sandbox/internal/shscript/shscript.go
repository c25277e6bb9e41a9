// Package shscript is the grammar of the small sh that Kiln's sandboxes
// without a real shell run (the wasm runtime's built-in shell, the
// in-memory test Machine): statements joined by ";", newlines, "&&" and
// "||", words with single and double quotes, $NAME, ${NAME} and $?, and
// the redirections >, >>, <, 2>, >&2, 1>&2 and 2>&1. Running the
// statements is each shell's own; the programs both shells have alike
// are here too: test and [ (Test), and the mode operands of chmod and
// mkdir -m (ParseMode, MkdirArgs).
package shscript

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A script is statements joined by ";", newlines, "&&" and "||".
type Stmt struct {
	Op     string // what joins it to the one before: "", ";", "&&", "||"
	Words  [][]Part
	Redirs []Redir
}

// Redir is a redirection of a statement.
type Redir struct {
	Op     string // ">", ">>", "<", "2>", ">&2", "1>&2", "2>&1"
	Target []Part
}

// Part is a piece of a word: literal text, or a variable to expand.
type Part struct {
	Text   string
	IsVar  bool
	Quoted bool
}

// Expand joins a word's parts, expanding variables from env and $? as
// status; keep is false for a word that expands to nothing and had no
// quotes (sh drops it).
func Expand(w []Part, status int, env map[string]string) (s string, keep bool) {
	var b strings.Builder
	for _, p := range w {
		keep = keep || p.Quoted
		switch {
		case !p.IsVar:
			b.WriteString(p.Text)
		case p.Text == "?":
			b.WriteString(strconv.Itoa(status))
		default:
			b.WriteString(env[p.Text])
		}
	}
	return b.String(), keep || b.Len() > 0
}

// operators, longest first.
var operators = []string{"2>&1", "1>&2", ">&2", "&&", "||", ">>", "2>", ">", "<", ";", "\n", "|", "&"}

// Parse reads a script.
func Parse(src string) ([]Stmt, error) {
	var stmts []Stmt
	cur := Stmt{}
	empty := func(s Stmt) bool { return len(s.Words) == 0 && len(s.Redirs) == 0 }
	for i := 0; i < len(src); {
		switch c := src[i]; {
		case c == ' ' || c == '\t':
			i++
			continue
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			continue
		case c == '\\' && i+1 < len(src) && src[i+1] == '\n':
			i += 2
			continue
		}
		op := ""
		for _, o := range operators {
			if strings.HasPrefix(src[i:], o) {
				op = o
				break
			}
		}
		switch op {
		case "":
			w, n, err := lexWord(src[i:])
			if err != nil {
				return nil, err
			}
			cur.Words = append(cur.Words, w)
			i += n
		case "|", "&":
			return nil, fmt.Errorf("%q is not understood here", op)
		case ";", "\n", "&&", "||":
			i += len(op)
			if op == "\n" {
				op = ";"
			}
			if empty(cur) {
				if op != ";" || cur.Op == "&&" || cur.Op == "||" {
					return nil, fmt.Errorf("unexpected %q", op)
				}
				continue
			}
			stmts = append(stmts, cur)
			cur = Stmt{Op: op}
		default:
			i += len(op)
			r := Redir{Op: op}
			if op == ">" || op == ">>" || op == "<" || op == "2>" {
				for i < len(src) && (src[i] == ' ' || src[i] == '\t') {
					i++
				}
				w, n, err := lexWord(src[i:])
				if err != nil {
					return nil, err
				}
				if n == 0 {
					return nil, fmt.Errorf("no file after %q", op)
				}
				r.Target = w
				i += n
			}
			cur.Redirs = append(cur.Redirs, r)
		}
	}
	if !empty(cur) {
		stmts = append(stmts, cur)
	} else if cur.Op == "&&" || cur.Op == "||" {
		return nil, fmt.Errorf("nothing after %q", cur.Op)
	}
	return stmts, nil
}

// lexWord reads one word from the start of s and returns its parts and
// its length.
func lexWord(s string) ([]Part, int, error) {
	var parts []Part
	lit := func(text string, quoted bool) { parts = append(parts, Part{Text: text, Quoted: quoted}) }
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case strings.IndexByte(" \t\n;&|<>", c) >= 0:
			return parts, i, nil
		case c == '\\' && i+1 < len(s):
			lit(s[i+1:i+2], true)
			i += 2
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, 0, errors.New("unterminated '")
			}
			lit(s[i+1:i+1+end], true)
			i += end + 2
		case c == '"':
			lit("", true)
			i++
			for {
				if i >= len(s) {
					return nil, 0, errors.New(`unterminated "`)
				}
				c := s[i]
				switch {
				case c == '"':
					i++
				case c == '\\' && i+1 < len(s) && strings.IndexByte("$\"\\\n", s[i+1]) >= 0:
					lit(s[i+1:i+2], true)
					i += 2
					continue
				case c == '$':
					p, n := lexVar(s[i:])
					p.Quoted = true
					parts = append(parts, p)
					i += n
					continue
				default:
					lit(s[i:i+1], true)
					i++
					continue
				}
				break
			}
		case c == '$':
			p, n := lexVar(s[i:])
			parts = append(parts, p)
			i += n
		default:
			lit(s[i:i+1], false)
			i++
		}
	}
	return parts, i, nil
}

// lexVar reads $NAME, ${NAME} or $? from the start of s; a "$" that
// starts none of them is itself.
func lexVar(s string) (Part, int) {
	isName := func(c byte, first bool) bool {
		return c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || !first && '0' <= c && c <= '9'
	}
	switch {
	case len(s) > 1 && s[1] == '?':
		return Part{Text: "?", IsVar: true}, 2
	case len(s) > 1 && s[1] == '{':
		if end := strings.IndexByte(s, '}'); end > 2 {
			return Part{Text: s[2:end], IsVar: true}, end + 1
		}
	case len(s) > 1 && isName(s[1], true):
		n := 2
		for n < len(s) && isName(s[n], false) {
			n++
		}
		return Part{Text: s[1:n], IsVar: true}, n
	}
	return Part{Text: "$"}, 1
}
