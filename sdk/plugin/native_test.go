//go:build !wasip1

package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// dataDir points KILN_PLUGIN_DATA at a fresh folder for the test.
func dataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("KILN_PLUGIN_DATA", dir)
	return dir
}

func TestNativeFilesRoundTrip(t *testing.T) {
	dir := dataDir(t)
	if err := WriteFile("data:/note.txt", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "note.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("on disk: %q, %v", b, err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile("data:/sub/a.txt", []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile("data:/sub/a.txt", []byte("x")); err != nil { // truncates
		t.Fatal(err)
	}
	if b, err := ReadFile("data:/sub/a.txt"); err != nil || string(b) != "x" {
		t.Errorf("ReadFile = %q, %v", b, err)
	}

	if _, err := ReadFile("data:/missing"); !errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), dir) {
		t.Errorf("missing file: err = %v, want ErrNotExist without the host path", err)
	}
	if err := WriteFile("data:/nofolder/a.txt", nil); err == nil {
		t.Error("WriteFile created a parent folder")
	}
	if _, err := ReadFile("data:/sub"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("read a folder: err = %v", err)
	}
	if err := WriteFile("data:/big", make([]byte, maxFileSize+1)); err == nil {
		t.Error("WriteFile wrote more than 4 MiB")
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, maxFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile("data:/big"); err == nil || !strings.Contains(err.Error(), "larger than 4 MiB") {
		t.Errorf("read over 4 MiB: err = %v", err)
	}
}

