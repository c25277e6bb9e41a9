package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/mcp/mcpservers"
)

// fakeHost records registrations.
type fakeHost struct {
	mu      sync.Mutex
	tools   map[string][]core.Tool
	policy  map[string]core.Policy
	events  []string
	adds    map[string]int
	removes map[string]int
}

func newHost() *fakeHost {
	return &fakeHost{tools: map[string][]core.Tool{}, policy: map[string]core.Policy{}, adds: map[string]int{}, removes: map[string]int{}}
}

func (h *fakeHost) AddTools(source string, tools []core.Tool, defaults core.Policy) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, dup := h.tools[source]; dup {
		return core.Errorf(core.ECONFLICT, "tool source %q is already added", source)
	}
	h.tools[source] = tools
	h.policy[source] = defaults
	h.adds[source]++
	h.events = append(h.events, "add "+source)
	return nil
}

func (h *fakeHost) RemoveTools(source string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.tools[source]; !ok {
		return core.Errorf(core.ENOTFOUND, "tool source %q not found", source)
	}
	delete(h.tools, source)
	delete(h.policy, source)
	h.removes[source]++
	h.events = append(h.events, "remove "+source)
	return nil
}

func (h *fakeHost) tool(t testing.TB, source, name string) core.Tool {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, tl := range h.tools[source] {
		if tl.Spec().Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %s.%s registered (have %d in %s)", source, name, len(h.tools[source]), source)
	return nil
}

func (h *fakeHost) policyOf(source string) core.Policy {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.policy[source]
}

func (h *fakeHost) count(source string) (adds, removes int, registered bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, registered = h.tools[source]
	return h.adds[source], h.removes[source], registered
}

// process returns the stdio server's current process.
func (m *Manager) process(t testing.TB, id string) *os.Process {
	s := m.servers[id]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == nil {
		t.Fatalf("%s has no session", id)
	}
	return s.sess.process()
}

// node returns the path of node, skipping the test when it is missing.
func node(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the MCP bridge's tests run the npm servers @modelcontextprotocol/server-everything and server-filesystem")
	}
	return p
}

// npmServer returns the entry script of an npm MCP server in testdata/npm.
func npmServer(t testing.TB, pkg string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "npm", "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed: run `make deps` (npm ci in plugins/mcp/testdata/npm): %v", pkg, err)
	}
	return p
}

func everything(t testing.TB) ServerConfig {
	return ServerConfig{Server: mcpservers.Server{Name: "everything", Command: node(t), Args: []string{npmServer(t, "server-everything"), "stdio"}}}
}

func start(t testing.TB, host Host, cfg Config) *Manager {
	t.Helper()
	if cfg.PingInterval == 0 {
		cfg.PingInterval = 100 * time.Millisecond
	}
	m, err := New(host, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// waitState waits until server id is in state, failing after 30 s.
func waitState(t testing.TB, m *Manager, id string, state State) ServerStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := m.Status(id)
		if err != nil {
			t.Fatal(err)
		}
		if st.State == state {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %s: state %s, want %s (error: %s)", id, st.State, state, st.Error)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func call(t testing.TB, tl core.Tool, args string) core.ToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := tl.Call(ctx, json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s(%s): %v", tl.Spec().Name, args, err)
	}
	return res
}

