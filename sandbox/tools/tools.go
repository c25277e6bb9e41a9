// Package tools holds the agent tools over sandboxes: sandbox.exec,
// sandbox.read_file and sandbox.write_file, on a sandbox of the owner's
// default runtime (their sandbox_runtime setting, else the server's),
// and js.eval, on a sandbox of the js runtime. Each thread has its own
// sandbox per runtime, created on its first call
// (Opener, the sandbox service's ForThread) and destroyed with the thread
// or when it expires after its last use; the sandbox runs with no network
// and no host folder, so what a call does stays in it.
//
// sandbox.exec and js.eval are not idempotent: a call cut off by a crash
// becomes a recovery item (retry or skip) instead of running twice. The
// file tools are (a write of the same bytes is the same write). Which
// calls wait for approval is the plugins' default interruptOn, which the
// server's settings set, under each run's own interrupt_on.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sandbox"
)

// Opener gives a thread its own sandbox on a runtime ("" is the owner's
// default), creating it on first use: the sandbox service's ForThread.
type Opener interface {
	ForThread(ctx context.Context, owner, thread, runtime string) (*core.Sandbox, sandbox.Runtime, sandbox.Handle, error)
}

// Limits of the tools.
const (
	// MaxOutput is how much of a command's output a result keeps: the
	// first and last halves when it wrote more, with what was cut said.
	MaxOutput = 64 << 10
	// MaxRead is the most sandbox.read_file returns: with its note on
	// where to read on, within core.DefaultMaxToolResult. A server that
	// keeps less of a result gets smaller pages (core.PageSize).
	MaxRead = 248 << 10
	// MaxWrite is the most sandbox.write_file writes.
	MaxWrite = 8 << 20
	// DefaultTimeout and MaxTimeout bound a command (timeout_s).
	DefaultTimeout = 5 * time.Minute
	MaxTimeout     = time.Hour
)

// SkillFiles returns the folder of the skill named name (its SKILL.md,
// scripts/ ...), or false when there is none.
type SkillFiles func(name string) (fs.FS, bool)

// Stager is an Opener that can show a skill's folder read-only at
// /skills/<name>/ in a thread's sandbox: the sandbox service's
// StageSkill.
type Stager interface {
	StageSkill(rec *core.Sandbox, name string, fsys fs.FS) error
}

// Sandbox returns exec, read_file and write_file (the plugin "sandbox"
// makes them sandbox.exec and so on) over the default runtime's thread
// sandboxes. When a skill's subagent calls one, the skill's folder
// (skills, when not nil) is staged into the sandbox first, if o is a
// Stager, so that its scripts run at /skills/<name>/; a sandbox that
// cannot show it fails the call, saying why.
func Sandbox(o Opener, skills SkillFiles) []core.Tool {
	b := box{o, skills}
	return []core.Tool{exec{b}, readFile{b}, writeFile{b}}
}

// JS returns eval (js.eval, as the js plugin's) over the js runtime's
// thread sandboxes.
func JS(o Opener) []core.Tool {
	return []core.Tool{eval{box{o: o}}}
}

// box opens the thread sandboxes of the tools.
type box struct {
	o      Opener
	skills SkillFiles
}

// open returns the sandbox of the calling run's thread on runtime, with
// the skill of a subagent's run staged into it (on the default runtime).
func (b box) open(ctx context.Context, runtime string) (*core.Sandbox, sandbox.Runtime, sandbox.Handle, error) {
	env := core.CallEnvFrom(ctx)
	if env == nil || env.ThreadID == "" {
		return nil, nil, sandbox.Handle{}, core.Errorf(core.EINVALID, "sandbox tools run only in a thread's run")
	}
	rec, r, h, err := b.o.ForThread(ctx, env.OwnerID, env.ThreadID, runtime)
	if err != nil || env.Skill == "" || runtime != "" || b.skills == nil {
		return rec, r, h, err
	}
	st, ok := b.o.(Stager)
	fsys, found := b.skills(env.Skill)
	if !ok || !found {
		return rec, r, h, nil
	}
	if err := st.StageSkill(rec, env.Skill, fsys); err != nil {
		var ce *core.Error
		if errors.As(err, &ce) {
			err = errors.New(ce.Message)
		}
		return nil, nil, sandbox.Handle{}, fmt.Errorf("the %s skill's folder cannot be shown in this thread's sandbox: %w", env.Skill, err)
	}
	return rec, r, h, nil
}

