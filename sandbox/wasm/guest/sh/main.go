// Command sh is the built-in shell of the wasm sandbox runtime, compiled
// to a WASI (preview1) command module (GOOS=wasip1 GOARCH=wasm; see
// sandbox/wasm's go:generate line) and embedded as sandbox/wasm/sh.wasm.
//
// It is a small sh: "sh -c SCRIPT", "sh FILE" and "sh" (the script on
// stdin), with the grammar the conformance suite uses and little more:
// statements joined by ";", newlines, "&&" and "||"; words with '...',
// "..." and backslash quoting; $NAME, ${NAME} and $?; the redirections
// >, >>, <, 2>, >&2, 1>&2 and 2>&1; comments. Pipes, "&", globs,
// assignments and control flow are syntax errors or literal text. The
// programs are builtins, run in the same process: echo, cat, sleep, pwd,
// true, false, test and [, ls, mkdir (-p, -m MODE), chmod, rm, mv, env,
// and exit and cd. Any other name is a module of the sandbox's files (a
// path, or a name ending in ".wasm"), which the runtime runs for the
// shell (the host function spawn of sandbox/wasm/internal/hostabi) with
// the shell's environment, working folder and redirections; a name that
// is none ends with 127 and "not found", a file that is no module with
// 126, as a shell's do. Started as one of the program names (argv[0] is
// "echo", not "sh") it runs that program with the other arguments.
//
// It works on the WASI filesystem the runtime mounts at "/". Go's wasip1
// port takes the working folder from $PWD, which the runtime sets. WASI
// has no permission bits: chmod, mkdir -m and test -r, -w and -x use the
// host functions chmod and mode.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kilnhq/kiln/sandbox/internal/shscript"
	"github.com/kilnhq/kiln/sandbox/wasm/internal/hostabi"
)

func main() {
	args := os.Args
	if len(args) == 0 {
		args = []string{"sh"}
	}
	args[0] = path.Base(args[0])
	sh := &shell{env: environ(), stdin: os.Stdin, out: [3]io.Writer{nil, os.Stdout, os.Stderr},
		to: [3]hostabi.Target{{}, {Stream: 1}, {Stream: 2}}}
	if wd, err := os.Getwd(); err == nil {
		sh.dir = wd
	} else {
		sh.dir = "/"
	}
	os.Exit(sh.program(args))
}

// environ returns the environment as a map.
func environ() map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// shell is the state of one script: its variables, working folder,
// input and outputs.
type shell struct {
	env    map[string]string
	dir    string
	stdin  io.Reader
	out    [3]io.Writer // [1] stdout, [2] stderr
	status int          // $?

	// to and from say where out and stdin lead, for a module the shell
	// starts: the command's streams or the files of redirections.
	to   [3]hostabi.Target
	from string // "" is the command's stdin
}

// program runs args[0], a builtin, and returns its exit code.
func (sh *shell) program(args []string) int {
	switch args[0] {
	case "sh":
		return sh.sh(args[1:])
	case "echo":
		words, nl := args[1:], "\n"
		if len(words) > 0 && words[0] == "-n" {
			words, nl = words[1:], ""
		}
		io.WriteString(sh.out[1], strings.Join(words, " ")+nl)
		return 0
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
		time.Sleep(time.Duration(secs * float64(time.Second)))
		return 0
	case "pwd":
		io.WriteString(sh.out[1], sh.dir+"\n")
		return 0
	case "true":
		return 0
	case "false":
		return 1
	case "test", "[":
		code, msg := shscript.Test(args, sh.stat)
		if msg != "" {
			sh.fail(code, "%s\n", msg)
		}
		return code
	case "chmod":
		return sh.chmod(args[1:])
	case "ls":
		return sh.ls(args[1:])
	case "mkdir":
		return sh.mkdir(args[1:])
	case "rm":
		return sh.rm(args[1:])
	case "mv":
		if len(args) != 3 {
			return sh.fail(1, "mv: want a source and a target\n")
		}
		if err := os.Rename(sh.abs(args[1]), sh.abs(args[2])); err != nil {
			return sh.fail(1, "mv: %s\n", describe(err))
		}
		return 0
	case "env":
		keys := make([]string, 0, len(sh.env))
		for k := range sh.env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(sh.out[1], "%s=%s\n", k, sh.env[k])
		}
		return 0
	}
	return sh.spawn(args)
}

