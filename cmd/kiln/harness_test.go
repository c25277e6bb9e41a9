package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/sqlite"
	"github.com/kilnhq/kiln/marketplace"
	"github.com/kilnhq/kiln/plugins/builtin"
	"github.com/kilnhq/kiln/plugins/builtin/cron"
	"github.com/kilnhq/kiln/plugins/registry"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc"
	"github.com/kilnhq/kiln/skills"
	"github.com/kilnhq/kiln/web"
)

// result is what one kiln invocation produced.
type result struct {
	stdout, stderr string
	code           int
}

// kiln runs the command line in-process, with KILN_SERVER as the test set
// it, and returns its output and exit status.
func kiln(t *testing.T, args ...string) result {
	t.Helper()
	return kilnIn(t, "", args...)
}

// kilnIn is kiln with standard input.
func kilnIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := execute(ctx, args, strings.NewReader(stdin), &out, &errb)
	return result{out.String(), errb.String(), code}
}

// useServer points the client commands at url, with no token.
func useServer(t *testing.T, url string) {
	t.Setenv(envServer, url)
	t.Setenv(envToken, "")
}

// testServer is a real Kiln server: the core service on a SQLite store in
// a directory, which is its data root (memories, attachments), with the
// built-in models and tools ("scripted" by default, append_file held for
// approval), served by web.New.
type testServer struct {
	t     *testing.T
	url   string
	store *sqlite.Store
	svc   *core.Service
	http  *httptest.Server
	once  sync.Once
	// plugins is the plugin registry, served by the API when the server
	// was started with plugins (startServerWith).
	plugins *registry.Registry
	// mcp is the MCP bridge of <dir>/.mcp.json, as kiln serve opens it.
	mcp *userMCP
	// logs holds what the API and the engine logged, debug included.
	logs *lockedBuffer
}

// startServer starts a server on the database in dir, listening on addr
// ("" for any free port), and points the client commands at it.
func startServer(t *testing.T, dir, addr string) *testServer {
	t.Helper()
	return startServerWith(t, dir, addr, false)
}

// startServerWith is startServer; with plugins, the server also has the
// plugin registry kiln serve opens (openPlugins): the built-in plugins
// and those installed under dir.
func startServerWith(t *testing.T, dir, addr string, plugins bool) *testServer {
	t.Helper()
	scratch := filepath.Join(dir, "scratch")
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(filepath.Join(dir, "kiln.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := serveConfig{DataRoot: dir, Model: "scripted"}
	models, err := openHub(cfg, quiet, core.NewRedactor())
	if err != nil {
		t.Fatal(err)
	}
	svc, err := core.New(core.Config{Store: store, Models: modelResolver(models), DefaultModel: cfg.Model, Logger: logger,
		DataRoot: dir, Blobs: core.DirBlobs{Dir: filepath.Join(dir, "attachments")},
		Schedules: cron.Parse, TriggerKey: []byte("e2e-test-trigger-key-of-32-bytes")})
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{t: t, store: store, svc: svc, logs: logs}
	opts := web.Options{Version: "v-test", DataRoot: dir, DefaultModel: "scripted", Logger: logger}
	// As in kiln serve: the built-in tools and models come through the
	// plugin registry, which loads before the engine starts. Only with
	// plugins does the API serve it.
	builtins, err := builtinPlugins(scratch, builtin.Tools(scratch), models)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := skills.NewCatalog(filepath.Join(dir, "skills"), skills.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	opts.Skills = cat
	if s.plugins, err = openPlugins(context.Background(), cfg, svc, store, models, cat, nil, nil, builtins, quiet, nil); err != nil {
		t.Fatal(err)
	}
	if plugins {
		opts.Plugins = s.plugins
		market, err := marketplace.Open(marketplace.Config{Dir: filepath.Join(dir, "marketplaces"), Plugins: s.plugins, Protocol: pluginrpc.ProtocolVersion, Log: logger})
		if err != nil {
			t.Fatal(err)
		}
		opts.Marketplace = market
	}
	bridge, err := openMCP(svc, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.mcp = newUserMCP(bridge, dir)
	opts.MCPServers = s.mcp
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(web.New(svc, opts))
	if addr != "" {
		ts.Listener.Close()
		ts.Listener = listen(t, addr)
	}
	ts.Start()
	s.url, s.http = ts.URL, ts
	t.Cleanup(s.stop)
	useServer(t, s.url)
	return s
}

// listen listens on addr, retrying briefly while a previous listener on it
// winds down.
func listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	for i := 0; ; i++ {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			return ln
		}
		if i == 100 {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop shuts the server down as a restart would: connections are cut,
// runs stop at a step boundary and the store is closed.
func (s *testServer) stop() {
	s.once.Do(func() {
		s.http.Listener.Close()
		s.http.CloseClientConnections()
		s.http.Close()
		if err := s.mcp.Close(); err != nil {
			s.t.Errorf("close mcp: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := s.svc.Shutdown(ctx); err != nil {
			s.t.Errorf("shutdown: %v", err)
		}
		if err := s.plugins.Close(); err != nil {
			s.t.Errorf("close plugins: %v", err)
		}
		if err := s.store.Close(); err != nil {
			s.t.Errorf("close store: %v", err)
		}
	})
}

// addr returns the host:port the server listens on.
func (s *testServer) addr() string { return s.http.Listener.Addr().String() }

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mustContain fails unless s contains every part.
func mustContain(t *testing.T, what, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%s does not contain %q:\n%s", what, p, s)
		}
	}
}