// TestStdioEverything connects to server-everything over stdio, lists and
// calls its tools, and disables, enables and reconnects it.
func TestStdioEverything(t *testing.T) {
	host := newHost()
	m := start(t, host, Config{Servers: []ServerConfig{everything(t)}})
	st := waitState(t, m, "everything", StateConnected)
	t.Logf("protocol %s", st.Protocol)
	if st.Protocol == "" || st.Transport != "stdio" || st.Error != "" {
		t.Errorf("status %+v", st)
	}
	if !slices.Contains(st.Tools, "mcp.everything.echo") || !slices.Contains(st.Tools, "mcp.everything.get-tiny-image") {
		t.Errorf("tools %v", st.Tools)
	}
	echo := host.tool(t, "mcp.everything", "echo")
	if sp := echo.Spec(); !sp.Idempotent || !strings.Contains(string(sp.Schema), "message") || sp.Description == "" {
		t.Errorf("echo spec %+v", sp)
	}
	if res := call(t, echo, `{"message":"hi"}`); res.IsError || res.Text() != "Echo: hi" {
		t.Errorf("echo: %+v", res)
	}
	// Held: the tools not annotated readOnlyHint.
	if p := host.policyOf("mcp.everything"); p["echo"].Interrupt || !p["gzip-file-as-resource"].Interrupt {
		t.Errorf("default policy %v", p)
	}
	img := call(t, host.tool(t, "mcp.everything", "get-tiny-image"), `{}`)
	var images int
	for _, p := range img.Content {
		if p.Type == core.PartImage {
			images++
			if p.MIME != "image/png" || len(p.Data) == 0 {
				t.Errorf("image part %s %d bytes", p.MIME, len(p.Data))
			}
		}
	}
	if images != 1 || core.CheckParts(img.Content) != nil {
		t.Errorf("get-tiny-image: %d images, parts %v", images, core.CheckParts(img.Content))
	}
	// A JSON-RPC error (bad arguments) is the tool's own failure.
	if res := call(t, echo, `{"message": 5}`); !res.IsError {
		t.Errorf("echo with a number: %+v", res)
	}

	if err := m.Disable("everything"); err != nil {
		t.Fatal(err)
	}
	waitState(t, m, "everything", StateDisabled)
	if _, _, reg := host.count("mcp.everything"); reg {
		t.Error("tools still registered while disabled")
	}
	if err := m.Reconnect("everything"); core.ErrorCode(err) != core.ECONFLICT {
		t.Errorf("reconnect while disabled: %v", err)
	}
	if err := m.Enable("everything"); err != nil {
		t.Fatal(err)
	}
	waitState(t, m, "everything", StateConnected)
	adds, _, _ := host.count("mcp.everything")
	if err := m.Reconnect("everything"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for a, _, reg := host.count("mcp.everything"); a == adds || !reg; a, _, reg = host.count("mcp.everything") {
		if time.Now().After(deadline) {
			t.Fatal("no new registration after Reconnect")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := m.Reconnect("nope"); core.ErrorCode(err) != core.ENOTFOUND {
		t.Errorf("reconnect unknown: %v", err)
	}
	m.Close()
	if _, _, reg := host.count("mcp.everything"); reg {
		t.Error("tools still registered after Close")
	}
}

// TestStdioEnv checks that a stdio server sees only its configured
// variables and PATH, with ${NAME} expanded.
func TestStdioEnv(t *testing.T) {
	t.Setenv("KILN_MCP_LEAK", "should-not-reach")
	host := newHost()
	sc := everything(t)
	sc.Env = map[string]string{"GREETING": "hello ${WHO}"}
	dir := t.TempDir()
	sc.Cwd = dir
	m := start(t, host, Config{Servers: []ServerConfig{sc}, LookupEnv: func(n string) (string, bool) {
		if n == "WHO" {
			return "world", true
		}
		return "", false
	}})
	waitState(t, m, "everything", StateConnected)
	res := call(t, host.tool(t, "mcp.everything", "get-env"), `{}`)
	var env map[string]string
	if err := json.Unmarshal([]byte(res.Text()), &env); err != nil {
		t.Fatalf("get-env: %v: %s", err, res.Text())
	}
	if env["GREETING"] != "hello world" || env["PATH"] != os.Getenv("PATH") {
		t.Errorf("GREETING %q PATH %q", env["GREETING"], env["PATH"])
	}
	if _, leak := env["KILN_MCP_LEAK"]; leak {
		t.Error("the server saw Kiln's environment")
	}
	if _, ok := env["HOME"]; ok {
		t.Error("the server saw HOME")
	}
}

// TestProcessGroup: what a stdio server started ends with its session.
func TestProcessGroup(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc to see processes in")
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	host := newHost()
	m := start(t, host, Config{Servers: []ServerConfig{{Server: mcpservers.Server{
		Name: "wrapped", Command: "sh",
		Args: []string{"-c", `sleep 600 & echo $! > "$1"; exec "$2" "$3" stdio`, "sh", pidFile, node(t), npmServer(t, "server-everything")},
	}}}})
	waitState(t, m, "wrapped", StateConnected)
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(string(data), &pid)
	if pid <= 0 || !alive(pid) {
		t.Fatalf("sleep's pid %q not running", data)
	}
	m.Close()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatal("the server's child outlived the session")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie counts as gone).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(stat))
	return len(f) > 2 && f[2] != "Z"
}

// TestStdioFilesystem connects to server-filesystem on a temporary
// folder: a read, a failed read (isError), and the default policy that
// holds the tools that write.
func TestStdioFilesystem(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from a file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	host := newHost()
	m := start(t, host, Config{Servers: []ServerConfig{{Server: mcpservers.Server{
		Name: "files", Command: node(t), Args: []string{npmServer(t, "server-filesystem"), dir},
	}}}})
	st := waitState(t, m, "files", StateConnected)
	if !slices.Contains(st.Tools, "mcp.files.read_text_file") || !slices.Contains(st.Tools, "mcp.files.write_file") {
		t.Fatalf("tools %v", st.Tools)
	}
	read := host.tool(t, "mcp.files", "read_text_file")
	if res := call(t, read, fmt.Sprintf(`{"path": %q}`, filepath.Join(dir, "hello.txt"))); res.IsError || !strings.Contains(res.Text(), "hello from a file") {
		t.Errorf("read: %+v", res)
	}
	if res := call(t, read, fmt.Sprintf(`{"path": %q}`, filepath.Join(dir, "missing.txt"))); !res.IsError {
		t.Errorf("read of a missing file: %+v", res)
	}
	p := host.policyOf("mcp.files")
	for _, held := range []string{"write_file", "edit_file", "move_file", "create_directory"} {
		if !p[held].Interrupt {
			t.Errorf("%s not held by default (policy %v)", held, p)
		}
	}
	if _, ok := p["read_text_file"]; ok {
		t.Errorf("read_text_file held: %v", p)
	}
	if sp := host.tool(t, "mcp.files", "write_file").Spec(); !sp.Idempotent {
		t.Error("write_file is annotated idempotentHint")
	}
	if sp := host.tool(t, "mcp.files", "edit_file").Spec(); sp.Idempotent {
		t.Error("edit_file is not idempotent")
	}
}

// TestTrustAll holds none of a trusted server's tools.
func TestTrustAll(t *testing.T) {
	host := newHost()
	m := start(t, host, Config{Servers: []ServerConfig{{Trust: TrustAll, Server: mcpservers.Server{
		Name: "files", Command: node(t), Args: []string{npmServer(t, "server-filesystem"), t.TempDir()},
	}}}})
	waitState(t, m, "files", StateConnected)
	if p := host.policyOf("mcp.files"); len(p) != 0 {
		t.Errorf("policy %v", p)
	}
}

// freePort returns a port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEverythingHTTP runs server-everything's streamable HTTP mode on
// 127.0.0.1 and returns its URL.
func startEverythingHTTP(t testing.TB) string {
	t.Helper()
	return startEverything(t, "streamableHttp") + "/mcp"
}

// startEverything runs server-everything in an HTTP mode on 127.0.0.1
// and returns its base URL.
func startEverything(t testing.TB, mode string) string {
	t.Helper()
	port := freePort(t)
	preload, _ := filepath.Abs(filepath.Join("testdata", "localhost.cjs"))
	cmd := exec.Command(node(t), "--require", preload, npmServer(t, "server-everything"), mode)
	cmd.Env = []string{fmt.Sprintf("PORT=%d", port), "PATH=" + os.Getenv("PATH")}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything streamableHttp did not listen on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "http://" + addr
}

// TestStreamableHTTPEverything connects to server-everything over
// streamable HTTP, with a header whose value never shows in the status.
func TestStreamableHTTPEverything(t *testing.T) {
	url := startEverythingHTTP(t)
	host := newHost()
	m := start(t, host, Config{Servers: []ServerConfig{{Server: mcpservers.Server{
		Name: "web", Type: "http", URL: url, Headers: map[string]string{"X-Test": "${TOKEN}"},
	}}}, LookupEnv: func(string) (string, bool) { return "token-value-1234", true }})
	st := waitState(t, m, "web", StateConnected)
	if st.Transport != "http" || st.Protocol == "" {
		t.Errorf("status %+v", st)
	}
	if res := call(t, host.tool(t, "mcp.web", "echo"), `{"message":"over http"}`); res.Text() != "Echo: over http" {
		t.Errorf("echo: %+v", res)
	}
}

// TestSSEEverything connects to server-everything over the older
// HTTP+SSE transport.
func TestSSEEverything(t *testing.T) {
	url := startEverything(t, "sse") + "/sse"
	host := newHost()
	m := start(t, host, Config{Servers: []ServerConfig{{Server: mcpservers.Server{Name: "old", Type: "sse", URL: url}}}})
	st := waitState(t, m, "old", StateConnected)
	if st.Transport != "sse" || st.Protocol == "" {
		t.Errorf("status %+v", st)
	}
	if res := call(t, host.tool(t, "mcp.old", "echo"), `{"message":"over sse"}`); res.Text() != "Echo: over sse" {
		t.Errorf("echo: %+v", res)
	}
}

// TestCrashReconnect kills a stdio server: its tools are withdrawn, the
// state is error, and after the backoff the manager connects again and
// registers the tools anew.
func TestCrashReconnect(t *testing.T) {
	release := make(chan time.Time)
	host := newHost()
	m := start(t, host, Config{
		Servers: []ServerConfig{everything(t)},
		Backoff: func(int) time.Duration { return time.Hour },
		After: func(d time.Duration) <-chan time.Time {
			if d == time.Hour {
				return release
			}
			return time.After(d)
		},
	})
	waitState(t, m, "everything", StateConnected)
	_, removes0, _ := host.count("mcp.everything")
	proc := m.process(t, "everything")
	if proc == nil {
		t.Fatal("no process")
	}
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, m, "everything", StateError)
	if !strings.Contains(st.Error, "connection lost") || len(st.Tools) != 0 {
		t.Errorf("status after the crash %+v", st)
	}
	if _, removes, reg := host.count("mcp.everything"); reg || removes != removes0+1 {
		t.Errorf("after the crash: registered %v, %d removals", reg, removes)
	}
	release <- time.Now()
	st = waitState(t, m, "everything", StateConnected)
	if _, _, reg := host.count("mcp.everything"); !reg || !slices.Contains(st.Tools, "mcp.everything.echo") {
		t.Errorf("after the reconnect: registered %v, tools %v", reg, st.Tools)
	}
	if p := host.tool(t, "mcp.everything", "echo").(*tool).sess.process(); p == nil || p.Pid == proc.Pid {
		t.Error("the registered echo is not the new session's")
	}
	if res := call(t, host.tool(t, "mcp.everything", "echo"), `{"message":"back"}`); res.Text() != "Echo: back" {
		t.Errorf("echo: %+v", res)
	}
}

