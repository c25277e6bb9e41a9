package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/client"
)

// The sandbox commands speak Kiln's OpenSandbox-compatible sandbox API
// (/v1/sandboxes and each sandbox's execution API) through the SDK.

func newSandboxCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "sandbox",
		Aliases: []string{"sandboxes", "sbx"},
		Short:   "Create, list and use sandboxes: run commands and copy files in and out",
		Long: `Sandboxes are isolated environments for commands and files, served by
Kiln's OpenSandbox-compatible API under /v1/sandboxes (OpenSandbox's SDKs
work against it too). A sandbox runs on a runtime: docker (a container
from an image present on the server's host; Kiln pulls none), wasm or js
(built in, no Docker needed: a small shell with echo, cat, ls, mkdir, rm,
mv, env, sleep, true and false; js sandboxes also run JavaScript with
js -e). A sandbox with a timeout is
deleted when it expires; renew pushes that back. An agent thread's own
sandbox carries its thread in the kiln.io/thread metadata key.`,
		Example: `  id=$(kiln sandbox create --runtime wasm --timeout 1h)
  kiln sandbox exec "$id" -- echo hello
  kiln sandbox cp ./data.csv "$id":/tmp/data.csv
  kiln sandbox cp "$id":/tmp/out.txt .
  kiln sandbox rm --yes "$id"`,
	}
	parentCmd(cmd)
	cmd.AddCommand(newSandboxCreateCmd(a), newSandboxListCmd(a), newSandboxExecCmd(a), newSandboxCopyCmd(a),
		newSandboxRemoveCmd(a), newSandboxPauseCmd(a, true), newSandboxPauseCmd(a, false), newSandboxRenewCmd(a))
	return cmd
}

// sandboxError adds what the user can do to the sandbox API's errors
// about sandbox id: a 404 is a sandbox that does not exist (or no
// longer), a 501 what its runtime cannot do.
func (a *app) sandboxError(err error, id string) error {
	switch {
	case client.IsNotFound(err):
		return hintError{fmt.Errorf("sandbox %s not found", id), "'" + a.kilnCmd() + " sandbox ls' lists the sandboxes; one with a timeout is deleted when it expires."}
	case client.IsNotImplemented(err):
		return hintError{err, "Only docker sandboxes can pause; wasm and js sandboxes keep running until they are deleted or expire."}
	case client.IsConflict(err):
		return hintError{err, "'" + a.kilnCmd() + " sandbox ls' shows its state."}
	}
	return err
}