// failure is the tool's own failure for err: the model reads it. A ctx
// that ended is the run's, not the tool's, and goes back as an error.
func failure(ctx context.Context, err error) (core.ToolResult, error) {
	if ctx.Err() != nil {
		return core.ToolResult{}, ctx.Err()
	}
	return core.ErrorResult(err.Error()), nil
}

// decode reads a call's arguments into v, refusing unknown fields.
func decode(tool string, args json.RawMessage, v any) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	d := json.NewDecoder(bytes.NewReader(args))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return core.Errorf(core.EINVALID, "%s: arguments: %v", tool, err)
	}
	return nil
}

// absPath checks a path argument: absolute, made clean.
func absPath(tool, p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", core.Errorf(core.EINVALID, "%s: path %q: want an absolute path in the sandbox (/work/notes.txt)", tool, p)
	}
	return path.Clean(p), nil
}

type exec struct{ b box }

func (exec) Spec() core.ToolSpec {
	return core.ToolSpec{
		Name: "exec",
		Description: "Runs a shell command line (sh -c) in this thread's own sandbox and returns its output (stdout and stderr, in the order written) and exit code. " +
			"The sandbox has no network and no access to the user's files; files written in it stay there for the rest of the thread. " +
			"Running it again runs the command again: it is not idempotent.",
		Schema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
			`"command":{"type":"string","minLength":1,"description":"The command line, run by sh -c."},`+
			`"cwd":{"type":"string","description":"Absolute working folder in the sandbox; default its image's."},`+
			`"timeout_s":{"type":"integer","minimum":1,"maximum":%d,"description":"Seconds before the command is killed; default %d."},`+
			`"stdin":{"type":"string","description":"Text given to the command's standard input."}},`+
			`"required":["command"],"additionalProperties":false}`, int(MaxTimeout/time.Second), int(DefaultTimeout/time.Second))),
	}
}

type execArgs struct {
	Command  string  `json:"command"`
	Cwd      string  `json:"cwd"`
	TimeoutS int     `json:"timeout_s"`
	Stdin    *string `json:"stdin"`
}

func (t exec) Call(ctx context.Context, args json.RawMessage) (core.ToolResult, error) {
	var a execArgs
	if err := decode("sandbox.exec", args, &a); err != nil {
		return core.ErrorResult(err.Error()), nil
	}
	if strings.TrimSpace(a.Command) == "" {
		return core.ErrorResult("sandbox.exec: command is empty"), nil
	}
	if env := core.CallEnvFrom(ctx); env != nil && !core.CommandAllowed(env.Commands, a.Command) {
		return core.ErrorResult(fmt.Sprintf("sandbox.exec: the %s skill allows only commands matching %s (its allowed-tools); this one is not "+
			"(a command with ; & | ` $( or a line break matches none)", env.Skill, strings.Join(env.Commands, ", "))), nil
	}
	req := sandbox.ExecRequest{Command: []string{"sh", "-c", a.Command}}
	if a.Cwd != "" {
		dir, err := absPath("sandbox.exec", a.Cwd)
		if err != nil {
			return core.ErrorResult(err.Error()), nil
		}
		req.Dir = dir
	}
	if a.Stdin != nil {
		req.Stdin = strings.NewReader(*a.Stdin)
	}
	return run(ctx, t.b, "", req, a.TimeoutS, "sandbox.exec")
}

