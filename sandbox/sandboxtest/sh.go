package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/kilnhq/kiln/sandbox"
)

// This file is the Machine's command interpreter: a few programs and the
// part of sh that the conformance suite uses, enough for the suite's
// checks to pass only when exit codes, output order, stdin, files and
// cancellation really work.

// sink receives one output stream.
type sink func([]byte)

func emitTo(emit func(sandbox.Stream, []byte), s sandbox.Stream) sink {
	return func(p []byte) { emit(s, p) }
}

// shell runs commands in one sandbox for one Exec.
type shell struct {
	ctx    context.Context
	b      *box
	env    map[string]string
	dir    string
	stdin  io.Reader
	out    [3]sink // [1] stdout, [2] stderr
	status int     // $?
}

// chunk is how much output one event carries at most.
const chunk = 32 << 10

// argv runs one program with its arguments, as exec does (no shell
// builtins: "exit" is not a program).
func (sh *shell) argv(args []string) (int, error) {
	if err := sh.ctx.Err(); err != nil {
		return 0, err
	}
	return sh.program(args)
}

// program runs args[0], one of the Machine's programs.
func (sh *shell) program(args []string) (int, error) {
	switch args[0] {
	case "echo":
		words, nl := args[1:], "\n"
		if len(words) > 0 && words[0] == "-n" {
			words, nl = words[1:], ""
		}
		sh.out[1]([]byte(strings.Join(words, " ") + nl))
		return 0, nil
	case "cat":
		return sh.cat(args[1:])
	case "sleep":
		if len(args) != 2 {
			return sh.fail(1, "sleep: want one duration in seconds\n")
		}
		secs, err := strconv.ParseFloat(args[1], 64)
		if err != nil || secs < 0 {
			return sh.fail(1, "sleep: invalid number '%s'\n", args[1])
		}
		t := time.NewTimer(time.Duration(secs * float64(time.Second)))
		defer t.Stop()
		select {
		case <-t.C:
			return 0, nil
		case <-sh.ctx.Done():
			return 0, sh.ctx.Err()
		}
	case "pwd":
		sh.out[1]([]byte(sh.dir + "\n"))
		return 0, nil
	case "true":
		return 0, nil
	case "false":
		return 1, nil
	case "sh":
		if len(args) < 3 || args[1] != "-c" {
			return sh.fail(2, "sh: only sh -c SCRIPT is understood here\n")
		}
		sub := *sh
		sub.status = 0
		return sub.script(args[2])
	}
	return sh.fail(127, "sh: %s: not found\n", args[0])
}

// fail writes a message to stderr and returns code.
func (sh *shell) fail(code int, format string, args ...any) (int, error) {
	sh.out[2](fmt.Appendf(nil, format, args...))
	return code, nil
}

// abs resolves p against the working folder.
func (sh *shell) abs(p string) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	return path.Join(sh.dir, p)
}

func (sh *shell) cat(files []string) (int, error) {
	if len(files) == 0 {
		files = []string{"-"}
	}
	code := 0
	for _, f := range files {
		if f == "-" {
			if err := sh.copyStdin(); err != nil {
				return 0, err
			}
			continue
		}
		data, err := sh.b.read(sh.abs(f))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			code, _ = sh.fail(1, "cat: %s: No such file or directory\n", f)
			continue
		case err != nil:
			code, _ = sh.fail(1, "cat: %s: Is a directory\n", f)
			continue
		}
		for len(data) > 0 {
			n := min(chunk, len(data))
			sh.out[1](data[:n])
			data = data[n:]
		}
	}
	return code, nil
}

// copyStdin copies stdin to stdout as it comes, until it ends or the
// command is cut off.
func (sh *shell) copyStdin() error {
	if sh.stdin == nil {
		return nil
	}
	type read struct {
		p   []byte
		err error
	}
	reads := make(chan read)
	done := make(chan struct{})
	defer close(done)
	go func() {
		buf := make([]byte, chunk)
		for {
			n, err := sh.stdin.Read(buf)
			select {
			case reads <- read{bytes.Clone(buf[:n]), err}:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		select {
		case <-sh.ctx.Done():
			return sh.ctx.Err()
		case r := <-reads:
			if len(r.p) > 0 {
				sh.out[1](r.p)
			}
			if r.err == io.EOF {
				return nil
			}
			if r.err != nil {
				return fmt.Errorf("read stdin: %w", r.err)
			}
		}
	}
}

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

// script runs src.
func (sh *shell) script(src string) (int, error) {
	stmts, err := parse(src)
	if err != nil {
		return sh.fail(2, "sh: syntax error: %v\n", err)
	}
	for _, st := range stmts {
		if (st.op == "&&" && sh.status != 0) || (st.op == "||" && sh.status == 0) {
			continue
		}
		if err := sh.ctx.Err(); err != nil {
			return 0, err
		}
		code, exit, err := sh.simple(st)
		if err != nil {
			return 0, err
		}
		sh.status = code
		if exit {
			break
		}
	}
	return sh.status, nil
}

// simple runs one statement; exit reports an exit builtin.
func (sh *shell) simple(st stmt) (code int, exit bool, err error) {
	var args []string
	for _, w := range st.words {
		if s, keep := sh.expand(w); keep {
			args = append(args, s)
		}
	}
	sub := *sh
	for _, r := range st.redirs {
		target, _ := sh.expand(r.target)
		p := sh.abs(target)
		switch r.op {
		case ">", ">>", "2>":
			if err := sh.b.write(p, nil, 0, false, r.op == ">>"); err != nil {
				code, _ := sh.fail(2, "sh: cannot create %s: %v\n", target, err)
				return code, false, nil
			}
			fd := 1
			if r.op == "2>" {
				fd = 2
			}
			sub.out[fd] = func(data []byte) { sh.b.write(p, data, 0, false, true) }
		case "<":
			data, err := sh.b.read(p)
			if err != nil {
				code, _ := sh.fail(2, "sh: cannot open %s: %v\n", target, err)
				return code, false, nil
			}
			sub.stdin = bytes.NewReader(data)
		case ">&2", "1>&2":
			sub.out[1] = sub.out[2]
		case "2>&1":
			sub.out[2] = sub.out[1]
		}
	}
	if len(args) == 0 {
		return 0, false, nil
	}
	switch args[0] {
	case "exit":
		code := sh.status
		if len(args) > 1 {
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 0 {
				code, _ := sub.fail(2, "sh: exit: Illegal number: %s\n", args[1])
				return code, true, nil
			}
			code = n
		}
		return code & 255, true, nil
	case "cd":
		dir := sh.env["HOME"]
		if len(args) > 1 {
			dir = sh.abs(args[1])
		}
		sh.b.mu.Lock()
		n, ok := sh.b.files[dir]
		sh.b.mu.Unlock()
		if !ok || !n.dir {
			code, _ := sub.fail(2, "sh: cd: can't cd to %s\n", dir)
			return code, false, nil
		}
		sh.dir, sh.env["PWD"] = dir, dir
		return 0, false, nil
	}
	code, err = sub.program(args)
	return code, false, err
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