// parseLifetime reads a --timeout: a duration of at least a second, or
// "none" (0) for a sandbox that lives until it is deleted.
func parseLifetime(s string, noneOK bool) (time.Duration, error) {
	if noneOK && strings.EqualFold(s, "none") {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second {
		want := "a duration of at least 1s, such as 30m or 2h"
		if noneOK {
			want += ", or none"
		}
		return 0, usageError{fmt.Errorf("--timeout %q: want %s", s, want)}
	}
	return d, nil
}

func newSandboxCreateCmd(a *app) *cobra.Command {
	var (
		in        client.SandboxInput
		timeout   string
		env, meta []string
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a sandbox and print its ID",
		Long: `Creates a sandbox and prints its ID once it runs. With --timeout none it
lives until 'kiln sandbox rm'; otherwise the server deletes it when the
timeout has passed (renew extends it). On a terminal, standard error shows
how long starting it takes: for docker that is creating and starting a
container from an image already on the server's host, as Kiln pulls none.`,
		Example: `  kiln sandbox create --runtime wasm
  kiln sandbox create --image python:3.12-slim --timeout 2h --cpu 1 --memory 1Gi --env MODE=test --meta team=data`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if in.Timeout, err = parseLifetime(timeout, true); err != nil {
				return err
			}
			if in.Env, err = pairs(env, "=", "--env", "KEY=VALUE"); err != nil {
				return err
			}
			if in.Metadata, err = pairs(meta, "=", "--meta", "KEY=VALUE"); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			errw := cmd.ErrOrStderr()
			var stop func()
			if stderrIsTerminal(errw) {
				what := "the sandbox"
				switch {
				case in.Image != "":
					what = "a sandbox from " + in.Image
				case in.Runtime != "":
					what = "a " + in.Runtime + " sandbox"
				}
				stop = elapsedLine(errw, "Starting "+what, time.Now)
			}
			sb, err := c.CreateSandbox(cmd.Context(), in)
			if stop != nil {
				stop()
			}
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(cmd.OutOrStdout(), sb)
			}
			fmt.Fprintln(cmd.OutOrStdout(), sb.ID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.Image, "image", "", "the image of a docker sandbox, present on the server's host (default: the server's)")
	f.StringVar(&in.Runtime, "runtime", "", "the runtime: "+orList(sandboxRuntimes)+", or an installed one (default: your sandbox_runtime setting, else the server's)")
	f.StringVar(&timeout, "timeout", "30m", "how long it lives before the server deletes it, or none")
	f.StringVar(&in.CPU, "cpu", "", "the CPU limit, in cores: 0.5, 2, 500m")
	f.StringVar(&in.Memory, "memory", "", "the memory limit: 512Mi, 2Gi")
	f.StringArrayVar(&env, "env", nil, "an environment variable, `KEY=VALUE` (repeatable)")
	f.StringArrayVar(&meta, "meta", nil, "a metadata label, `KEY=VALUE` (repeatable)")
	_ = cmd.RegisterFlagCompletionFunc("runtime", func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		return a.completeFrom(cmd, enabledSandboxRuntimes)
	})
	_ = cmd.RegisterFlagCompletionFunc("timeout", cobra.FixedCompletions([]string{"30m", "1h", "none"}, noFiles))
	return cmd
}

// elapsedLine redraws "what… 3s" on w, a terminal, every tenth of a
// second until the returned function is called, which clears it.
func elapsedLine(w io.Writer, what string, now func() time.Time) (stop func()) {
	start := now()
	done, exited := make(chan struct{}), make(chan struct{})
	draw := func() { fmt.Fprintf(w, "\r%s… %s\x1b[K", what, duration(now().Sub(start))) }
	draw()
	go func() {
		defer close(exited)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\x1b[K")
				return
			case <-t.C:
				draw()
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-exited }) }
}

func newSandboxListCmd(a *app) *cobra.Command {
	var states, meta []string
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the sandboxes",
		Long: `Lists the sandboxes, newest first: their state, runtime, image, when they
expire and, for an agent thread's own sandbox, its thread.`,
		Example: `  kiln sandbox ls --state Running --state Paused
  kiln sandbox ls --meta team=data`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := client.SandboxListOptions{States: states, PageSize: 200}
			var err error
			if opts.Metadata, err = pairs(meta, "=", "--meta", "KEY=VALUE"); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var list []*client.Sandbox
			for opts.Page = 1; ; opts.Page++ {
				page, err := c.Sandboxes(cmd.Context(), opts)
				if err != nil {
					return err
				}
				list = append(list, page.Items...)
				if !page.HasNextPage || len(page.Items) == 0 {
					break
				}
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				if list == nil {
					list = []*client.Sandbox{}
				}
				return writeJSON(w, map[string]any{"sandboxes": list})
			}
			if len(list) == 0 {
				fmt.Fprintf(w, "No sandboxes. Create one with %s sandbox create.\n", a.kilnCmd())
				return nil
			}
			st := styleFor(w)
			now := time.Now()
			t := &table{st: st, header: []string{"ID", "STATE", "RUNTIME", "IMAGE", "EXPIRES", "THREAD"}}
			for _, sb := range list {
				t.add(sandboxRow(st, sb, now)...)
			}
			t.render(w)
			for _, sb := range list {
				if sb.Status.State == client.SandboxFailed && sb.Status.Message != "" {
					fmt.Fprintf(w, "\n%s: %s\n", sb.ID, strings.TrimSpace(sb.Status.Message))
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&states, "state", nil, "only sandboxes in this state: Pending, Running, Paused, Failed (repeatable)")
	f.StringArrayVar(&meta, "meta", nil, "only sandboxes with this metadata label, `KEY=VALUE` (repeatable)")
	_ = cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions([]string{"Pending", "Running", "Paused", "Failed"}, noFiles))
	return cmd
}

