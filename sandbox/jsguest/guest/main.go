// Command js runs JavaScript with goja, as node runs it from a command
// line. It is built for GOOS=wasip1 GOARCH=wasm into ../js.wasm, which
// package jsguest runs under wazero; everything it reaches outside
// itself goes through WASI: arguments, environment, stdin/stdout/stderr,
// the clock and the file system the host mounts at "/".
//
//	js -e CODE [args...]   runs CODE
//	js FILE [args...]      runs the file FILE (a WASI path)
//	js                     runs the script read from stdin
//
// The script sees process.argv (["js", FILE, args...], or ["js",
// args...] for -e and stdin, as node does), process.env (the WASI
// environment), process.exit(code), process.exitCode, process.cwd(),
// process.platform ("wasip1"), process.stdout.write, process.stderr.write,
// process.nextTick; console.log/info/debug (stdout) and error/warn
// (stderr), which format their arguments roughly as node's util.inspect
// (no format specifiers); setTimeout, setInterval, setImmediate and their
// clear functions, queueMicrotask, Promises and async functions; and
// require('fs') (or 'node:fs'), described in fs.go. require of anything
// else throws an Error with code MODULE_NOT_FOUND. There is no network
// API, no Buffer and no TextEncoder.
//
// Exit status: the code given to process.exit, else process.exitCode,
// else 0 once the script has run and no timer is left. An uncaught
// exception or an unhandled promise rejection prints "Uncaught " and the
// error's stack to stderr and exits 1, and so does recursion deeper than
// maxCallDepth (which the script cannot catch); a syntax error prints
// "SyntaxError: " and the message and exits 1; so does a FILE that cannot
// be read. A command line it does not understand exits 2.
package main

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/dop251/goja"
)

//go:embed prelude.js
var prelude string

func main() {
	os.Exit(run(os.Args[1:]))
}

// run runs the command line args (without the program name) and returns
// the exit status. process.exit does not return here: it exits at once.
func run(args []string) int {
	name, src, argv, err := source(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "js:", err)
		var u usageError
		if errors.As(err, &u) {
			return 2
		}
		return 1
	}
	prg, err := goja.Compile(name, src, false)
	if err != nil {
		var se *goja.CompilerSyntaxError
		if errors.As(err, &se) {
			fmt.Fprintln(os.Stderr, "SyntaxError:", se.Error())
		} else {
			fmt.Fprintln(os.Stderr, err)
		}
		return 1
	}
	g := newGuest(argv)
	if _, err := g.vm.RunProgram(prg); err != nil {
		return g.uncaught(err)
	}
	if code, ok := g.drain(); !ok {
		return code
	}
	return g.exitCode()
}

// usageError is a command line js does not understand.
type usageError string

func (u usageError) Error() string {
	return string(u) + "\nusage: js -e CODE [args...] | js FILE [args...] | js < FILE"
}

// source reads the script the command line names and returns its name
// (for stack traces), its text and process.argv.
func source(args []string) (name, src string, argv []string, err error) {
	switch {
	case len(args) == 0:
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return "", "", nil, fmt.Errorf("read stdin: %w", err)
		}
		return "[stdin]", string(b), []string{"js"}, nil
	case args[0] == "-e" || args[0] == "--eval":
		if len(args) < 2 {
			return "", "", nil, usageError(args[0] + " needs the code to run")
		}
		return "[eval]", args[1], append([]string{"js"}, args[2:]...), nil
	case len(args[0]) > 1 && args[0][0] == '-':
		return "", "", nil, usageError("unknown option " + args[0])
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		return "", "", nil, fmt.Errorf("cannot read %s: %w", args[0], err)
	}
	return args[0], string(b), append([]string{"js"}, args...), nil
}

// maxCallDepth bounds recursion, about as node does; deeper, the script
// ends as by an uncaught RangeError, which (unlike node's) it cannot catch.
const maxCallDepth = 10000

// guest is the JavaScript runtime with the globals this command gives it.
type guest struct {
	vm       *goja.Runtime
	process  *goja.Object
	inspect  goja.Callable
	loop     loop
	rejected []*goja.Promise // rejected with no handler yet, in order
}