// spawn has the runtime run the module args[0] names (hostabi).
func (sh *shell) spawn(args []string) int {
	env := make([]string, 0, len(sh.env))
	for _, k := range slices.Sorted(maps.Keys(sh.env)) {
		env = append(env, k+"="+sh.env[k])
	}
	req, err := json.Marshal(hostabi.Spawn{Argv: args, Env: env, Dir: sh.dir, Stdin: sh.from, Stdout: sh.to[1], Stderr: sh.to[2]})
	if err != nil {
		return sh.fail(126, "sh: %s: %v\n", args[0], err)
	}
	return spawnRaw(req)
}

// mode returns the mode of the file at the absolute path p.
func mode(p string) (fs.FileMode, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return 0, err
	}
	n := modeRaw(p)
	if n < 0 {
		return 0, &fs.PathError{Op: "stat", Path: p, Err: syscall.Errno(-n)}
	}
	return fi.Mode().Type() | shscript.FromUnix(uint32(n)), nil
}

// chmod sets the mode of the file at the absolute path p.
func chmod(p string, m fs.FileMode) error {
	if errno := chmodRaw(p, shscript.UnixBits(m)); errno != 0 {
		return &fs.PathError{Op: "chmod", Path: p, Err: syscall.Errno(errno)}
	}
	return nil
}

// stat describes the file at name for test.
func (sh *shell) stat(name string) (shscript.File, bool) {
	p := sh.abs(name)
	fi, err := os.Stat(p)
	if err != nil {
		return shscript.File{}, false
	}
	m, err := mode(p)
	if err != nil {
		return shscript.File{}, false
	}
	return shscript.File{Mode: m, Size: fi.Size()}, true
}

// chmod sets modes: MODE FILE...
func (sh *shell) chmod(args []string) int {
	if len(args) < 2 {
		return sh.fail(1, "chmod: want a mode and a file\n")
	}
	code := 0
	for _, name := range args[1:] {
		p := sh.abs(name)
		old, err := mode(p)
		var m fs.FileMode
		if err == nil {
			m, err = shscript.ParseMode(args[0], old)
		}
		if err == nil {
			err = chmod(p, m)
		}
		if err != nil {
			code = sh.fail(1, "chmod: %s: %s\n", name, describeBare(err))
		}
	}
	return code
}

// sh runs "sh -c SCRIPT", "sh FILE" or "sh" (the script on stdin).
func (sh *shell) sh(args []string) int {
	var src []byte
	var err error
	switch {
	case len(args) >= 2 && args[0] == "-c":
		src = []byte(args[1])
	case len(args) >= 1 && args[0] == "-c":
		return sh.fail(2, "sh: -c requires an argument\n")
	case len(args) >= 1:
		if src, err = os.ReadFile(sh.abs(args[0])); err != nil {
			return sh.fail(127, "sh: cannot open %s: %s\n", args[0], describe(err))
		}
	default:
		if src, err = io.ReadAll(sh.stdin); err != nil {
			return sh.fail(2, "sh: read stdin: %v\n", err)
		}
	}
	sub := *sh
	sub.status = 0
	return sub.script(string(src))
}

// fail writes a message to stderr and returns code.
func (sh *shell) fail(code int, format string, args ...any) int {
	fmt.Fprintf(sh.out[2], format, args...)
	return code
}

// describe is err without the path an *fs.PathError repeats.
func describe(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return pe.Path + ": No such file or directory"
		case errors.Is(err, fs.ErrPermission):
			return pe.Path + ": Permission denied"
		}
		return pe.Path + ": " + pe.Err.Error()
	}
	return err.Error()
}

// abs resolves p against the working folder.
func (sh *shell) abs(p string) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	return path.Join(sh.dir, p)
}