// sandboxRow is a sandbox's row of sandbox ls: ID, state, runtime, image
// ("(default)" when the create named none, as an agent thread's own
// sandbox does: the runtime's default image or its one environment),
// when it expires ("-" once it failed or terminated: it is gone, or kept
// only to say why) and its thread ("-" for none).
func sandboxRow(st style, sb *client.Sandbox, now time.Time) []string {
	image := "(default)"
	if sb.Image != nil && sb.Image.URI != "" {
		image = sb.Image.URI
	}
	expires := expiresIn(sb.ExpiresAt, now)
	if sb.Status.State == client.SandboxFailed || sb.Status.State == client.SandboxTerminated {
		expires = "-"
	}
	thread := sb.Metadata[client.MetaThread]
	if thread == "" {
		thread = "-"
	}
	return []string{sb.ID, sandboxState(st, sb.Status.State), sb.Runtime, image, expires, thread}
}

// sandboxState colours a sandbox state by what it means for the user.
func sandboxState(st style, s string) string {
	switch s {
	case client.SandboxRunning:
		return st.green(s)
	case client.SandboxFailed:
		return st.red(s)
	case client.SandboxPaused:
		return st.yellow(s)
	case client.SandboxPending, client.SandboxTerminated:
		return st.dim(s)
	}
	return s
}

// expiresIn formats when a sandbox expires relative to now: "in 29m",
// "expired", or "never" for one without a timeout.
func expiresIn(at *time.Time, now time.Time) string {
	switch {
	case at == nil:
		return "never"
	case !at.After(now):
		return "expired"
	}
	return "in " + duration(at.Sub(now))
}

// commandLine joins the words after -- into the shell command line the
// execution API runs: one word is taken as a command line as it is (so
// that `-- 'echo a | cat'` pipes), several are quoted each.
func commandLine(words []string) string {
	if len(words) == 1 {
		return words[0]
	}
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shellQuote(w)
	}
	return strings.Join(q, " ")
}

func newSandboxExecCmd(a *app) *cobra.Command {
	var (
		cwd, timeout string
		env          []string
	)
	cmd := &cobra.Command{
		Use:   "exec ID [--cwd DIR] [--timeout D] -- COMMAND [ARGS...]",
		Short: "Run a command in a sandbox, streaming its output",
		Long: `Runs a command in a sandbox with sh -c and streams its standard output and
error to this command's as they arrive; kiln exits with the command's
exit status. A single word after -- is taken as a whole command line
(pipes and redirections work); several are quoted each. Ctrl-C stops the
command. With -o json each event of the execution API is printed as a
line of JSON instead.`,
		Example: `  kiln sandbox exec $id -- ls -la /tmp
  kiln sandbox exec $id --cwd /work --timeout 5m -- 'make test 2>&1 | tail -20'`,
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			switch {
			case len(args) == 0 || dash == 0:
				return usageError{errors.New("missing ID")}
			case dash < 0:
				return usageError{fmt.Errorf("missing the command: give it after --, as in kiln sandbox exec %s -- echo hello", args[0])}
			case dash > 1:
				return usageError{fmt.Errorf("too many arguments before --: %s takes ID", cmd.CommandPath())}
			case len(args) == 1:
				return usageError{errors.New("missing the command after --")}
			}
			return nil
		},
		ValidArgsFunction: firstArg(a.completeSandboxes),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			req := client.ExecRequest{Command: commandLine(args[1:]), Cwd: cwd}
			var err error
			if timeout != "" {
				if req.Timeout, err = parseLifetime(timeout, false); err != nil {
					return err
				}
			}
			if req.Env, err = pairs(env, "=", "--env", "KEY=VALUE"); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			code, err := c.Exec(cmd.Context(), id, req, func(ev client.ExecEvent) {
				switch {
				case a.jsonOutput():
					if ev.Type != "ping" {
						_ = writeJSONLine(out, ev)
					}
				case ev.Type == "stdout":
					io.WriteString(out, ev.Output())
				case ev.Type == "stderr":
					io.WriteString(errw, ev.Output())
				}
			})
			var ee *client.ExecError
			switch {
			case errors.As(err, &ee) && ee.Name == "TimeoutError":
				return fmt.Errorf("the command did not finish within --timeout %s and was stopped", timeout)
			case errors.As(err, &ee):
				return fmt.Errorf("the command failed: %s", ee.Error())
			case err != nil && cmd.Context().Err() == nil:
				return a.sandboxError(err, id)
			case err != nil:
				return err
			case code != 0:
				return &exitError{code: code}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cwd, "cwd", "", "the working directory, an absolute path in the sandbox")
	f.StringVar(&timeout, "timeout", "", "stop the command after this long, such as 30s or 10m (default: no limit)")
	f.StringArrayVar(&env, "env", nil, "an environment variable of the command, `KEY=VALUE` (repeatable)")
	return cmd
}

