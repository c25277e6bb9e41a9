package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/builtin"
	"github.com/kilnhq/kiln/plugins/builtin/files"
)

func TestCheckExposure(t *testing.T) {
	token := strings.Repeat("k", minTokenLen)
	origins := []string{"https://kiln.example.com"}
	for _, tc := range []struct {
		addr, token string
		origins     []string
		loopback    bool
		errWants    []string // substrings of the error; nil = no error
		errRefuses  []string // substrings the error must not contain
	}{
		{addr: "127.0.0.1:8420", loopback: true},
		{addr: "127.9.8.7:80", loopback: true},
		{addr: "localhost:8420", loopback: true},
		{addr: "LocalHost:1", loopback: true},
		{addr: "[::1]:8420", loopback: true},
		{addr: "127.0.0.1:0", loopback: true},
		{addr: "0.0.0.0:8420", errWants: []string{"KILN_API_TOKEN", "KILN_ALLOWED_ORIGINS", "0.0.0.0:8420"}},
		{addr: ":8420", errWants: []string{"KILN_API_TOKEN", "KILN_ALLOWED_ORIGINS"}},
		{addr: "[::]:8420", errWants: []string{"KILN_API_TOKEN", "KILN_ALLOWED_ORIGINS"}},
		{addr: "[::1%lo]:8420", errWants: []string{"KILN_API_TOKEN"}},
		{addr: "192.168.1.10:8420", errWants: []string{"KILN_API_TOKEN", "KILN_ALLOWED_ORIGINS"}},
		{addr: "kiln.example.com:443", errWants: []string{"KILN_API_TOKEN"}},
		{addr: "localhost.example.com:80", errWants: []string{"KILN_API_TOKEN"}},
		{addr: "0.0.0.0:8420", token: token, origins: origins},
		{addr: ":8420", token: token, origins: origins},
		{addr: "[2001:db8::1]:8420", token: token, origins: origins},
		{addr: "0.0.0.0:8420", token: token[1:], origins: origins, errWants: []string{"at least 32"}, errRefuses: []string{"KILN_ALLOWED_ORIGINS"}},
		{addr: "0.0.0.0:8420", token: token, errWants: []string{"KILN_ALLOWED_ORIGINS"}, errRefuses: []string{"KILN_API_TOKEN"}},
		{addr: "0.0.0.0:8420", origins: origins, errWants: []string{"KILN_API_TOKEN"}, errRefuses: []string{"KILN_ALLOWED_ORIGINS"}},
		{addr: "127.0.0.1", errWants: []string{"host:port"}},
		{addr: "", errWants: []string{"host:port"}},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			loopback, err := checkExposure(tc.addr, tc.token, tc.origins)
			if tc.errWants == nil {
				if err != nil || loopback != tc.loopback {
					t.Fatalf("checkExposure = %v, %v; want %v, nil", loopback, err, tc.loopback)
				}
				return
			}
			if err == nil {
				t.Fatalf("checkExposure accepted %q (loopback %v)", tc.addr, loopback)
			}
			for _, s := range tc.errWants {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			for _, s := range tc.errRefuses {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error %q mentions %q, which is fine", err, s)
				}
			}
		})
	}
}