func (sh *shell) cat(files []string) int {
	if len(files) == 0 {
		files = []string{"-"}
	}
	code := 0
	for _, name := range files {
		if name == "-" {
			if _, err := io.Copy(sh.out[1], sh.stdin); err != nil {
				code = sh.fail(1, "cat: stdin: %v\n", err)
			}
			continue
		}
		f, err := os.Open(sh.abs(name))
		if err != nil {
			code = sh.fail(1, "cat: %s: %s\n", name, describeBare(err))
			continue
		}
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			f.Close()
			code = sh.fail(1, "cat: %s: Is a directory\n", name)
			continue
		}
		_, err = io.Copy(sh.out[1], f)
		f.Close()
		if err != nil {
			code = sh.fail(1, "cat: %s: %s\n", name, describeBare(err))
		}
	}
	return code
}

// describeBare is what went wrong, without a path.
func describeBare(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "No such file or directory"
	case errors.Is(err, fs.ErrPermission):
		return "Permission denied"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// flags splits leading single-letter flags ("-rf") from the operands.
func flags(args []string) (set map[byte]bool, rest []string) {
	set = map[byte]bool{}
	for len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' {
		if args[0] == "--" {
			return set, args[1:]
		}
		for i := 1; i < len(args[0]); i++ {
			set[args[0][i]] = true
		}
		args = args[1:]
	}
	return set, args
}

// ls lists folders (names only, one a line; -a shows dot files) and
// names files.
func (sh *shell) ls(args []string) int {
	opt, names := flags(args)
	if len(names) == 0 {
		names = []string{"."}
	}
	code := 0
	for i, name := range names {
		fi, err := os.Stat(sh.abs(name))
		if err != nil {
			code = sh.fail(2, "ls: %s: %s\n", name, describeBare(err))
			continue
		}
		if !fi.IsDir() {
			fmt.Fprintln(sh.out[1], name)
			continue
		}
		ents, err := os.ReadDir(sh.abs(name))
		if err != nil {
			code = sh.fail(2, "ls: %s: %s\n", name, describeBare(err))
			continue
		}
		if len(names) > 1 {
			if i > 0 {
				fmt.Fprintln(sh.out[1])
			}
			fmt.Fprintf(sh.out[1], "%s:\n", name)
		}
		for _, e := range ents {
			if opt['a'] || !strings.HasPrefix(e.Name(), ".") {
				fmt.Fprintln(sh.out[1], e.Name())
			}
		}
	}
	return code
}

// mkdir makes folders: [-p] [-m MODE] DIR...; the mode is the last
// folder's, and an existing one keeps its own.
func (sh *shell) mkdir(args []string) int {
	parents, m, names, err := shscript.MkdirArgs(args)
	if err != nil {
		return sh.fail(1, "mkdir: %v\n", err)
	}
	code := 0
	for _, name := range names {
		p := sh.abs(name)
		if fi, err := os.Stat(p); parents && err == nil && fi.IsDir() {
			continue
		}
		if parents {
			err = os.MkdirAll(p, 0o755)
		} else {
			err = os.Mkdir(p, 0o755)
		}
		if err == nil {
			err = chmod(p, m)
		}
		if err != nil {
			code = sh.fail(1, "mkdir: %s: %s\n", name, describeBare(err))
		}
	}
	return code
}

// rm removes files; -r folders with what they hold, -f ignores what is
// missing.
func (sh *shell) rm(args []string) int {
	opt, names := flags(args)
	code := 0
	for _, name := range names {
		p := sh.abs(name)
		fi, err := os.Lstat(p)
		switch {
		case err != nil && opt['f'] && errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			code = sh.fail(1, "rm: %s: %s\n", name, describeBare(err))
			continue
		case fi.IsDir() && !opt['r'] && !opt['R']:
			code = sh.fail(1, "rm: %s: Is a directory\n", name)
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			code = sh.fail(1, "rm: %s: %s\n", name, describeBare(err))
		}
	}
	return code
}
