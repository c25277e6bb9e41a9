//go:build unix

package process_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/process"
	"github.com/kilnhq/kiln/plugins/skillbundle"
	"github.com/kilnhq/kiln/plugins/toolset"
)

// toolFailed is the tool's own failure (a result with IsError) as text
// returns it.
type toolFailed string

func (f toolFailed) Error() string { return string(f) }

// text returns a call's result as its text, and the tool's own failure
// as a toolFailed error; an error from Call is returned as it is.
func text(res core.ToolResult, err error) (string, error) {
	switch {
	case err != nil:
		return "", err
	case res.IsError:
		return "", toolFailed(res.Text())
	}
	return res.Text(), nil
}

// loaded is a process plugin and its toolset: Call and Tools are the
// toolset's, the rest the plugin's.
type loaded struct {
	*process.Plugin
	ts toolset.Toolset
}

func (l *loaded) Call(ctx context.Context, tool string, args json.RawMessage) (core.ToolResult, error) {
	return l.ts.Call(ctx, tool, args)
}

func (l *loaded) Tools(ctx context.Context) ([]core.ToolSpec, error) { return l.ts.Tools(ctx) }

// loadToolset starts the plugin (process.Load) and dispenses its toolset.
func loadToolset(ctx context.Context, dir string, m *plugins.Manifest, opts process.Options) (*loaded, error) {
	p, err := process.Load(ctx, dir, m, opts)
	if err != nil {
		return nil, err
	}
	ts, err := p.Dispense(ctx, toolset.Name)
	if err != nil {
		p.Close()
		return nil, err
	}
	return &loaded{p, ts.(toolset.Toolset)}, nil
}

// binDir holds the example plugins, built once by TestMain.
var binDir string

func TestMain(m *testing.M) {
	if backend := os.Getenv(sandboxPluginEnv); backend != "" {
		serveSandboxRuntime(backend) // exits
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	binDir, err = os.MkdirTemp("", "kiln-process-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(binDir)
	for name, pkg := range map[string]string{"echo": "github.com/kilnhq/kiln/sdk/plugin/examples/echo", "tlsguest": "./testdata/tlsguest"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, name), pkg).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build the %s plugin: %v\n%s", name, err, out)
			return 1
		}
	}
	return m.Run()
}

// syncBuffer is a log sink safe for the host's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testLogger returns a logger whose output the test prints if it fails.
func testLogger(t testing.TB) *slog.Logger {
	var buf syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("host log:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// pluginDir copies the built example bin into a fresh plugin folder with a
// manifest declaring perms and the binary's sha256, and returns the folder
// and the parsed manifest.
func pluginDir(t testing.TB, bin, perms string) (string, *plugins.Manifest) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(binDir, bin))
	if err != nil {
		t.Fatal(err)
	}
	return plugintest.WritePlugin(t, "test."+bin, plugins.RuntimeProcess, "bin/"+bin, data, perms)
}

// load starts the echo plugin with perms and closes it when the test ends.
func load(t testing.TB, perms string, opts process.Options) (string, *loaded) {
	t.Helper()
	dir, m := pluginDir(t, "echo", perms)
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	ts, err := loadToolset(context.Background(), dir, m, opts)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Cleanup(func() { ts.Close() })
	return dir, ts
}

// alive reports whether a process with the pid exists (a zombie counts).
func alive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}

// waitFor polls cond for up to 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCall(t *testing.T) {
	_, p := load(t, `{}`, process.Options{})
	ctx := context.Background()

	specs, err := p.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	if got, want := strings.Join(names, ","), "echo,env,sleep,fail,pid"; got != want {
		t.Errorf("tools = %s, want %s", got, want)
	}
	if !specs[0].Idempotent || specs[2].Idempotent || string(specs[2].Schema) == "" {
		t.Errorf("specs = %+v", specs)
	}

	got, err := text(p.Call(ctx, "echo", json.RawMessage(`{"hello":"world"}`)))
	if err != nil || got != `{"hello":"world"}` {
		t.Errorf("echo = %q, %v", got, err)
	}

	_, err = text(p.Call(ctx, "fail", json.RawMessage(`{"message":"no such city"}`)))
	if !errors.As(err, new(toolFailed)) || err.Error() != "no such city" {
		t.Errorf("fail: err = %v, want the tool's own failure", err)
	}
	_, err = text(p.Call(ctx, "nope", json.RawMessage(`{}`)))
	if !errors.As(err, new(toolFailed)) || !strings.Contains(err.Error(), `unknown tool "nope"`) {
		t.Errorf("unknown tool: err = %v", err)
	}

	h := p.Health()
	if h.State != process.StateRunning || h.Restarts != 0 || !alive(h.PID) {
		t.Errorf("Health = %+v", h)
	}
	if got, _ := text(p.Call(ctx, "pid", nil)); got != fmt.Sprint(h.PID) {
		t.Errorf("the plugin's pid is %s, Health says %d", got, h.PID)
	}
}

