package shscript

import (
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// File is what Test needs to know of a file: its type and permission
// bits, and its size.
type File struct {
	Mode fs.FileMode
	Size int64
}

// Stat describes the file named by an operand of test, following
// symlinks; ok is false when there is none.
type Stat func(name string) (f File, ok bool)

// Test runs the program test, or "[", whose arguments are argv (argv[0]
// is "test" or "["; the last argument of "[" must be "]"), as POSIX
// test does, and returns its exit status: 0 when the expression is true,
// 1 when it is false, and 2 with a message for stderr ("test: a:
// integer expression expected", no newline) when it is malformed.
//
// It has the file operators -e, -f, -d, -s, -r, -w and -x, the string
// operators -n, -z, = and !=, the integer comparisons -eq, -ne, -lt, -le,
// -gt and -ge, and !, -a, -o and parentheses. The caller is the owner of
// every file (the sandbox's only user): -r, -w and -x look at the
// owner's bits, and a folder's -x at its search bit. With one to four
// arguments the POSIX rules decide what an argument means (test -n is
// true: "-n" is a non-empty string); with more, -a binds tighter than
// -o.
func Test(argv []string, stat Stat) (code int, msg string) {
	name, args := argv[0], argv[1:]
	if name == "[" {
		if len(args) == 0 || args[len(args)-1] != "]" {
			return 2, "[: missing ]"
		}
		args = args[:len(args)-1]
	}
	p := &testParser{stat: stat}
	v, err := p.posix(args)
	switch {
	case err != nil:
		return 2, name + ": " + err.Error()
	case v:
		return 0, ""
	}
	return 1, ""
}

type testParser struct {
	args []string // of the general grammar, from pos
	pos  int
	stat Stat
}

// posix applies the rules POSIX gives by the number of arguments.
func (p *testParser) posix(args []string) (bool, error) {
	switch len(args) {
	case 0:
		return false, nil
	case 1:
		return args[0] != "", nil
	case 2:
		if args[0] == "!" {
			return args[1] == "", nil
		}
		if isUnary(args[0]) {
			return p.unary(args[0], args[1])
		}
		return false, fmt.Errorf("%s: unary operator expected", args[0])
	case 3:
		if isBinary(args[1]) {
			return p.binary(args[0], args[1], args[2])
		}
		if args[0] == "!" {
			v, err := p.posix(args[1:])
			return !v, err
		}
		if args[0] == "(" && args[2] == ")" {
			return args[1] != "", nil
		}
	case 4:
		if args[0] == "!" {
			v, err := p.posix(args[1:])
			return !v, err
		}
		if args[0] == "(" && args[3] == ")" {
			return p.posix(args[1:3])
		}
	}
	p.args, p.pos = args, 0
	v, err := p.or()
	if err == nil && p.pos < len(p.args) {
		err = fmt.Errorf("%s: unexpected operator", p.args[p.pos])
	}
	return v, err
}

func isUnary(op string) bool {
	switch op {
	case "-e", "-f", "-d", "-s", "-r", "-w", "-x", "-n", "-z":
		return true
	}
	return false
}

func isBinary(op string) bool {
	switch op {
	case "=", "!=", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-a", "-o":
		return true
	}
	return false
}

// next returns the next argument, or "" and false at the end.
func (p *testParser) next() (string, bool) {
	if p.pos >= len(p.args) {
		return "", false
	}
	p.pos++
	return p.args[p.pos-1], true
}

func (p *testParser) peek(i int) (string, bool) {
	if p.pos+i >= len(p.args) {
		return "", false
	}
	return p.args[p.pos+i], true
}

// or: and ( -o and )*
func (p *testParser) or() (bool, error) {
	v, err := p.and()
	for err == nil {
		if op, _ := p.peek(0); op != "-o" {
			break
		}
		p.pos++
		var w bool
		w, err = p.and()
		v = v || w
	}
	return v, err
}

// and: not ( -a not )*
func (p *testParser) and() (bool, error) {
	v, err := p.not()
	for err == nil {
		if op, _ := p.peek(0); op != "-a" {
			break
		}
		p.pos++
		var w bool
		w, err = p.not()
		v = v && w
	}
	return v, err
}

// not: "!" not | primary
func (p *testParser) not() (bool, error) {
	if a, _ := p.peek(0); a == "!" {
		if _, more := p.peek(1); more {
			p.pos++
			v, err := p.not()
			return !v, err
		}
	}
	return p.primary()
}

// primary: "(" or ")" | UNARY operand | operand BINARY operand | operand
func (p *testParser) primary() (bool, error) {
	a, ok := p.next()
	if !ok {
		return false, fmt.Errorf("argument expected")
	}
	if op, _ := p.peek(0); isBinary(op) && op != "-a" && op != "-o" {
		if b, ok := p.peek(1); ok {
			p.pos += 2
			return p.binary(a, op, b)
		}
	}
	if a == "(" {
		v, err := p.or()
		if err != nil {
			return false, err
		}
		if c, _ := p.next(); c != ")" {
			return false, fmt.Errorf("closing paren expected")
		}
		return v, nil
	}
	if isUnary(a) {
		if b, ok := p.next(); ok {
			return p.unary(a, b)
		}
	}
	return a != "", nil
}

func (p *testParser) unary(op, a string) (bool, error) {
	switch op {
	case "-n":
		return a != "", nil
	case "-z":
		return a == "", nil
	}
	f, ok := p.stat(a)
	if !ok {
		return false, nil
	}
	switch op {
	case "-f":
		return f.Mode.IsRegular(), nil
	case "-d":
		return f.Mode.IsDir(), nil
	case "-s":
		return f.Size > 0, nil
	case "-r":
		return f.Mode&0o400 != 0, nil
	case "-w":
		return f.Mode&0o200 != 0, nil
	case "-x":
		return f.Mode&0o100 != 0, nil
	}
	return true, nil // -e
}

func (p *testParser) binary(a, op, b string) (bool, error) {
	switch op {
	case "=":
		return a == b, nil
	case "!=":
		return a != b, nil
	case "-a":
		return a != "" && b != "", nil
	case "-o":
		return a != "" || b != "", nil
	}
	x, err := integer(a)
	if err != nil {
		return false, err
	}
	y, err := integer(b)
	if err != nil {
		return false, err
	}
	switch op {
	case "-eq":
		return x == y, nil
	case "-ne":
		return x != y, nil
	case "-lt":
		return x < y, nil
	case "-le":
		return x <= y, nil
	case "-gt":
		return x > y, nil
	}
	return x >= y, nil // -ge
}

// integer reads a decimal integer operand, blanks around it allowed.
func integer(s string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: integer expression expected", s)
	}
	return n, nil
}