// TestDiesMidCall kills the server during a call: the error wraps
// core.ErrEffectUnknown.
func TestDiesMidCall(t *testing.T) {
	host := newHost()
	m := start(t, host, Config{Servers: []ServerConfig{everything(t)}, PingInterval: time.Hour})
	waitState(t, m, "everything", StateConnected)
	proc := m.process(t, "everything")
	long := host.tool(t, "mcp.everything", "trigger-long-running-operation")
	go func() { time.Sleep(300 * time.Millisecond); proc.Kill() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := long.Call(ctx, json.RawMessage(`{"duration": 10, "steps": 2}`))
	if !errors.Is(err, core.ErrEffectUnknown) {
		t.Fatalf("call cut off: %v, want ErrEffectUnknown", err)
	}
	waitState(t, m, "everything", StateError)
	// A call on the dead session fails without ErrEffectUnknown: it was never sent.
	if _, err := long.Call(ctx, json.RawMessage(`{}`)); err == nil || errors.Is(err, core.ErrEffectUnknown) {
		t.Errorf("call on a dead session: %v", err)
	}
}

// TestStartFailure: a server that exits at once is in error with its
// stderr tail, the variable's value redacted.
func TestStartFailure(t *testing.T) {
	host := newHost()
	m := start(t, host, Config{
		Servers: []ServerConfig{{Server: mcpservers.Server{
			Name: "bad_one", Command: node(t),
			Args: []string{"-e", `for (let i = 0; i < 30; i++) console.error("line " + i); console.error("token=" + process.env.TOK); process.exit(3)`},
			Env:  map[string]string{"TOK": "${SECRET}"},
		}}},
		LookupEnv: func(string) (string, bool) { return "supersecretvalue", true },
		Backoff:   func(int) time.Duration { return time.Hour },
	})
	st := waitState(t, m, "bad_one", StateError)
	if strings.Contains(st.Error, "supersecretvalue") {
		t.Errorf("the secret leaked: %s", st.Error)
	}
	if !strings.Contains(st.Error, "token=[redacted]") || strings.Contains(st.Error, "line 10\n") || !strings.Contains(st.Error, "line 29") {
		t.Errorf("error %q", st.Error)
	}
	if _, _, reg := host.count("mcp.bad-one"); reg {
		t.Error("tools registered")
	}
}

func TestNewRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  []ServerConfig
		want string
	}{
		{"bad name", []ServerConfig{{Server: mcpservers.Server{Name: "A", Command: "x"}}}, "a name is"},
		{"same source", []ServerConfig{{Server: mcpservers.Server{Name: "a-b", Command: "x"}}, {Server: mcpservers.Server{Name: "a_b", Command: "x"}}}, "both have the tool source"},
		{"bad trust", []ServerConfig{{Trust: "some", Server: mcpservers.Server{Name: "a", Command: "x"}}}, "trust"},
		{"no url", []ServerConfig{{Server: mcpservers.Server{Name: "a", Type: "sse"}}}, "needs a url"},
		{"bad type", []ServerConfig{{Server: mcpservers.Server{Name: "a", Type: "ws", URL: "http://x"}}}, "want stdio, http or sse"},
	} {
		_, err := New(newHost(), Config{Servers: c.cfg})
		if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestDefaultBackoff(t *testing.T) {
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		if got := DefaultBackoff(i + 1); got != w {
			t.Errorf("attempt %d: %v, want %v", i+1, got, w)
		}
	}
	if DefaultBackoff(100) != 30*time.Second {
		t.Error("no cap")
	}
}