func TestLoadServeConfig(t *testing.T) {
	home := func() (string, error) { return "/home/u", nil }
	token := strings.Repeat("s", 40)
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    serveConfig
		wantErr string
	}{
		{
			name: "defaults",
			want: serveConfig{Addr: defaultAddr, DataRoot: "/home/u/.kiln", Model: defaultModel, Loopback: true},
		},
		{
			name: "environment",
			env:  map[string]string{"KILN_ADDR": "localhost:9000", "KILN_DATA_ROOT": "/srv/kiln", "KILN_MODEL": "scripted"},
			want: serveConfig{Addr: "localhost:9000", DataRoot: "/srv/kiln", Model: "scripted", Loopback: true},
		},
		{
			name: "provider model",
			env:  map[string]string{"KILN_MODEL": "ollama:llama3.2:3b"},
			want: serveConfig{Addr: defaultAddr, DataRoot: "/home/u/.kiln", Model: "ollama:llama3.2:3b", Loopback: true},
		},
		{
			name: "flags beat environment",
			args: []string{"--addr", "127.0.0.1:9001", "--data", "/flag/dir"},
			env:  map[string]string{"KILN_ADDR": "0.0.0.0:9000", "KILN_DATA_ROOT": "/srv/kiln"},
			want: serveConfig{Addr: "127.0.0.1:9001", DataRoot: "/flag/dir", Model: defaultModel, Loopback: true},
		},
		{
			name: "exposed with protection",
			env: map[string]string{"KILN_ADDR": "0.0.0.0:8420", "KILN_API_TOKEN": token,
				"KILN_ALLOWED_ORIGINS": " https://a.example.com, http://b.example.com:8080 ,"},
			want: serveConfig{Addr: "0.0.0.0:8420", DataRoot: "/home/u/.kiln", Model: defaultModel, Token: token,
				AllowedOrigins: []string{"https://a.example.com", "http://b.example.com:8080"}},
		},
		{
			name: "stream cap",
			env:  map[string]string{"KILN_MAX_STREAMS": " 600 "},
			want: serveConfig{Addr: defaultAddr, DataRoot: "/home/u/.kiln", Model: defaultModel, Loopback: true, MaxStreams: 600},
		},
		{
			name: "mcp timeout",
			env:  map[string]string{"KILN_MCP_TIMEOUT_MS": "90000"},
			want: serveConfig{Addr: defaultAddr, DataRoot: "/home/u/.kiln", Model: defaultModel, Loopback: true, MCPTimeout: 90 * time.Second},
		},
		{name: "mcp timeout with a unit", env: map[string]string{"KILN_MCP_TIMEOUT_MS": "90s"}, wantErr: "KILN_MCP_TIMEOUT_MS: \"90s\" is not a timeout in milliseconds"},
		{name: "zero mcp timeout", env: map[string]string{"KILN_MCP_TIMEOUT_MS": "0"}, wantErr: "from 1 to 86400000"},
		{name: "bad stream cap", env: map[string]string{"KILN_MAX_STREAMS": "lots"}, wantErr: "KILN_MAX_STREAMS"},
		{name: "zero stream cap", env: map[string]string{"KILN_MAX_STREAMS": "0"}, wantErr: "at least 1"},
		{
			name: "tool result cap",
			env:  map[string]string{"KILN_MAX_TOOL_RESULT_KB": "64"},
			want: serveConfig{Addr: defaultAddr, DataRoot: "/home/u/.kiln", Model: defaultModel, Loopback: true, MaxToolResult: 64 << 10},
		},
		{name: "bad tool result cap", env: map[string]string{"KILN_MAX_TOOL_RESULT_KB": "0"}, wantErr: "KILN_MAX_TOOL_RESULT_KB: \"0\" is not a size in KiB"},
		{name: "exposed without protection", env: map[string]string{"KILN_ADDR": "0.0.0.0:8420"}, wantErr: "KILN_API_TOKEN"},
		{name: "flag exposes", args: []string{"--addr", ":8420"}, wantErr: "KILN_ALLOWED_ORIGINS"},
		{name: "unknown model", env: map[string]string{"KILN_MODEL": "gpt-9"}, wantErr: "built in: demo, scripted; or <provider>:<model>"},
		{name: "unknown provider", env: map[string]string{"KILN_MODEL": "mistral:large"}, wantErr: "provider openai, anthropic"},
		{name: "bad origin", env: map[string]string{"KILN_ALLOWED_ORIGINS": "kiln.example.com"}, wantErr: "not an origin"},
		{name: "shared root without a database", env: map[string]string{"KILN_SHARED_ROOT": "/srv/kiln-shared"}, wantErr: "set KILN_DATABASE too"},
		{name: "origin with path", env: map[string]string{"KILN_ALLOWED_ORIGINS": "https://kiln.example.com/app"}, wantErr: "not an origin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := newServeCmd()
			if err := cmd.Flags().Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			cfg, err := loadServeConfig(cmd.Flags(), func(k string) string { return tc.env[k] }, home)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Addr != tc.want.Addr || cfg.DataRoot != tc.want.DataRoot || cfg.Model != tc.want.Model ||
				cfg.Token != tc.want.Token || cfg.Loopback != tc.want.Loopback || !slices.Equal(cfg.AllowedOrigins, tc.want.AllowedOrigins) ||
				cfg.MCPTimeout != tc.want.MCPTimeout {
				t.Fatalf("config %+v, want %+v", cfg, tc.want)
			}
		})
	}
}

// TestRunServerShutdown serves on a free port, holds an event stream open
// and checks that cancelling the context ends the stream and returns nil.
func TestRunServerShutdown(t *testing.T) {
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	cfg := serveConfig{Addr: "127.0.0.1:0", DataRoot: filepath.Join(t.TempDir(), "root"), Model: "scripted", Loopback: true}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runServer(ctx, cfg, log, "test") }()

	addr := waitServingAddr(t, logs, done)
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()

	stream, err := http.Get("http://" + addr + "/api/v1/events")
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("events: %v %v", stream, err)
	}
	defer stream.Body.Close()
	sc := bufio.NewScanner(stream.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "event: ready") {
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("runServer: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("runServer did not return after cancellation")
	}
	for sc.Scan() {
	}
	if err := sc.Err(); err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("stream ended with %v", err)
	}
}