// newGuest returns a runtime with process, console, require and the
// timers set up, process.argv being argv.
func newGuest(argv []string) *guest {
	vm := goja.New()
	vm.SetMaxCallStackSize(maxCallDepth)
	g := &guest{vm: vm, process: vm.NewObject()}
	g.loop.vm = vm
	vm.SetPromiseRejectionTracker(g.trackRejection)

	env := vm.NewObject()
	for _, kv := range os.Environ() {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				must(env.Set(kv[:i], kv[i+1:]))
				break
			}
		}
	}
	p := g.process
	must(p.Set("argv", argv))
	must(p.Set("env", env))
	must(p.Set("platform", "wasip1"))
	must(p.Set("cwd", func() string {
		wd, err := os.Getwd()
		if err != nil {
			return "/"
		}
		return wd
	}))
	must(p.Set("exit", func(call goja.FunctionCall) goja.Value {
		code := g.exitCode()
		if a := call.Argument(0); !goja.IsUndefined(a) {
			code = int(a.ToInteger())
		}
		os.Exit(code)
		return nil
	}))

	global := vm.GlobalObject()
	must(global.Set("global", global))
	must(global.Set("process", p))
	must(global.Set("require", g.require))
	g.loop.install(global)

	fn, err := vm.RunString(prelude)
	must(err)
	call, _ := goja.AssertFunction(fn)
	native := vm.NewObject()
	must(native.Set("process", p))
	must(native.Set("write", func(fd int, s string) {
		w := os.Stdout
		if fd == 2 {
			w = os.Stderr
		}
		io.WriteString(w, s)
	}))
	inspect, err := call(goja.Undefined(), native)
	must(err)
	g.inspect, _ = goja.AssertFunction(inspect)
	return g
}

// require returns the module named by its first argument: only fs is
// built in, and there are no module files.
func (g *guest) require(call goja.FunctionCall) goja.Value {
	name := call.Argument(0).String()
	switch name {
	case "fs", "node:fs":
		return newFS(g.vm)
	}
	msg := fmt.Sprintf("Cannot find module '%s': this sandbox has only the built-in module 'fs'", name)
	switch name {
	case "net", "node:net", "http", "node:http", "https", "node:https", "dgram", "node:dgram", "tls", "node:tls", "dns", "node:dns", "http2", "node:http2":
		msg += " and no network"
	}
	e := g.vm.NewGoError(errors.New(msg))
	must(e.Set("name", "Error"))
	must(e.Set("code", "MODULE_NOT_FOUND"))
	panic(e)
}

// trackRejection keeps the promises rejected with no handler, to report
// the first one left after a task as uncaught.
func (g *guest) trackRejection(p *goja.Promise, op goja.PromiseRejectionOperation) {
	switch op {
	case goja.PromiseRejectionReject:
		g.rejected = append(g.rejected, p)
	case goja.PromiseRejectionHandle:
		for i, q := range g.rejected {
			if q == p {
				g.rejected = append(g.rejected[:i], g.rejected[i+1:]...)
				break
			}
		}
	}
}

// drain runs the timers until none is left. It returns ok, or the exit
// status when a callback throws or a rejection goes unhandled.
func (g *guest) drain() (code int, ok bool) {
	for {
		if len(g.rejected) > 0 {
			g.report(g.rejected[0].Result())
			return 1, false
		}
		more, err := g.loop.runNext()
		if err != nil {
			return g.uncaught(err), false
		}
		if !more {
			return 0, true
		}
	}
}

// exitCode returns process.exitCode as an integer, 0 when unset.
func (g *guest) exitCode() int {
	v := g.process.Get("exitCode")
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return 0
	}
	return int(v.ToInteger())
}

// uncaught reports an error a script threw and returns exit status 1.
func (g *guest) uncaught(err error) int {
	var ex *goja.Exception
	var so *goja.StackOverflowError
	if errors.As(err, &so) {
		fmt.Fprintln(os.Stderr, "Uncaught RangeError: Maximum call stack size exceeded")
	} else if errors.As(err, &ex) {
		g.report(ex.Value())
	} else {
		fmt.Fprintln(os.Stderr, "Uncaught", err)
	}
	return 1
}

// report prints an uncaught value: an Error's stack, anything else as
// console.log shows it.
func (g *guest) report(v goja.Value) {
	s := ""
	if o, ok := v.(*goja.Object); ok {
		if st := o.Get("stack"); st != nil && !goja.IsUndefined(st) {
			s = st.String()
		}
	}
	if s == "" {
		if r, err := g.inspect(goja.Undefined(), v, g.vm.ToValue(1), g.vm.NewArray()); err == nil {
			s = r.String()
		} else {
			s = v.String()
		}
	}
	for len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
	}
	fmt.Fprintln(os.Stderr, "Uncaught", s)
}

// must panics on an error that only a bug in this program can cause.
func must(err error) {
	if err != nil {
		panic(err)
	}
}