// run runs req in the thread's sandbox of runtime and makes its result:
// the output (kept to MaxOutput), then the exit code. Output is also sent
// as it comes as the call's progress ({"stream", "text"}).
func run(ctx context.Context, b box, runtime string, req sandbox.ExecRequest, timeoutS int, tool string) (core.ToolResult, error) {
	timeout := DefaultTimeout
	if timeoutS != 0 {
		if timeoutS < 1 || time.Duration(timeoutS)*time.Second > MaxTimeout {
			return core.ErrorResult(fmt.Sprintf("%s: timeout_s %d: want 1 to %d", tool, timeoutS, int(MaxTimeout/time.Second))), nil
		}
		timeout = time.Duration(timeoutS) * time.Second
	}
	_, r, h, err := b.open(ctx, runtime)
	if err != nil {
		return failure(ctx, err)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := &core.TextCap{Max: MaxOutput}
	st, err := r.Exec(cctx, h, req, func(ev sandbox.ExecEvent) {
		out.Write(ev.Data)
		if p, err := json.Marshal(map[string]string{"stream": ev.Stream.String(), "text": strings.ToValidUTF8(string(ev.Data), "\uFFFD")}); err == nil {
			core.ReportProgress(ctx, p)
		}
	})
	switch {
	case ctx.Err() != nil:
		return core.ToolResult{}, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return core.ErrorResult(fmt.Sprintf("%s\n[killed after %s: the command ran past its timeout]", out.String(), timeout)), nil
	case errors.Is(err, fs.ErrNotExist) && req.Dir != "":
		return core.ErrorResult(fmt.Sprintf("%s: cwd %q is not a folder in the sandbox", tool, req.Dir)), nil
	case errors.Is(err, sandbox.ErrPaused):
		return core.ErrorResult(tool + ": this thread's sandbox is paused; resume it (kiln sandbox resume, or the Sandboxes page) and try again"), nil
	case err != nil:
		return failure(ctx, fmt.Errorf("%s: %w", tool, err))
	}
	text := out.String()
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return core.TextResult(fmt.Sprintf("%s[exit code %d]", text, st.Code)), nil
}

type readFile struct{ b box }

func (readFile) Spec() core.ToolSpec {
	return core.ToolSpec{
		Name:        "read_file",
		Description: fmt.Sprintf("Reads a text file in this thread's sandbox (up to %d KiB from offset). For a binary file use sandbox.exec (base64, od).", MaxRead>>10),
		Schema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
			`"path":{"type":"string","description":"Absolute path in the sandbox."},`+
			`"offset":{"type":"integer","minimum":0,"description":"Byte to start at; default 0."},`+
			`"limit":{"type":"integer","minimum":1,"maximum":%d,"description":"Most bytes to return; default %d."}},`+
			`"required":["path"],"additionalProperties":false}`, MaxRead, MaxRead)),
		Idempotent: true,
	}
}

func (t readFile) Call(ctx context.Context, args json.RawMessage) (core.ToolResult, error) {
	var a struct {
		Path   string `json:"path"`
		Offset int64  `json:"offset"`
		Limit  int    `json:"limit"`
	}
	if err := decode("sandbox.read_file", args, &a); err != nil {
		return core.ErrorResult(err.Error()), nil
	}
	p, err := absPath("sandbox.read_file", a.Path)
	if err != nil {
		return core.ErrorResult(err.Error()), nil
	}
	if a.Offset < 0 || a.Limit < 0 || a.Limit > MaxRead {
		return core.ErrorResult(fmt.Sprintf("sandbox.read_file: want offset >= 0 and limit 1 to %d", MaxRead)), nil
	}
	limit := a.Limit
	if limit == 0 {
		limit = MaxRead
	}
	limit = core.PageSize(ctx, limit)
	_, r, h, err := t.b.open(ctx, "")
	if err != nil {
		return failure(ctx, err)
	}
	fi, err := r.Stat(ctx, h, p)
	if err != nil {
		return failure(ctx, fmt.Errorf("sandbox.read_file: %w", err))
	}
	if fi.IsDir() {
		return core.ErrorResult(fmt.Sprintf("sandbox.read_file: %s is a folder; list it with sandbox.exec (ls -la %s)", p, p)), nil
	}
	rc, err := r.ReadFile(ctx, h, p)
	if err != nil {
		return failure(ctx, fmt.Errorf("sandbox.read_file: %w", err))
	}
	defer rc.Close()
	if _, err := io.CopyN(io.Discard, rc, a.Offset); err != nil && !errors.Is(err, io.EOF) {
		return failure(ctx, fmt.Errorf("sandbox.read_file: %w", err))
	}
	b, err := io.ReadAll(io.LimitReader(rc, int64(limit)))
	if err != nil {
		return failure(ctx, fmt.Errorf("sandbox.read_file: %w", err))
	}
	if !utf8.Valid(b) && !utf8.Valid(trimPartialRune(b)) {
		return core.ErrorResult(fmt.Sprintf("sandbox.read_file: %s is not text (%d bytes); read it with sandbox.exec (base64 %s)", p, fi.Size, p)), nil
	}
	text := string(b)
	if end := a.Offset + int64(len(b)); end < fi.Size {
		text += fmt.Sprintf("\n[%d of %d bytes shown; read on with offset %d]", len(b), fi.Size, end)
	}
	return core.TextResult(text), nil
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b, as
// a read that stops at a limit may leave.
func trimPartialRune(b []byte) []byte {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}

type writeFile struct{ b box }

func (writeFile) Spec() core.ToolSpec {
	return core.ToolSpec{
		Name:        "write_file",
		Description: "Creates or replaces a file in this thread's sandbox with the given text, creating the folders above it.",
		Schema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
			`"path":{"type":"string","description":"Absolute path in the sandbox."},`+
			`"content":{"type":"string","maxLength":%d,"description":"The file's text."},`+
			`"executable":{"type":"boolean","description":"Make it executable (mode 0755); default 0644."}},`+
			`"required":["path","content"],"additionalProperties":false}`, MaxWrite)),
		Idempotent: true,
	}
}