// sandboxPath splits "ID:/path", a path in a sandbox; ok is false for a
// local path (one without a colon before its first slash, or whose part
// after the colon is not absolute).
func sandboxPath(s string) (id, p string, ok bool) {
	id, p, ok = strings.Cut(s, ":")
	if !ok || id == "" || strings.Contains(id, "/") || !strings.HasPrefix(p, "/") {
		return "", "", false
	}
	return id, p, true
}

func newSandboxCopyCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy a file into or out of a sandbox",
		Long: `Copies one file between this machine and a sandbox; the sandbox's side is
written ID:/absolute/path. A destination that is a folder (or ends in /)
gets the source's name. "-" is standard input or output. The bytes are
streamed and arrive unchanged; a download is written beside its
destination and renamed into place only when complete. On a terminal,
copies of 1 MiB or more show their progress and rate on standard error.`,
		Example: `  kiln sandbox cp ./data.csv $id:/tmp/data.csv
  kiln sandbox cp $id:/tmp/report.pdf .
  tar cz src | kiln sandbox cp - $id:/tmp/src.tgz`,
		Args: needArgs("SRC", "DST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			srcID, srcPath, srcRemote := sandboxPath(args[0])
			dstID, dstPath, dstRemote := sandboxPath(args[1])
			switch {
			case srcRemote && dstRemote:
				return usageError{errors.New("both sides are in a sandbox: copy through this machine, or use cp inside one sandbox with kiln sandbox exec")}
			case !srcRemote && !dstRemote:
				return usageError{errors.New("neither side is in a sandbox: write one as ID:/absolute/path")}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if dstRemote {
				return a.upload(cmd, c, args[0], dstID, dstPath)
			}
			return a.download(cmd, c, srcID, srcPath, args[1])
		},
	}
	return cmd
}

// upload copies the local file src (or standard input, "-") to p in
// sandbox id.
func (a *app) upload(cmd *cobra.Command, c *client.Client, src, id, p string) error {
	ctx := cmd.Context()
	var r io.Reader = cmd.InOrStdin()
	size, name := int64(-1), "stdin"
	if src != "-" {
		f, err := os.Open(src)
		if err != nil {
			return localError{err: err}
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return localError{err: err}
		}
		if !fi.Mode().IsRegular() {
			return localError{err: fmt.Errorf("%s is not a regular file (kiln sandbox cp copies one file)", src)}
		}
		r, size, name = f, fi.Size(), filepath.Base(src)
	}
	if strings.HasSuffix(p, "/") {
		p += name
	} else if fi, err := c.StatFile(ctx, id, p); err == nil && fi.Type == "directory" {
		p = path.Join(p, name)
	} else if err != nil && (!client.IsNotFound(err) || sandboxMissing(err)) {
		return a.sandboxError(err, id)
	}
	errw := cmd.ErrOrStderr()
	var progress func(int64, int64)
	if stderrIsTerminal(errw) && (size < 0 || size >= progressMin) {
		progress = transferLine(errw, "Uploading "+name, time.Now)
	}
	if err := c.Upload(ctx, id, p, r, size, progress); err != nil {
		if client.IsNotFound(err) && !sandboxMissing(err) {
			return fmt.Errorf("%s:%s: %w (its folder must exist)", id, p, err)
		}
		return a.sandboxError(err, id)
	}
	if size < 0 && progress != nil {
		progress(-1, -1)
	}
	if !a.jsonOutput() {
		fmt.Fprintf(cmd.OutOrStdout(), "Copied %s to %s:%s.\n", sizeOrFile(size), id, p)
	}
	return nil
}

