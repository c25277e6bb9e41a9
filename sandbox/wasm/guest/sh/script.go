package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// This file is the shell's grammar: the same subset as the in-memory
// Machine's interpreter (sandbox/sandboxtest/sh.go), run against the WASI
// filesystem.

// A script is statements joined by ";", newlines, "&&" and "||".
type stmt struct {
	op     string // what joins it to the one before: "", ";", "&&", "||"
	words  [][]part
	redirs []redir
}

type redir struct {
	op     string // ">", ">>", "<", "2>", ">&2", "1>&2", "2>&1"
	target []part
}

// part is a piece of a word: literal text, or a variable to expand.
type part struct {
	text   string
	isVar  bool
	quoted bool
}

// script runs src and returns its exit status.
func (sh *shell) script(src string) int {
	stmts, err := parse(src)
	if err != nil {
		return sh.fail(2, "sh: syntax error: %v\n", err)
	}
	for _, st := range stmts {
		if (st.op == "&&" && sh.status != 0) || (st.op == "||" && sh.status == 0) {
			continue
		}
		code, exit := sh.simple(st)
		sh.status = code
		if exit {
			break
		}
	}
	return sh.status
}

// simple runs one statement; exit reports an exit builtin.
func (sh *shell) simple(st stmt) (code int, exit bool) {
	var args []string
	for _, w := range st.words {
		if s, keep := sh.expand(w); keep {
			args = append(args, s)
		}
	}
	sub := *sh
	for _, r := range st.redirs {
		target, _ := sh.expand(r.target)
		switch r.op {
		case ">", ">>", "2>":
			flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
			if r.op == ">>" {
				flag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
			}
			f, err := os.OpenFile(sh.abs(target), flag, 0o644)
			if err != nil {
				return sh.fail(2, "sh: cannot create %s: %s\n", target, describeBare(err)), false
			}
			defer f.Close()
			fd := 1
			if r.op == "2>" {
				fd = 2
			}
			sub.out[fd] = f
		case "<":
			f, err := os.Open(sh.abs(target))
			if err != nil {
				return sh.fail(2, "sh: cannot open %s: %s\n", target, describeBare(err)), false
			}
			defer f.Close()
			sub.stdin = f
		case ">&2", "1>&2":
			sub.out[1] = sub.out[2]
		case "2>&1":
			sub.out[2] = sub.out[1]
		}
	}
	if len(args) == 0 {
		return 0, false
	}
	switch args[0] {
	case "exit":
		code := sh.status
		if len(args) > 1 {
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 0 {
				return sub.fail(2, "sh: exit: Illegal number: %s\n", args[1]), true
			}
			code = n
		}
		return code & 255, true
	case "cd":
		dir := sh.env["HOME"]
		if len(args) > 1 {
			dir = sh.abs(args[1])
		}
		if dir == "" {
			dir = "/"
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return sub.fail(2, "sh: cd: can't cd to %s\n", dir), false
		}
		sh.dir, sh.env["PWD"] = dir, dir
		return 0, false
	}
	return sub.program(args), false
}

// expand joins a word's parts, expanding variables; keep is false for a
// word that expands to nothing and had no quotes (sh drops it).
func (sh *shell) expand(w []part) (s string, keep bool) {
	var b strings.Builder
	for _, p := range w {
		keep = keep || p.quoted
		switch {
		case !p.isVar:
			b.WriteString(p.text)
		case p.text == "?":
			b.WriteString(strconv.Itoa(sh.status))
		default:
			b.WriteString(sh.env[p.text])
		}
	}
	return b.String(), keep || b.Len() > 0
}

// operators, longest first.
var operators = []string{"2>&1", "1>&2", ">&2", "&&", "||", ">>", "2>", ">", "<", ";", "\n", "|", "&"}

// parse reads a script.
func parse(src string) ([]stmt, error) {
	var stmts []stmt
	cur := stmt{}
	empty := func(s stmt) bool { return len(s.words) == 0 && len(s.redirs) == 0 }
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
			cur.words = append(cur.words, w)
			i += n
		case "|", "&":
			return nil, fmt.Errorf("%q is not understood here", op)
		case ";", "\n", "&&", "||":
			i += len(op)
			if op == "\n" {
				op = ";"
			}
			if empty(cur) {
				if op != ";" || cur.op == "&&" || cur.op == "||" {
					return nil, fmt.Errorf("unexpected %q", op)
				}
				continue
			}
			stmts = append(stmts, cur)
			cur = stmt{op: op}
		default:
			i += len(op)
			r := redir{op: op}
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
				r.target = w
				i += n
			}
			cur.redirs = append(cur.redirs, r)
		}
	}
	if !empty(cur) {
		stmts = append(stmts, cur)
	} else if cur.op == "&&" || cur.op == "||" {
		return nil, fmt.Errorf("nothing after %q", cur.op)
	}
	return stmts, nil
}

// lexWord reads one word from the start of s and returns its parts and
// its length.
func lexWord(s string) ([]part, int, error) {
	var parts []part
	lit := func(text string, quoted bool) { parts = append(parts, part{text: text, quoted: quoted}) }
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
					p.quoted = true
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
func lexVar(s string) (part, int) {
	isName := func(c byte, first bool) bool {
		return c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || !first && '0' <= c && c <= '9'
	}
	switch {
	case len(s) > 1 && s[1] == '?':
		return part{text: "?", isVar: true}, 2
	case len(s) > 1 && s[1] == '{':
		if end := strings.IndexByte(s, '}'); end > 2 {
			return part{text: s[2:end], isVar: true}, end + 1
		}
	case len(s) > 1 && isName(s[1], true):
		n := 2
		for n < len(s) && isName(s[n], false) {
			n++
		}
		return part{text: s[1:n], isVar: true}, n
	}
	return part{text: "$"}, 1
}