// waitServingAddr returns the address from the "kiln serving on" log line.
func waitServingAddr(t *testing.T, logs *lockedBuffer, done <-chan error) string {
	t.Helper()
	re := regexp.MustCompile(`kiln serving on http://([^ ]+) \(data `)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(logs.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("runServer returned early: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatalf("no serving line in the log:\n%s", logs)
	return ""
}

// TestServeAddressInUse: kiln serve on a busy port says so, with what to
// do, and starts nothing: no data directory, database or plugin, not a
// line of log.
func TestServeAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	host, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	data := filepath.Join(t.TempDir(), "fresh")

	r := kiln(t, "serve", "--addr", addr, "--data", data)
	want := "error: listen " + addr + ": address already in use — is another kiln serve running?\n" +
		"Stop it, or listen on another address with --addr (or $KILN_ADDR), e.g. --addr " + net.JoinHostPort(host, strconv.Itoa(n+1)) + ".\n"
	if r.code != exitFailure || r.stdout != "" || r.stderr != want {
		t.Errorf("serve on a busy port: exit %d, stdout %q, stderr:\n%s\nwant:\n%s", r.code, r.stdout, r.stderr, want)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		entries, _ := os.ReadDir(data)
		t.Errorf("serve on a busy port touched the data directory (%v): %v", err, entries)
	}

	// Other listen failures are the server's too, not "cannot reach the Kiln server".
	r = kiln(t, "serve", "--addr", "127.0.0.1:99999", "--data", data)
	if r.code != exitFailure || !strings.HasPrefix(r.stderr, "error: listen 127.0.0.1:99999: ") || strings.Contains(r.stderr, "Kiln server") {
		t.Errorf("serve on a bad port: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestLoadLogConfig(t *testing.T) {
	def := logConfig{Level: slog.LevelInfo, MaxSizeMB: 20, MaxAgeDays: 14, MaxFiles: 10}
	for _, tc := range []struct {
		env     map[string]string
		want    logConfig
		wantErr string
	}{
		{want: def},
		{env: map[string]string{"KILN_LOG_LEVEL": "DEBUG", "KILN_LOG_MAX_SIZE_MB": "5", "KILN_LOG_MAX_AGE_DAYS": " 30 ", "KILN_LOG_MAX_FILES": "3"},
			want: logConfig{Level: slog.LevelDebug, MaxSizeMB: 5, MaxAgeDays: 30, MaxFiles: 3}},
		{env: map[string]string{"KILN_LOG_LEVEL": "warning"}, want: logConfig{Level: slog.LevelWarn, MaxSizeMB: 20, MaxAgeDays: 14, MaxFiles: 10}},
		{env: map[string]string{"KILN_LOG_LEVEL": "verbose"}, wantErr: `KILN_LOG_LEVEL must be debug, info, warn or error, not "verbose"`},
		{env: map[string]string{"KILN_LOG_MAX_SIZE_MB": "0"}, wantErr: `KILN_LOG_MAX_SIZE_MB must be a whole number from 1 to`},
		{env: map[string]string{"KILN_LOG_MAX_AGE_DAYS": "2w"}, wantErr: `KILN_LOG_MAX_AGE_DAYS must be a whole number`},
		{env: map[string]string{"KILN_LOG_MAX_FILES": "-1"}, wantErr: `KILN_LOG_MAX_FILES must be a whole number`},
	} {
		got, err := loadLogConfig(func(k string) string { return tc.env[k] })
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v: error %v, want %q", tc.env, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("%v: %+v, %v; want %+v", tc.env, got, err, tc.want)
		}
	}
	// kiln serve refuses to start with a bad value, saying which.
	cmd := newServeCmd()
	if _, err := loadServeConfig(cmd.Flags(), func(k string) string { return map[string]string{"KILN_LOG_LEVEL": "loud"}[k] },
		func() (string, error) { return "/home/u", nil }); err == nil || !strings.Contains(err.Error(), "KILN_LOG_LEVEL") {
		t.Errorf("loadServeConfig with a bad level: %v", err)
	}
	if !strings.Contains(cmd.Long, "KILN_LOG_MAX_FILES") || !strings.Contains(cmd.Long, "<data>/logs/kiln.log") {
		t.Errorf("kiln serve --help does not document the log:\n%s", cmd.Long)
	}
}

// TestDelayToolsKeepLocalCalls checks that KILN_TEST_TOOL_DELAY leaves a
// tool's local calls local: a delayed write_file of a virtual file still
// runs again after a crash, as it does without the delay.
func TestDelayToolsKeepLocalCalls(t *testing.T) {
	tools, err := delayTools(append(builtin.Tools(t.TempDir()), files.Tools()...), "write_file=1ms,append_file=1ms")
	if err != nil {
		t.Fatal(err)
	}
	local := func(name, path string) bool {
		i := slices.IndexFunc(tools, func(tool core.Tool) bool { return tool.Spec().Name == name })
		lc, ok := tools[i].(core.LocalCaller)
		return ok && lc.Local(json.RawMessage(`{"path": "`+path+`", "content": "x"}`))
	}
	if !local("write_file", "/notes/a.md") || local("write_file", "/grants/out/a.md") || local("append_file", "/notes/a.md") {
		t.Errorf("after the delay: write_file /notes/a.md local %v, /grants/out/a.md local %v; append_file local %v",
			local("write_file", "/notes/a.md"), local("write_file", "/grants/out/a.md"), local("append_file", "/notes/a.md"))
	}
}

// TestTuneGC: kiln serve raises the collector's target to serveGCPercent,
// unless GOGC is set.
func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	tuneGC(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != serveGCPercent {
		t.Fatalf("without GOGC the target is %d, want %d", got, serveGCPercent)
	}
	tuneGC(func(k string) string {
		if k == "GOGC" {
			return "50"
		}
		return ""
	})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("with GOGC set the target was changed to %d", got)
	}
}