// download copies p in sandbox id to the local dst (or standard output,
// "-").
func (a *app) download(cmd *cobra.Command, c *client.Client, id, p, dst string) error {
	ctx := cmd.Context()
	errw := cmd.ErrOrStderr()
	var progress func(int64, int64)
	if stderrIsTerminal(errw) {
		line := transferLine(errw, "Downloading "+path.Base(p), time.Now)
		progress = func(got, total int64) {
			if total < 0 || total >= progressMin {
				line(got, total)
			}
		}
	}
	if dst == "-" {
		_, err := c.Download(ctx, id, p, cmd.OutOrStdout(), progress)
		return a.downloadError(err, id, p)
	}
	if fi, err := os.Stat(dst); (err == nil && fi.IsDir()) || strings.HasSuffix(dst, string(os.PathSeparator)) {
		dst = filepath.Join(dst, path.Base(p))
	}
	f, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*.part")
	if err != nil {
		return localError{err: err}
	}
	defer os.Remove(f.Name())
	n, err := c.Download(ctx, id, p, f, progress)
	if cerr := f.Close(); err == nil && cerr != nil {
		return localError{err: cerr}
	}
	if err != nil {
		return a.downloadError(err, id, p)
	}
	if err := os.Rename(f.Name(), dst); err != nil {
		return localError{err: err}
	}
	if !a.jsonOutput() {
		fmt.Fprintf(cmd.OutOrStdout(), "Copied %s to %s.\n", core.FormatBytes(n), dst)
	}
	return nil
}

// downloadError tells a missing file from a missing sandbox.
func (a *app) downloadError(err error, id, p string) error {
	if err == nil || !client.IsNotFound(err) {
		if err != nil {
			return a.sandboxError(err, id)
		}
		return nil
	}
	if sandboxMissing(err) {
		return a.sandboxError(err, id)
	}
	return fmt.Errorf("%s:%s: no such file in the sandbox", id, p)
}

// sandboxMissing reports whether a not-found error is the sandbox API's,
// for the sandbox, rather than its execution API's, for a file in it.
func sandboxMissing(err error) bool {
	var e *client.Error
	return client.IsNotFound(err) && errors.As(err, &e) && strings.HasPrefix(e.Code, "SANDBOX::")
}

func sizeOrFile(n int64) string {
	if n < 0 {
		return "standard input"
	}
	return core.FormatBytes(n)
}

// transferLine returns a progress callback that redraws one line on w, a
// terminal, at most every tenth of a second: the bytes so far, of the
// total when known, and the rate. It ends the line when the transfer is
// complete, or when called with (-1, -1) for one of unknown size.
func transferLine(w io.Writer, what string, now func() time.Time) func(done, total int64) {
	start := now()
	var last time.Time
	var drawn bool
	var done int64
	return func(n, total int64) {
		if n < 0 {
			if drawn {
				fmt.Fprintln(w)
			}
			return
		}
		done = n
		complete := total >= 0 && done == total
		t := now()
		if !complete && t.Sub(last) < 100*time.Millisecond {
			return
		}
		last, drawn = t, true
		line := fmt.Sprintf("%s: %s", what, core.FormatBytes(done))
		if total > 0 {
			line += fmt.Sprintf(" of %s (%d%%)", core.FormatBytes(total), done*100/total)
		}
		if secs := t.Sub(start).Seconds(); secs > 0 {
			line += fmt.Sprintf(", %s/s", core.FormatBytes(int64(float64(done)/secs)))
		}
		fmt.Fprintf(w, "\r%s\x1b[K", line)
		if complete {
			fmt.Fprintln(w)
		}
	}
}