func TestTail(t *testing.T) {
	tl := newTail(3)
	fmt.Fprint(tl, "a\nb\r\nc\nd\npart")
	if got := tl.String(); got != "c\nd\npart" {
		t.Errorf("%q", got)
	}
	fmt.Fprint(tl, "ial\n")
	if got := tl.String(); got != "c\nd\npartial" {
		t.Errorf("%q", got)
	}
}

func TestGlobEscape(t *testing.T) {
	name := `a*b?[c]\d`
	p := core.Policy{globEscape(name): {Interrupt: true}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, held := p.Match(name); !held {
		t.Error("the escaped pattern does not match the name")
	}
	if _, held := p.Match("aXb?[c]\\d"); held {
		t.Error("the escaped pattern matches another name")
	}
}

// goServer is an MCP server of mcp-go's own server package, over
// streamable HTTP on 127.0.0.1, with one tool "a".
func goServer(t testing.TB) (*mcpserver.MCPServer, string) {
	srv := mcpserver.NewMCPServer("kiln-test", "1", mcpserver.WithToolCapabilities(true))
	srv.AddTool(mcpgo.NewTool("a", mcpgo.WithDescription("tool a"), mcpgo.WithReadOnlyHintAnnotation(true)), func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText("a says " + req.GetString("x", "")), nil
	})
	hs := httptest.NewServer(mcpserver.NewStreamableHTTPServer(srv))
	t.Cleanup(hs.Close)
	return srv, hs.URL + "/mcp"
}