func TestEnvironmentScrubbed(t *testing.T) {
	t.Setenv("ECHO_TEST_DECLARED", "yes=really")
	t.Setenv("ECHO_TEST_UNDECLARED", "no")
	os.Unsetenv("ECHO_TEST_DECLARED_UNSET")
	if os.Getenv("PATH") == "" {
		t.Setenv("PATH", "/usr/bin")
	}
	_, p := load(t, `{"env":["ECHO_TEST_DECLARED","ECHO_TEST_DECLARED_UNSET"]}`, process.Options{})
	out, err := text(p.Call(context.Background(), "env", nil))
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]string
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatalf("env returned %q: %v", out, err)
	}
	want := map[string]string{"ECHO_TEST_DECLARED": "yes=really"}
	if fmt.Sprint(env) != fmt.Sprint(want) {
		t.Errorf("the plugin's environment (less go-plugin's) = %v, want %v", env, want)
	}

	// A fake LookupEnv is honoured and nothing else leaks.
	_, p2 := load(t, `{"env":["A_B"]}`, process.Options{LookupEnv: func(name string) (string, bool) {
		return "from-fake-" + name, true
	}})
	out, err = text(p2.Call(context.Background(), "env", nil))
	if err != nil || out != `{"A_B":"from-fake-A_B"}` {
		t.Errorf("env = %s, %v", out, err)
	}
}

func TestEnvironmentExtra(t *testing.T) {
	t.Setenv("ECHO_TEST_DECLARED", "declared")
	t.Setenv("ECHO_TEST_UNDECLARED", "no")
	_, p := load(t, `{"env":["ECHO_TEST_DECLARED"]}`, process.Options{
		Env: []string{"KILN_PLUGIN_DATA=/srv/kiln/plugin-data/test.echo", "EXTRA_EMPTY="},
	})
	out, err := text(p.Call(context.Background(), "env", nil))
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]string
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatalf("env returned %q: %v", out, err)
	}
	want := map[string]string{
		"ECHO_TEST_DECLARED": "declared",
		"KILN_PLUGIN_DATA":   "/srv/kiln/plugin-data/test.echo",
		"EXTRA_EMPTY":        "",
	}
	if fmt.Sprint(env) != fmt.Sprint(want) {
		t.Errorf("the plugin's environment (less go-plugin's) = %v, want %v", env, want)
	}
}

func TestWrongChecksumRefusedAtLoad(t *testing.T) {
	dir, m := pluginDir(t, "echo", `{}`)
	m.SHA256 = strings.Repeat("ab", 32)
	ts, err := loadToolset(context.Background(), dir, m, process.Options{Logger: testLogger(t)})
	if err == nil {
		ts.Close()
		t.Fatal("Load started a plugin whose sha256 does not match")
	}
	if !errors.Is(err, plugins.ErrChecksumMismatch) {
		t.Errorf("err = %v, want ErrChecksumMismatch", err)
	}
}