func newSandboxRemoveCmd(a *app) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:               "rm ID...",
		Aliases:           []string{"remove", "delete"},
		Short:             "Delete sandboxes with everything in them",
		Args:              atLeastOne("ID"),
		ValidArgsFunction: a.completeSandboxes,
		RunE: func(cmd *cobra.Command, args []string) error {
			err := confirmDestructive(cmd, yes, destructive{
				action: "deleting " + sandboxes(len(args)),
				question: func() (string, error) {
					return fmt.Sprintf("Delete %s (%s) with the files in them?", sandboxes(len(args)), strings.Join(args, ", ")), nil
				},
				declined: "Not deleted.",
			})
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var failed error
			for _, id := range args {
				if err := c.DeleteSandbox(cmd.Context(), id); err != nil {
					if len(args) == 1 {
						return a.sandboxError(err, id)
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "error: %s: %v\n", id, a.sandboxError(err, id))
					failed = &exitError{code: exitFailure}
					continue
				}
				if !a.jsonOutput() {
					fmt.Fprintf(cmd.OutOrStdout(), "Deleted sandbox %s.\n", id)
				}
			}
			return failed
		},
	}
	addYesFlag(cmd, &yes)
	return cmd
}

// sandboxes is "1 sandbox" or "3 sandboxes".
func sandboxes(n int) string {
	if n == 1 {
		return "1 sandbox"
	}
	return fmt.Sprintf("%d sandboxes", n)
}

func newSandboxPauseCmd(a *app, pause bool) *cobra.Command {
	verb, done := "resume", "Resumed"
	if pause {
		verb, done = "pause", "Paused"
	}
	return &cobra.Command{
		Use:               verb + " ID",
		Short:             strings.ToUpper(verb[:1]) + verb[1:] + " a sandbox (docker only)",
		Args:              needArgs("ID"),
		ValidArgsFunction: firstArg(a.completeSandboxes),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			op := c.ResumeSandbox
			if pause {
				op = c.PauseSandbox
			}
			if err := op(cmd.Context(), args[0]); err != nil {
				return a.sandboxError(err, args[0])
			}
			if !a.jsonOutput() {
				fmt.Fprintf(cmd.OutOrStdout(), "%s sandbox %s.\n", done, args[0])
			}
			return nil
		},
	}
}

func newSandboxRenewCmd(a *app) *cobra.Command {
	var timeout string
	cmd := &cobra.Command{
		Use:               "renew ID [--timeout 1h]",
		Short:             "Push back when a sandbox expires",
		Long:              "Sets a sandbox to expire --timeout from now (at most a week after it was created).",
		Args:              needArgs("ID"),
		ValidArgsFunction: firstArg(a.completeSandboxes),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := parseLifetime(timeout, false)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			at, err := c.RenewSandbox(cmd.Context(), args[0], time.Now().Add(d))
			if err != nil {
				return a.sandboxError(err, args[0])
			}
			if a.jsonOutput() {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"id": args[0], "expiresAt": at})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Sandbox %s now expires %s (%s).\n", args[0], expiresIn(&at, time.Now()), at.Local().Format("Jan 2 15:04"))
			return nil
		},
	}
	cmd.Flags().StringVar(&timeout, "timeout", "1h", "how long from now it lives")
	return cmd
}

// completeSandboxes completes a live sandbox's ID, described by its
// state, runtime and thread.
func (a *app) completeSandboxes(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return a.completeFrom(cmd, func(ctx context.Context, c *client.Client) ([]string, error) {
		page, err := c.Sandboxes(ctx, client.SandboxListOptions{PageSize: 200})
		if err != nil {
			return nil, err
		}
		var out []string
		for _, sb := range page.Items {
			desc := sb.Status.State + " " + sb.Runtime
			if th := sb.Metadata[client.MetaThread]; th != "" {
				desc += " " + th
			}
			out = append(out, sb.ID+"\t"+desc)
		}
		return out, nil
	})
}