func (t writeFile) Call(ctx context.Context, args json.RawMessage) (core.ToolResult, error) {
	var a struct {
		Path       string `json:"path"`
		Content    string `json:"content"`
		Executable bool   `json:"executable"`
	}
	if err := decode("sandbox.write_file", args, &a); err != nil {
		return core.ErrorResult(err.Error()), nil
	}
	p, err := absPath("sandbox.write_file", a.Path)
	if err != nil {
		return core.ErrorResult(err.Error()), nil
	}
	if p == "/" {
		return core.ErrorResult("sandbox.write_file: path / is a folder"), nil
	}
	if len(a.Content) > MaxWrite {
		return core.ErrorResult(fmt.Sprintf("sandbox.write_file: content is %d bytes, over %d", len(a.Content), MaxWrite)), nil
	}
	perm := fs.FileMode(0o644)
	if a.Executable {
		perm = 0o755
	}
	_, r, h, err := t.b.open(ctx, "")
	if err != nil {
		return failure(ctx, err)
	}
	if err := r.WriteFile(ctx, h, p, strings.NewReader(a.Content), perm); err != nil {
		return failure(ctx, fmt.Errorf("sandbox.write_file: %w", err))
	}
	return core.TextResult(fmt.Sprintf("wrote %d bytes to %s", len(a.Content), p)), nil
}

type eval struct{ b box }

func (eval) Spec() core.ToolSpec {
	return core.ToolSpec{
		Name: "eval",
		Description: "Runs JavaScript (ES2020: console, timers, Promises, require('fs') over the sandbox's own files) in this thread's JavaScript sandbox and returns what it printed, " +
			"then the value of its last expression (awaited when it is a Promise) unless undefined, and the exit code. No network, no access to the user's files; a deadline and a memory cap stop a runaway script. " +
			"Not idempotent: running it again runs the code again.",
		Schema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
			`"code":{"type":"string","minLength":1,"description":"The script."},`+
			`"timeout_s":{"type":"integer","minimum":1,"maximum":%d,"description":"Seconds before it is stopped; default %d."}},`+
			`"required":["code"],"additionalProperties":false}`, int(MaxTimeout/time.Second), int(DefaultTimeout/time.Second))),
	}
}

// evalPrelude runs the code by indirect eval, in the global scope, and
// prints its completion value as node -p does.
// (An exception, thrown or a rejection, ends it as an uncaught one: its
// stack on stderr, exit code 1.)
const evalPrelude = `Promise.resolve((0, eval)(%s)).then(v => { if (v !== undefined) console.log(v) })`

func (t eval) Call(ctx context.Context, args json.RawMessage) (core.ToolResult, error) {
	var a struct {
		Code     string `json:"code"`
		TimeoutS int    `json:"timeout_s"`
	}
	if err := decode("js.eval", args, &a); err != nil {
		return core.ErrorResult(err.Error()), nil
	}
	if strings.TrimSpace(a.Code) == "" {
		return core.ErrorResult("js.eval: code is empty"), nil
	}
	quoted, err := json.Marshal(a.Code)
	if err != nil {
		return core.ErrorResult("js.eval: " + err.Error()), nil
	}
	req := sandbox.ExecRequest{Command: []string{"js", "-e", fmt.Sprintf(evalPrelude, quoted)}}
	return run(ctx, t.b, "js", req, a.TimeoutS, "js.eval")
}