func TestChangedBinaryRefusedAtRestart(t *testing.T) {
	dir, p := load(t, `{}`, process.Options{MinBackoff: time.Millisecond})
	pid := p.Health().PID
	// Linux refuses to write a running executable (ETXTBSY), so the
	// changed binary (one byte appended) replaces it, as an update would.
	entry := filepath.Join(dir, "bin", "echo")
	data, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(entry+".new", append(data, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(entry+".new", entry); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the plugin to fail", func() bool { return p.Health().State == process.StateFailed })
	h := p.Health()
	if h.Restarts != 1 || h.PID != 0 || !strings.Contains(h.LastError, plugins.ErrChecksumMismatch.Error()) {
		t.Errorf("Health = %+v, want failed after one restart with a checksum error", h)
	}
	_, err = text(p.Call(context.Background(), "echo", json.RawMessage(`1`)))
	if !errors.Is(err, plugins.ErrTransport) || !strings.Contains(err.Error(), "sha256 mismatch") {
		t.Errorf("call on a failed plugin: err = %v", err)
	}
}

func TestRestartAfterKill(t *testing.T) {
	_, p := load(t, `{}`, process.Options{})
	pid := p.Health().PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The very next call, made before the host may have noticed.
	got, err := text(p.Call(context.Background(), "echo", json.RawMessage(`"again"`)))
	if err != nil || got != `"again"` {
		t.Fatalf("call after SIGKILL = %q, %v", got, err)
	}
	h := p.Health()
	if h.State != process.StateRunning || h.Restarts != 1 || h.PID == pid || !alive(h.PID) {
		t.Errorf("Health = %+v (old pid %d)", h, pid)
	}
	if alive(pid) {
		t.Errorf("old process %d still exists", pid)
	}
}

func TestNonIdempotentCallCutOff(t *testing.T) {
	_, p := load(t, `{}`, process.Options{})
	pid := p.Health().PID
	errc := make(chan error, 1)
	go func() {
		_, err := text(p.Call(context.Background(), "sleep", json.RawMessage(`{"ms":10000}`)))
		errc <- err
	}()
	time.Sleep(500 * time.Millisecond) // let the call reach the plugin
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, plugins.ErrTransport) || !errors.Is(err, core.ErrEffectUnknown) {
			t.Errorf("err = %v, want ErrTransport and ErrEffectUnknown (sleep is not idempotent: no retry)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not end when the process died")
	}
	waitFor(t, "the restart", func() bool { return p.Health().State == process.StateRunning })
	if _, err := text(p.Call(context.Background(), "pid", nil)); err != nil {
		t.Errorf("call after restart: %v", err)
	}
}

func TestCallTimeout(t *testing.T) {
	_, p := load(t, `{"timeout_ms":200}`, process.Options{})
	start := time.Now()
	_, err := text(p.Call(context.Background(), "sleep", json.RawMessage(`{"ms":5000}`)))
	elapsed := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, plugins.ErrTransport) {
		t.Errorf("err = %v, want DeadlineExceeded", err)
	}
	if elapsed < 200*time.Millisecond || elapsed > 2*time.Second {
		t.Errorf("the call took %v, want about 200ms", elapsed)
	}
	// The process is still fine.
	if got, err := text(p.Call(context.Background(), "sleep", json.RawMessage(`{"ms":1}`))); err != nil || got != "slept" {
		t.Errorf("next call = %q, %v", got, err)
	}
	if h := p.Health(); h.Restarts != 0 {
		t.Errorf("Health = %+v", h)
	}

	// The caller's own cancellation is reported as such.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err = text(p.Call(ctx, "sleep", json.RawMessage(`{"ms":5000}`)))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: err = %v", err)
	}
}