func TestNativeFilesRefused(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KILN_PLUGIN_DATA", dir)
	secret := filepath.Join(parent, "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, p := range []string{"data:/../secret", "data:/..", "data:/a/../../secret", "data:/./x", "data:/a//b", `data:/a\b`, "data:x", "/etc/passwd", "secret"} {
		if b, err := ReadFile(p); err == nil {
			t.Errorf("ReadFile(%q) = %q, want an error", p, b)
		}
		if err := WriteFile(p, []byte("x")); err == nil {
			t.Errorf("WriteFile(%q) succeeded", p)
		}
	}

	if err := os.Symlink(secret, filepath.Join(dir, "link")); err != nil {
		t.Skip("no symlinks:", err)
	}
	if err := os.Symlink(parent, filepath.Join(dir, "up")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"data:/link", "data:/up/secret"} {
		if b, err := ReadFile(p); err == nil {
			t.Errorf("ReadFile(%q) = %q: a symlink led out of the data folder", p, b)
		}
		if err := WriteFile(p, []byte("overwritten")); err == nil {
			t.Errorf("WriteFile(%q) succeeded through a symlink out of the data folder", p)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "secret" {
		t.Errorf("the file outside the data folder now holds %q", b)
	}
}

func TestNativeFilesGrantAndNoData(t *testing.T) {
	dataDir(t)
	if _, err := ReadFile("grant:docs/a.md"); err == nil || !strings.Contains(err.Error(), "folder grants are available to WASM plugins only") {
		t.Errorf("ReadFile(grant:) err = %v", err)
	}
	if err := WriteFile("grant:docs/a.md", nil); err == nil || !strings.Contains(err.Error(), "folder grants are available to WASM plugins only") {
		t.Errorf("WriteFile(grant:) err = %v", err)
	}

	t.Setenv("KILN_PLUGIN_DATA", "")
	if _, err := ReadFile("data:/a"); err == nil || !strings.Contains(err.Error(), "KILN_PLUGIN_DATA is not set") {
		t.Errorf("ReadFile without KILN_PLUGIN_DATA: err = %v", err)
	}
	if err := WriteFile("data:/a", nil); err == nil || !strings.Contains(err.Error(), "KILN_PLUGIN_DATA is not set") {
		t.Errorf("WriteFile without KILN_PLUGIN_DATA: err = %v", err)
	}
}

func TestNativeHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("X-Method", r.Method)
			w.Header().Set("X-Got", r.Header.Get("X-Send"))
			w.WriteHeader(http.StatusCreated)
			w.Write(body)
		case "/exact":
			w.Write(make([]byte, MaxHTTPResponseBody))
		case "/big":
			w.Write(make([]byte, MaxHTTPResponseBody+1))
		case "/redirect":
			http.Redirect(w, r, "/exact", http.StatusFound)
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}
	}))
	defer srv.Close()
	ctx := context.Background()

	resp, err := HTTP(ctx, HTTPRequest{Method: "POST", URL: srv.URL + "/echo", Headers: map[string][]string{"X-Send": {"v"}}, Body: []byte("payload")})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusCreated || string(resp.Body) != "payload" || resp.Headers["X-Method"][0] != "POST" || resp.Headers["X-Got"][0] != "v" {
		t.Errorf("resp = %d %v %q", resp.Status, resp.Headers, resp.Body)
	}
	if resp, err := HTTP(ctx, HTTPRequest{URL: srv.URL + "/echo"}); err != nil || resp.Headers["X-Method"][0] != "GET" {
		t.Errorf("default method: %v, %v", resp, err)
	}

	if resp, err := HTTP(ctx, HTTPRequest{URL: srv.URL + "/redirect"}); err != nil || len(resp.Body) != MaxHTTPResponseBody {
		t.Errorf("a body of exactly the cap after a redirect: err = %v", err)
	}
	if _, err := HTTP(ctx, HTTPRequest{URL: srv.URL + "/big"}); err == nil || !strings.Contains(err.Error(), "over the 4 MiB limit") {
		t.Errorf("a body over the cap: err = %v", err)
	}

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := HTTP(short, HTTPRequest{URL: srv.URL + "/slow"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("past the deadline: err = %v, want DeadlineExceeded", err)
	}
	done, cancel2 := context.WithCancel(ctx)
	cancel2()
	if _, err := HTTP(done, HTTPRequest{URL: srv.URL + "/echo"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}

	for _, u := range []string{"ftp://example.com/x", "http://user:pw@127.0.0.1/", "::bad"} {
		if _, err := HTTP(ctx, HTTPRequest{URL: u}); err == nil {
			t.Errorf("HTTP(%q) succeeded", u)
		} else if strings.Contains(err.Error(), "pw") {
			t.Errorf("HTTP(%q): the error shows the password: %v", u, err)
		}
	}
}

// TestNativeWithoutHost: before a protocol-2 host has reached the plugin,
// the host callbacks fail with the reason rather than pretend.
func TestNativeWithoutHost(t *testing.T) {
	if err := Emit(context.Background(), map[string]int{"done": 1}); !errors.Is(err, errNoHost) {
		t.Errorf("Emit: err = %v, want errNoHost", err)
	}
	if _, _, err := KVGet("k"); !errors.Is(err, errNoHost) {
		t.Errorf("KVGet: err = %v, want errNoHost", err)
	}
}

func TestNativeLogFormat(t *testing.T) {
	var buf bytes.Buffer
	old := stderr
	stderr = &buf
	t.Cleanup(func() { stderr = old })

	levels := []struct {
		level slog.Level
		want  string
	}{
		{slog.LevelDebug - 4, "trace"},
		{slog.LevelDebug, "debug"},
		{slog.LevelDebug + 2, "debug"},
		{slog.LevelInfo, "info"},
		{slog.LevelWarn, "warn"},
		{slog.LevelError, "error"},
		{slog.LevelError + 4, "error"},
	}
	before := time.Now().Add(-time.Second)
	for _, l := range levels {
		Log(l.level, "line one\nline \"two\" at "+l.want)
	}
	Log(slog.LevelInfo, "a"+strings.Repeat("é", maxLogMessage)) // cut inside a rune

	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != len(levels)+1 {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(levels)+1, buf.String())
	}
	for i, line := range lines {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %d is not JSON: %q", i, line)
		}
		ts, _ := e["@timestamp"].(string)
		// go-plugin parses @timestamp with exactly this layout and treats
		// a line it cannot parse as plain text.
		if tm, err := time.Parse("2006-01-02T15:04:05.000000Z07:00", ts); err != nil || tm.Before(before) || tm.After(time.Now()) {
			t.Errorf("line %d: @timestamp %q: %v", i, ts, err)
		}
		msg, _ := e["@message"].(string)
		if i == len(levels) {
			if e["@level"] != "info" || !strings.HasSuffix(msg, "…") || len(msg) > maxLogMessage+len("…") || strings.ContainsRune(msg, '\uFFFD') {
				t.Errorf("long message: level %v, %d bytes, ends %q", e["@level"], len(msg), msg[len(msg)-8:])
			}
			continue
		}
		if e["@level"] != levels[i].want || msg != "line one\nline \"two\" at "+levels[i].want || len(e) != 3 {
			t.Errorf("line %d = %s, want @level %q", i, line, levels[i].want)
		}
	}
}

func TestNativeNowAndRandom(t *testing.T) {
	if d := time.Since(time.Unix(0, Now())); d < 0 || d > time.Minute {
		t.Errorf("Now is %v away from time.Now", d)
	}
	a, b := make([]byte, 32), make([]byte, 32)
	Random(a)
	Random(b)
	Random(nil)
	if bytes.Equal(a, b) || bytes.Equal(a, make([]byte, 32)) {
		t.Errorf("Random gave %x and %x", a, b)
	}
}

func TestNativePanicLogged(t *testing.T) {
	var buf bytes.Buffer
	old := stderr
	stderr = &buf
	t.Cleanup(func() { stderr = old })
	tool := &Tool{Name: "p", Handler: func(context.Context, json.RawMessage) (Result, error) { panic("oops") }}
	if res := processRunHandler(context.Background(), tool, nil); !res.IsError {
		t.Fatalf("a panic returned %+v, not the tool's failure", res)
	}
	var e map[string]string
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &e); err != nil {
		t.Fatalf("the panic was logged as %q: %v", buf.String(), err)
	}
	if e["@level"] != "error" || !strings.HasPrefix(e["@message"], `tool "p" panicked: oops`+"\ngoroutine ") {
		t.Errorf("logged %v", e)
	}
}
