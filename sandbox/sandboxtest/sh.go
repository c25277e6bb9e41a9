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

	"github.com/kilnhq/kiln/sandbox/internal/shscript"

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
	case "test", "[":
		code, msg := shscript.Test(args, sh.stat)
		if msg != "" {
			sh.fail(code, "%s\n", msg)
		}
		return code, nil
	case "mkdir":
		return sh.mkdir(args[1:])
	case "chmod":
		return sh.chmod(args[1:])
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

// stat describes the file at name for test.
func (sh *shell) stat(name string) (shscript.File, bool) {
	sh.b.mu.Lock()
	defer sh.b.mu.Unlock()
	n, ok := sh.b.files[sh.abs(name)]
	if !ok {
		return shscript.File{}, false
	}
	fi := n.info(name)
	return shscript.File{Mode: fi.Mode, Size: fi.Size}, true
}

// mkdir makes folders: [-p] [-m MODE] DIR...
func (sh *shell) mkdir(args []string) (int, error) {
	parents, mode, names, err := shscript.MkdirArgs(args)
	if err != nil {
		return sh.fail(1, "mkdir: %v\n", err)
	}
	code := 0
	for _, name := range names {
		if err := sh.b.mkdir(sh.abs(name), mode, parents); err != nil {
			code, _ = sh.fail(1, "mkdir: %s: %v\n", name, err)
		}
	}
	return code, nil
}

// chmod sets modes: MODE FILE...
func (sh *shell) chmod(args []string) (int, error) {
	if len(args) < 2 {
		return sh.fail(1, "chmod: want a mode and a file\n")
	}
	code := 0
	for _, name := range args[1:] {
		sh.b.mu.Lock()
		n, ok := sh.b.files[sh.abs(name)]
		var err error = fs.ErrNotExist
		if ok {
			var m fs.FileMode
			if m, err = shscript.ParseMode(args[0], n.info(name).Mode); err == nil {
				n.mode = m
			}
		}
		sh.b.mu.Unlock()
		if err != nil {
			code, _ = sh.fail(1, "chmod: %s: %v\n", name, err)
		}
	}
	return code, nil
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

// script runs src.
func (sh *shell) script(src string) (int, error) {
	stmts, err := shscript.Parse(src)
	if err != nil {
		return sh.fail(2, "sh: syntax error: %v\n", err)
	}
	for _, st := range stmts {
		if (st.Op == "&&" && sh.status != 0) || (st.Op == "||" && sh.status == 0) {
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
func (sh *shell) simple(st shscript.Stmt) (code int, exit bool, err error) {
	var args []string
	for _, w := range st.Words {
		if s, keep := shscript.Expand(w, sh.status, sh.env); keep {
			args = append(args, s)
		}
	}
	sub := *sh
	for _, r := range st.Redirs {
		target, _ := shscript.Expand(r.Target, sh.status, sh.env)
		p := sh.abs(target)
		switch r.Op {
		case ">", ">>", "2>":
			if err := sh.b.write(p, nil, 0, false, r.Op == ">>"); err != nil {
				code, _ := sh.fail(2, "sh: cannot create %s: %v\n", target, err)
				return code, false, nil
			}
			fd := 1
			if r.Op == "2>" {
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