// TestToolListChanged: a server's tools/list_changed makes the manager
// list and register the tools again.
func TestToolListChanged(t *testing.T) {
	srv, url := goServer(t)
	host := newHost()
	m := start(t, host, Config{Servers: []ServerConfig{{Server: mcpservers.Server{Name: "go", URL: url}}}})
	st := waitState(t, m, "go", StateConnected)
	t.Logf("protocol %s", st.Protocol)
	if !slices.Equal(st.Tools, []string{"mcp.go.a"}) {
		t.Fatalf("tools %v", st.Tools)
	}
	if res := call(t, host.tool(t, "mcp.go", "a"), `{"x":"hi"}`); res.Text() != "a says hi" {
		t.Errorf("a: %+v", res)
	}
	srv.AddTool(mcpgo.NewTool("b*", mcpgo.WithDestructiveHintAnnotation(true)), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultError("b failed"), nil
	})
	deadline := time.Now().Add(30 * time.Second)
	for st, _ = m.Status("go"); !slices.Equal(st.Tools, []string{"mcp.go.a", "mcp.go.b*"}); st, _ = m.Status("go") {
		if time.Now().After(deadline) {
			t.Fatalf("tools %v after the change (protocol %s)", st.Tools, st.Protocol)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if res := call(t, host.tool(t, "mcp.go", "b*"), `{}`); !res.IsError || res.Text() != "b failed" {
		t.Errorf("b: %+v", res)
	}
	p := host.policyOf("mcp.go")
	if _, held := p.Match("b*"); !held {
		t.Errorf("b* not held: %v", p)
	}
	if _, held := p.Match("a"); held {
		t.Errorf("a held: %v", p)
	}
}

// The Host the manager is given in Kiln.
var _ Host = (*core.Service)(nil)

func benchCall(b *testing.B, host *fakeHost, source, name, args string) {
	tl := host.tool(b, source, name)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := tl.Call(ctx, json.RawMessage(args))
		if err != nil || res.IsError {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

// BenchmarkToolCallStdio is one tools/call round trip to
// server-everything's echo over stdio.
func BenchmarkToolCallStdio(b *testing.B) {
	host := newHost()
	m := start(b, host, Config{Servers: []ServerConfig{everything(b)}, PingInterval: time.Hour})
	waitState(b, m, "everything", StateConnected)
	benchCall(b, host, "mcp.everything", "echo", `{"message":"hi"}`)
}

// BenchmarkToolCallHTTP is the same over streamable HTTP.
func BenchmarkToolCallHTTP(b *testing.B) {
	url := startEverythingHTTP(b)
	host := newHost()
	m := start(b, host, Config{Servers: []ServerConfig{{Server: mcpservers.Server{Name: "web", URL: url}}}, PingInterval: time.Hour})
	waitState(b, m, "web", StateConnected)
	benchCall(b, host, "mcp.web", "echo", `{"message":"hi"}`)
}

// BenchmarkToolCallHTTPGo is a round trip to mcp-go's own server over
// streamable HTTP (in process): the bridge's and mcp-go's client cost
// without Node.
func BenchmarkToolCallHTTPGo(b *testing.B) {
	_, url := goServer(b)
	host := newHost()
	m := start(b, host, Config{Servers: []ServerConfig{{Server: mcpservers.Server{Name: "go", URL: url}}}, PingInterval: time.Hour})
	waitState(b, m, "go", StateConnected)
	benchCall(b, host, "mcp.go", "a", `{"x":"hi"}`)
}

// TestBundleServers: a plugin's mcp-servers bundle adds servers at run
// time (their tools registered like the user's), a name already taken is
// refused, and removing the bundle disconnects them and withdraws their
// tools.
func TestBundleServers(t *testing.T) {
	host := newHost()
	m := start(t, host, Config{Servers: []ServerConfig{everything(t)}})
	waitState(t, m, "everything", StateConnected)
	var m2 mcpservers.Host = m
	bundled := everything(t).Server
	bundled.Name = "bundled"
	if err := m2.AddServers("acme", []mcpservers.Server{bundled}); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, m, "bundled", StateConnected)
	if !slices.Contains(st.Tools, "mcp.bundled.echo") {
		t.Fatalf("bundled %+v", st)
	}
	if len(m.Statuses()) != 2 {
		t.Fatalf("statuses %+v", m.Statuses())
	}
	taken := everything(t).Server
	if err := m2.AddServers("other", []mcpservers.Server{taken}); core.ErrorCode(err) != core.EINVALID {
		t.Fatalf("a taken name: %v", err)
	}
	m2.RemoveServers("acme")
	if _, err := m.Status("bundled"); core.ErrorCode(err) != core.ENOTFOUND {
		t.Fatalf("after remove: %v", err)
	}
	if host.policyOf("mcp.bundled") != nil {
		t.Fatal("the bundle's tools are still registered")
	}
}

// TestUserServers: AddServer connects a user's server at run time and
// RemoveServer withdraws its tools; a taken ID or tool source is a
// conflict naming the plugin that has it, and a plugin's server cannot be
// removed alone.
func TestUserServers(t *testing.T) {
	host := newHost()
	m := start(t, host, Config{})
	sc := everything(t)
	sc.Name = "mine"
	if err := m.AddServer(sc); err != nil {
		t.Fatal(err)
	}
	if st := waitState(t, m, "mine", StateConnected); st.Plugin != "" || !slices.Contains(st.Tools, "mcp.mine.echo") {
		t.Fatalf("mine %+v", st)
	}
	if err := m.AddServer(sc); core.ErrorCode(err) != core.ECONFLICT {
		t.Fatalf("the same ID again: %v", err)
	}
	if err := m.AddServers("acme", []mcpservers.Server{{Name: "a_b", Command: "true"}}); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.Status("a_b"); st.Plugin != "acme" {
		t.Fatalf("a plugin's server: %+v", st)
	}
	for _, id := range []string{"a_b", "a-b"} {
		err := m.AddServer(ServerConfig{Server: mcpservers.Server{Name: id, Command: "true"}})
		if core.ErrorCode(err) != core.ECONFLICT || !strings.Contains(err.Error(), `plugin "acme"`) {
			t.Fatalf("%s: %v", id, err)
		}
	}
	if err := m.RemoveServer("a_b"); core.ErrorCode(err) != core.ECONFLICT || !strings.Contains(err.Error(), `plugin "acme"`) {
		t.Fatalf("remove a plugin's server: %v", err)
	}
	if err := m.AddServer(ServerConfig{Server: mcpservers.Server{Name: "Bad", Command: "true"}}); core.ErrorCode(err) != core.EINVALID {
		t.Fatalf("a bad name: %v", err)
	}
	if err := m.RemoveServer("mine"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Status("mine"); core.ErrorCode(err) != core.ENOTFOUND {
		t.Fatalf("after remove: %v", err)
	}
	if host.policyOf("mcp.mine") != nil {
		t.Fatal("the removed server's tools are still registered")
	}
	if err := m.RemoveServer("mine"); core.ErrorCode(err) != core.ENOTFOUND {
		t.Fatalf("remove twice: %v", err)
	}
}
