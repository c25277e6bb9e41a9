package main

import (
	"os"
	"strconv"

	"github.com/kilnhq/kiln/sandbox/internal/shscript"
	"github.com/kilnhq/kiln/sandbox/wasm/internal/hostabi"
)

// This file is the shell's grammar: the same subset as the in-memory
// Machine's interpreter (sandbox/sandboxtest/sh.go), run against the WASI
// filesystem.

// script runs src and returns its exit status.
func (sh *shell) script(src string) int {
	stmts, err := shscript.Parse(src)
	if err != nil {
		return sh.fail(2, "sh: syntax error: %v\n", err)
	}
	for _, st := range stmts {
		if (st.Op == "&&" && sh.status != 0) || (st.Op == "||" && sh.status == 0) {
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
func (sh *shell) simple(st shscript.Stmt) (code int, exit bool) {
	var args []string
	for _, w := range st.Words {
		if s, keep := shscript.Expand(w, sh.status, sh.env); keep {
			args = append(args, s)
		}
	}
	sub := *sh
	for _, r := range st.Redirs {
		target, _ := shscript.Expand(r.Target, sh.status, sh.env)
		switch r.Op {
		case ">", ">>", "2>":
			flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
			if r.Op == ">>" {
				flag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
			}
			f, err := os.OpenFile(sh.abs(target), flag, 0o644)
			if err != nil {
				return sh.fail(2, "sh: cannot create %s: %s\n", target, describeBare(err)), false
			}
			defer f.Close()
			fd := 1
			if r.Op == "2>" {
				fd = 2
			}
			sub.out[fd], sub.to[fd] = f, hostabi.Target{Path: sh.abs(target)}
		case "<":
			f, err := os.Open(sh.abs(target))
			if err != nil {
				return sh.fail(2, "sh: cannot open %s: %s\n", target, describeBare(err)), false
			}
			defer f.Close()
			sub.stdin, sub.from = f, sh.abs(target)
		case ">&2", "1>&2":
			sub.out[1], sub.to[1] = sub.out[2], sub.to[2]
		case "2>&1":
			sub.out[2], sub.to[2] = sub.out[1], sub.to[1]
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