func TestClose(t *testing.T) {
	_, p := load(t, `{}`, process.Options{})
	pid := p.Health().PID
	if !alive(pid) {
		t.Fatalf("plugin process %d is not running", pid)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Errorf("process %d is still there after Close", pid)
	}
	if h := p.Health(); h.State != process.StateClosed || h.PID != 0 {
		t.Errorf("Health = %+v", h)
	}
	if _, err := text(p.Call(context.Background(), "echo", nil)); !errors.Is(err, plugins.ErrTransport) {
		t.Errorf("call after Close: err = %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestLoadRefusesOtherManifests(t *testing.T) {
	dir, m := pluginDir(t, "echo", `{}`)
	for name, edit := range map[string]func(*plugins.Manifest){
		"wasm":       func(m *plugins.Manifest) { m.Runtime = plugins.RuntimeWASM },
		"no toolset": func(m *plugins.Manifest) { m.Provides = []plugins.Capability{skillbundle.Name} },
		"bad entry":  func(m *plugins.Manifest) { m.Entry = "missing" },
	} {
		c := *m
		edit(&c)
		if ts, err := loadToolset(context.Background(), dir, &c, process.Options{Logger: testLogger(t)}); err == nil {
			ts.Close()
			t.Errorf("%s: Load succeeded", name)
		}
	}
}

func TestBackoff(t *testing.T) {
	// A plugin that cannot start again (its entry disappears) is failed
	// after MaxRestartsPerMinute attempts.
	dir, p := load(t, `{}`, process.Options{MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, MaxRestartsPerMinute: 3})
	if err := os.Rename(filepath.Join(dir, "bin", "echo"), filepath.Join(dir, "bin", "gone")); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(p.Health().PID, syscall.SIGKILL)
	waitFor(t, "the plugin to fail", func() bool { return p.Health().State == process.StateFailed })
	h := p.Health()
	if h.Restarts != 3 || !strings.Contains(h.LastError, "gave up after 3 restarts") {
		t.Errorf("Health = %+v", h)
	}
}

// TestCalcExample runs the WASM engineer's calc example natively: it must
// build for both targets.
func TestCalcExample(t *testing.T) {
	if _, err := os.Stat("../../sdk/plugin/examples/calc"); err != nil {
		t.Skip("no calc example:", err)
	}
	out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, "calc"), "github.com/kilnhq/kiln/sdk/plugin/examples/calc").CombinedOutput()
	if err != nil {
		t.Fatalf("build calc: %v\n%s", err, out)
	}
	dir, m := pluginDir(t, "calc", `{}`)
	data := t.TempDir()
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("host log:\n%s", logs.String())
		}
	})
	ts, err := loadToolset(context.Background(), dir, m, process.Options{Logger: logger, Env: []string{"KILN_PLUGIN_DATA=" + data}})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	ctx := context.Background()
	got, err := text(ts.Call(ctx, "add", json.RawMessage(`{"a":1.5,"b":2}`)))
	if err != nil || got != "3.5" {
		t.Errorf("add = %q, %v", got, err)
	}

	// The SDK's helpers work natively: files in KILN_PLUGIN_DATA, Log
	// into the host's log at its level, HTTP with net/http.
	if got, err := text(ts.Call(ctx, "note", json.RawMessage(`{"text":"hello"}`))); err != nil || got != "ok" {
		t.Fatalf("note = %q, %v", got, err)
	}
	if b, err := os.ReadFile(filepath.Join(data, "note.txt")); err != nil || string(b) != "hello" {
		t.Errorf("data/note.txt = %q, %v", b, err)
	}
	if got, err := text(ts.Call(ctx, "readfile", json.RawMessage(`{"path":"data:/note.txt"}`))); err != nil || got != "hello" {
		t.Errorf("readfile = %q, %v", got, err)
	}
	if _, err := text(ts.Call(ctx, "readfile", json.RawMessage(`{"path":"data:/../x"}`))); !errors.As(err, new(toolFailed)) {
		t.Error("readfile left the data folder")
	}
	waitFor(t, "the plugin's log line", func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "note written" {
				return rec["level"] == "INFO" && rec["plugin"] == m.ID
			}
		}
		return false
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "12345") }))
	defer srv.Close()
	if got, err := text(ts.Call(ctx, "fetch", json.RawMessage(`{"url":"`+srv.URL+`"}`))); err != nil || got != `{"length":5,"status":200}` {
		t.Errorf("fetch = %q, %v", got, err)
	}
}

func BenchmarkProcessCall(b *testing.B) {
	_, p := load(b, `{}`, process.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	args := json.RawMessage(`{"data":"` + strings.Repeat("x", 1024-11) + `"}`)
	if len(args) != 1024 {
		b.Fatalf("payload is %d bytes", len(args))
	}
	ctx := context.Background()
	b.SetBytes(int64(len(args)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := text(p.Call(ctx, "echo", args)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkProcessStart(b *testing.B) {
	dir, m := pluginDir(b, "echo", `{}`)
	opts := process.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		ts, err := loadToolset(ctx, dir, m, opts)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := text(ts.Call(ctx, "echo", json.RawMessage(`1`))); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		ts.Close()
		b.StartTimer()
	}
}

func TestCloseEndsCallInFlight(t *testing.T) {
	h := plugintest.NewHoldServer(t)
	dir, m := plugintest.CalcPlugin(t, "calc", plugins.RuntimeProcess, `{"timeout_ms":600000}`)
	ts, err := loadToolset(context.Background(), dir, m, process.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	errc := make(chan error, 1)
	go func() {
		_, err := text(ts.Call(context.Background(), "fetch", json.RawMessage(h.FetchArgs())))
		errc <- err
	}()
	if !h.WaitArrived(1, 20*time.Second) {
		t.Fatal("the fetch did not reach the server within 20s")
	}
	start := time.Now()
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close returned after %v", time.Since(start))
	select {
	case err := <-errc:
		if !errors.Is(err, plugins.ErrTransport) || !strings.Contains(err.Error(), "closed during the call") {
			t.Errorf("call in flight at Close: %v; want a transport error saying the plugin was closed", err)
		}
		if errors.Is(err, core.ErrEffectUnknown) {
			t.Errorf("call in flight at Close: %v; fetch is idempotent, its effect is not in doubt", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call in flight did not end within 20s of Close")
	}
}
