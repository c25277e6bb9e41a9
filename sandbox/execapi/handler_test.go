//go:build unix

package execapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/sandboxtest"
)

const token = "t0ken"

func serve(t *testing.T, b Backend) *httptest.Server {
	t.Helper()
	h, err := Handler(b, token)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, srv *httptest.Server, method, path string, body io.Reader, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, body)
	req.Header.Set(TokenHeader, token)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func read(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func want(t *testing.T, resp *http.Response, status int) string {
	t.Helper()
	body := read(t, resp)
	if resp.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d: %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, status, body)
	}
	return body
}

// events runs a command and parses the stream.
func events(t *testing.T, srv *httptest.Server, path, body string) []event {
	t.Helper()
	resp := do(t, srv, "POST", path, strings.NewReader(body))
	raw := want(t, resp, 200)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	if !strings.HasSuffix(raw, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", raw)
	}
	var evs []event
	for _, obj := range strings.Split(strings.TrimSuffix(raw, "\n\n"), "\n\n") {
		var e event
		if err := json.Unmarshal([]byte(obj), &e); err != nil {
			t.Fatalf("event %q: %v", obj, err)
		}
		if e.Timestamp == 0 {
			t.Fatalf("event without timestamp: %q", obj)
		}
		if e.Type != "ping" {
			evs = append(evs, e)
		}
	}
	return evs
}

// text is the texts of the events of type typ, joined by "|".
func text(evs []event, typ string) string {
	var texts []string
	for _, e := range evs {
		if e.Type == typ {
			texts = append(texts, e.Text)
		}
	}
	return strings.Join(texts, "|")
}

// TestLineFraming: output arrives as execd sends it, one event per line
// without its ending ("\n", "\r\n" or a lone "\r"), an empty line as
// "\n", a last line without an ending at the end, stdout and stderr
// apart, in a command and in a session.
func TestLineFraming(t *testing.T) {
	srv := serve(t, LocalBackend{})
	cmd := `printf 'a\nb\n\nc\r\nd\re\r\n\r\nlast'; printf 'x\ny' >&2`
	evs := events(t, srv, "/command", `{"command":`+strconv.Quote(cmd)+`}`)
	if got, want := text(evs, "stdout"), "a|b|\n|c|d|e|\n|last"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if got := text(evs, "stderr"); got != "x|y" {
		t.Errorf("stderr %q", got)
	}
	var s struct {
		SessionID string `json:"session_id"`
	}
	json.Unmarshal([]byte(want(t, do(t, srv, "POST", "/session", nil), 200)), &s)
	evs = events(t, srv, "/session/"+s.SessionID+"/run", `{"command":`+strconv.Quote(cmd)+`}`)
	if got := text(evs, "stdout") + " " + text(evs, "stderr"); got != "a|b|\n|c|d|e|\n|last x|y" {
		t.Errorf("in a session: %q", got)
	}
}

// TestLineFramerPieces: a line ending split between two writes is one
// ending, and a line longer than maxLine goes out in pieces of at most
// maxLine bytes that do not split a UTF-8 character and together are the
// line.
func TestLineFramerPieces(t *testing.T) {
	rec := httptest.NewRecorder()
	o := newOutFramer(newEventStream(rec))
	long := strings.Repeat("€", maxLine/3+1000) // 3 bytes each: maxLine is not a multiple
	for _, p := range []string{"a\r", "\nb", "\r", "\n", long[:1000], long[1000:] + "\n"} {
		o.write(sandbox.Stdout, []byte(p))
	}
	o.write(sandbox.Stderr, []byte(strings.Repeat("z", 2*maxLine)))
	o.flush()
	var out, errs []string
	var partial []bool
	for _, obj := range strings.Split(strings.TrimSuffix(rec.Body.String(), "\n\n"), "\n\n") {
		var e event
		if err := json.Unmarshal([]byte(obj), &e); err != nil {
			t.Fatal(err)
		}
		partial = append(partial, e.Partial)
		if e.Type == "stderr" {
			errs = append(errs, e.Text)
		} else {
			out = append(out, e.Text)
		}
	}
	// the first piece of each long line, and stderr's last line (no
	// ending), do not end their lines
	if want := []bool{false, false, true, false, true, true}; !slices.Equal(partial, want) {
		t.Errorf("partial %v, want %v", partial, want)
	}
	if len(out) != 4 || out[0] != "a" || out[1] != "b" || out[2]+out[3] != long {
		t.Fatalf("stdout: %d events, %q, %d bytes in all", len(out), out[:min(2, len(out))], len(strings.Join(out, "")))
	}
	if len(out[2]) > maxLine || !utf8.ValidString(out[2]) || !utf8.ValidString(out[3]) {
		t.Errorf("the long line's pieces: %d and %d bytes, valid UTF-8 %v %v", len(out[2]), len(out[3]), utf8.ValidString(out[2]), utf8.ValidString(out[3]))
	}
	if len(errs) != 2 || len(errs[0]) != maxLine || len(errs[1]) != maxLine {
		t.Errorf("stderr without a line ending: %d events", len(errs))
	}
}

// TestUnknownRoutesJSON: a path the execution API does not have (execd's
// /code and /pty among them) and a method a path does not take answer
// {code, message} with 404 and 405 (and Allow), not the mux's plain text.
func TestUnknownRoutesJSON(t *testing.T) {
	srv := serve(t, LocalBackend{})
	for _, tc := range []struct {
		method, path string
		status       int
		code, says   string
	}{
		{"POST", "/code", 404, "NOT_FOUND", "no code contexts"},
		{"GET", "/code/contexts", 404, "NOT_FOUND", "no code contexts"},
		{"POST", "/pty", 404, "NOT_FOUND", "no /pty"},
		{"GET", "/nope", 404, "NOT_FOUND", "GET /nope: no such route"},
		{"GET", "/command/x/y", 404, "NOT_FOUND", "no such route"},
		{"PUT", "/command", 405, "METHOD_NOT_ALLOWED", "PUT is not allowed on /command"},
		{"POST", "/ping", 405, "METHOD_NOT_ALLOWED", "it takes GET, HEAD"},
	} {
		resp := do(t, srv, tc.method, tc.path, nil)
		var e struct{ Code, Message string }
		raw := read(t, resp)
		if err := json.Unmarshal([]byte(raw), &e); err != nil || resp.StatusCode != tc.status || e.Code != tc.code || !strings.Contains(e.Message, tc.says) || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %s %q, want %d %s saying %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), raw, tc.status, tc.code, tc.says)
		}
		if tc.status == 405 && resp.Header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", tc.method, tc.path)
		}
	}
	// Without the token it is a 401 all the same.
	req, _ := http.NewRequest("POST", srv.URL+"/code", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Errorf("/code without the token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

func TestCommandStream(t *testing.T) {
	srv := serve(t, LocalBackend{})
	start := time.Now()
	evs := events(t, srv, "/command", `{"command":"echo hi","background":false}`)
	if d := time.Since(start); d > 800*time.Millisecond {
		t.Errorf("echo hi took %v", d)
	}
	if len(evs) != 3 || evs[0].Type != "init" || evs[0].Text == "" || evs[1].Type != "stdout" || evs[1].Text != "hi" || evs[2].Type != "execution_complete" || evs[2].ExecutionTime == nil {
		t.Fatalf("events %+v", evs)
	}

	evs = events(t, srv, "/command", `{"command":"echo oops >&2; exit 3","cwd":"/tmp","envs":{"A":"1"}}`)
	last := evs[len(evs)-1]
	if text(evs, "stderr") != "oops" || last.Type != "error" || last.Error.Ename != "CommandExecError" || last.Error.Evalue != "3" {
		t.Fatalf("events %+v", evs)
	}
	evs = events(t, srv, "/command", `{"command":"printf %s \"$A\"; pwd","cwd":"/tmp","envs":{"A":"x"}}`)
	if got := text(evs, "stdout"); got != "x/tmp" {
		t.Fatalf("stdout %q", got)
	}

	start = time.Now()
	evs = events(t, srv, "/command", `{"command":"sleep 30 & sleep 30","timeout":300}`)
	last = evs[len(evs)-1]
	if last.Type != "error" || last.Error.Ename != "TimeoutError" || time.Since(start) > 5*time.Second {
		t.Fatalf("timeout: %+v after %v", evs, time.Since(start))
	}
}

func TestInterruptBackgroundLogs(t *testing.T) {
	srv := serve(t, LocalBackend{})
	resp := do(t, srv, "POST", "/command", strings.NewReader(`{"command":"sleep 30"}`))
	dec := json.NewDecoder(resp.Body)
	var init event
	if err := dec.Decode(&init); err != nil || init.Type != "init" {
		t.Fatal(init, err)
	}
	want(t, do(t, srv, "DELETE", "/command?id="+init.Text, nil), 200)
	var last event
	for dec.Decode(&last) == nil {
	}
	if last.Type != "error" || last.Error.Ename != "Interrupted" {
		t.Fatalf("last event %+v", last)
	}
	want(t, do(t, srv, "DELETE", "/command?id=nope", nil), 404)

	evs := events(t, srv, "/command", `{"command":"echo one; sleep 0.3; echo two; exit 4","background":true}`)
	if len(evs) != 2 || evs[1].Type != "execution_complete" {
		t.Fatalf("background events %+v", evs)
	}
	id := evs[0].Text
	var st map[string]any
	for range 100 {
		json.Unmarshal([]byte(want(t, do(t, srv, "GET", "/command/status/"+id, nil), 200)), &st)
		if st["running"] == false {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st["exit_code"] != 4.0 || st["content"] == "" || st["finished_at"] == nil {
		t.Fatalf("status %v", st)
	}
	resp = do(t, srv, "GET", "/command/"+id+"/logs", nil)
	if got := want(t, resp, 200); got != "one\ntwo\n" || resp.Header.Get("EXECD-COMMANDS-TAIL-CURSOR") != "8" {
		t.Fatalf("logs %q cursor %q", got, resp.Header.Get("EXECD-COMMANDS-TAIL-CURSOR"))
	}
	if got := want(t, do(t, srv, "GET", "/command/"+id+"/logs?cursor=4", nil), 200); got != "two\n" {
		t.Fatalf("logs from 4: %q", got)
	}
	want(t, do(t, srv, "GET", "/command/status/nope", nil), 404)
}

func TestSession(t *testing.T) {
	srv := serve(t, LocalBackend{})
	dir := t.TempDir()
	var s struct {
		SessionID string `json:"session_id"`
	}
	json.Unmarshal([]byte(want(t, do(t, srv, "POST", "/session", strings.NewReader(`{"cwd":"`+dir+`"}`)), 200)), &s)
	run := func(body string) []event { return events(t, srv, "/session/"+s.SessionID+"/run", body) }
	evs := run(`{"command":"mkdir sub && cd sub && export K=v; printf nonl"}`)
	if got := text(evs, "stdout"); got != "nonl" || evs[len(evs)-1].Type != "execution_complete" {
		t.Fatalf("first run %q %+v", got, evs)
	}
	evs = run(`{"command":"pwd; echo $K; echo e >&2; false"}`)
	if got := text(evs, "stdout"); got != filepath.Join(dir, "sub")+"|v" || text(evs, "stderr") != "e" || evs[len(evs)-1].Error.Evalue != "1" {
		t.Fatalf("second run %q %+v", got, evs)
	}
	want(t, do(t, srv, "DELETE", "/session/"+s.SessionID, nil), 200)
	want(t, do(t, srv, "POST", "/session/"+s.SessionID+"/run", strings.NewReader(`{"command":"true"}`)), 404)
	want(t, do(t, srv, "DELETE", "/session/"+s.SessionID, nil), 404)

	// A run that times out ends its session.
	json.Unmarshal([]byte(want(t, do(t, srv, "POST", "/session", nil), 200)), &s)
	evs = events(t, srv, "/session/"+s.SessionID+"/run", `{"command":"sleep 30","timeout":200}`)
	if e := evs[len(evs)-1]; e.Type != "error" || e.Error.Ename != "TimeoutError" {
		t.Fatalf("timeout events %+v", evs)
	}
	want(t, do(t, srv, "POST", "/session/"+s.SessionID+"/run", strings.NewReader(`{"command":"true"}`)), 404)
}

func TestMetricsWatch(t *testing.T) {
	srv := serve(t, LocalBackend{})
	resp := do(t, srv, "GET", "/metrics/watch", nil)
	dec := json.NewDecoder(resp.Body)
	for range 2 {
		var m map[string]float64
		if err := dec.Decode(&m); err != nil || m["cpu_count"] < 1 {
			t.Fatalf("metrics %v %v", m, err)
		}
	}
}

// genReader yields n bytes of a fixed pseudo-random sequence.
type genReader struct{ n, i int64 }

func (g *genReader) Read(p []byte) (int, error) {
	if g.i >= g.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), g.n-g.i)]
	for k := range p {
		x := uint64(g.i+int64(k)) * 0x9E3779B97F4A7C15
		p[k] = byte(x >> 56)
	}
	g.i += int64(len(p))
	return len(p), nil
}

func upload(t *testing.T, srv *httptest.Server, path string, mode int, data io.Reader) *http.Response {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		h := make(map[string][]string)
		h["Content-Disposition"] = []string{`form-data; name="metadata"; filename="metadata"`}
		h["Content-Type"] = []string{"application/json"}
		part, _ := mw.CreatePart(h)
		fmt.Fprintf(part, `{"path":%q,"mode":%d}`, path, mode)
		fw, _ := mw.CreateFormFile("file", filepath.Base(path))
		_, err := io.Copy(fw, data)
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	return do(t, srv, "POST", "/files/upload", pr, "Content-Type", mw.FormDataContentType())
}

func TestUploadDownload(t *testing.T) {
	srv := serve(t, LocalBackend{})
	dir := t.TempDir()
	const size = 64 << 20
	p := dir + "/deep/big.bin"
	want(t, upload(t, srv, p, 600, &genReader{n: size}), 200)
	wantSum := sha256.New()
	io.Copy(wantSum, &genReader{n: size})
	resp := do(t, srv, "GET", "/files/download?path="+p, nil)
	gotSum := sha256.New()
	if n, err := io.Copy(gotSum, resp.Body); err != nil || n != size || !bytes.Equal(gotSum.Sum(nil), wantSum.Sum(nil)) {
		t.Fatalf("download: %d bytes, %v, sums differ", n, err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	part := make([]byte, 10)
	g := &genReader{n: 110}
	io.CopyN(io.Discard, g, 100)
	io.ReadFull(g, part)
	resp = do(t, srv, "GET", "/files/download?path="+p, nil, "Range", "bytes=100-109")
	if got := want(t, resp, 206); got != string(part) || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 100-109/%d", size) {
		t.Fatalf("range: %q %q", got, resp.Header.Get("Content-Range"))
	}
	want(t, do(t, srv, "GET", "/files/download?path="+p, nil, "Range", fmt.Sprintf("bytes=%d-", size)), 416)

	os.WriteFile(dir+"/lines.txt", []byte("a\nb\nc\nd\n"), 0o644)
	if got := want(t, do(t, srv, "GET", "/files/download?path="+dir+"/lines.txt&offset=1&limit=2", nil), 200); got != "b\nc\n" {
		t.Fatalf("lines %q", got)
	}
	want(t, do(t, srv, "GET", "/files/download?path="+dir+"/missing", nil), 404)
}

func TestFiles(t *testing.T) {
	srv := serve(t, LocalBackend{})
	dir := t.TempDir()
	os.WriteFile(dir+"/a.txt", []byte("foo bar foo"), 0o644)
	os.Symlink(dir+"/a.txt", dir+"/link")

	var info map[string]fileJSON
	json.Unmarshal([]byte(want(t, do(t, srv, "GET", "/files/info?path="+dir+"/a.txt&path="+dir+"/link", nil), 200)), &info)
	if a := info[dir+"/a.txt"]; a.Type != "file" || a.Size != 11 || a.Mode != 644 || a.Owner == "" {
		t.Fatalf("info %+v", a)
	}
	if info[dir+"/link"].Type != "symlink" {
		t.Fatalf("link info %+v", info[dir+"/link"])
	}

	body := want(t, do(t, srv, "POST", "/files/replace?verbose=true", strings.NewReader(`{"`+dir+`/a.txt":{"old":"foo","new":"baz"}}`)), 200)
	if got, _ := os.ReadFile(dir + "/a.txt"); string(got) != "baz bar baz" || !strings.Contains(body, `"replacedCount":2`) {
		t.Fatalf("replace: %q %s", got, body)
	}
	want(t, do(t, srv, "POST", "/files/permissions", strings.NewReader(`{"`+dir+`/a.txt":{"mode":600}}`)), 200)
	if fi, _ := os.Stat(dir + "/a.txt"); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	want(t, do(t, srv, "POST", "/directories", strings.NewReader(`{"`+dir+`/x/y/z":{"mode":700}}`)), 200)
	if fi, err := os.Stat(dir + "/x/y/z"); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("mkdir: %v", err)
	}
	want(t, do(t, srv, "POST", "/files/mv", strings.NewReader(`[{"src":"`+dir+`/a.txt","dest":"`+dir+`/x/y/b.txt"}]`)), 200)
	if _, err := os.Stat(dir + "/x/y/b.txt"); err != nil {
		t.Fatal(err)
	}
	want(t, do(t, srv, "POST", "/files/mv", strings.NewReader(`[{"src":"`+dir+`/nope","dest":"`+dir+`/n2"}]`)), 404)

	var found []fileJSON
	json.Unmarshal([]byte(want(t, do(t, srv, "GET", "/files/search?path="+dir+"&pattern=**/*.txt", nil), 200)), &found)
	if len(found) != 1 || found[0].Path != dir+"/x/y/b.txt" {
		t.Fatalf("search %+v", found)
	}
	var list []fileJSON
	json.Unmarshal([]byte(want(t, do(t, srv, "GET", "/directories/list?path="+dir+"&depth=2", nil), 200)), &list)
	var paths []string
	for _, f := range list {
		paths = append(paths, strings.TrimPrefix(f.Path, dir))
	}
	if strings.Join(paths, " ") != "/link /x /x/y" {
		t.Fatalf("list %v", paths)
	}
	want(t, do(t, srv, "GET", "/directories/list?path="+dir+"/link", nil), 400)

	want(t, do(t, srv, "DELETE", "/files?path="+dir+"/x", nil), 400)
	want(t, do(t, srv, "DELETE", "/files?path="+dir+"/x/y/b.txt", nil), 200)
	if _, err := os.Stat(dir + "/x/y/b.txt"); !os.IsNotExist(err) {
		t.Fatal("file not removed")
	}
	want(t, do(t, srv, "DELETE", "/directories?path="+dir+"/x", nil), 200)
	if _, err := os.Stat(dir + "/x"); !os.IsNotExist(err) {
		t.Fatal("folder not removed")
	}
	var m map[string]float64
	json.Unmarshal([]byte(want(t, do(t, srv, "GET", "/metrics", nil), 200)), &m)
	if m["cpu_count"] < 1 || m["timestamp"] == 0 {
		t.Fatalf("metrics %v", m)
	}
}

func TestBadRequests(t *testing.T) {
	srv := serve(t, LocalBackend{})
	for _, hdr := range [][]string{nil, {TokenHeader, "wrong"}} {
		req, _ := http.NewRequest("GET", srv.URL+"/ping", nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := want(t, resp, 401)
		if !strings.Contains(body, `"code":"UNAUTHORIZED"`) || strings.Contains(body, token) {
			t.Fatalf("401 body %s", body)
		}
	}
	want(t, do(t, srv, "GET", "/ping", nil), 200)
	if _, err := Handler(LocalBackend{}, ""); err == nil {
		t.Fatal("Handler without a token")
	}
	dir := t.TempDir()
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/command", `{"command":`},
		{"POST", "/command", `{"command":""}`},
		{"POST", "/command", `{"command":"true","cwd":"tmp"}`},
		{"POST", "/command", `{"command":"true"` + strings.Repeat(" ", maxJSON) + `}`},
		{"GET", "/files/download?path=" + dir + "/../etc/passwd", ""},
		{"GET", "/files/info?path=etc/passwd", ""},
		{"GET", "/files/info?path=/tmp/a%00b", ""},
		{"POST", "/files/mv", `[{"src":"` + dir + `/a","dest":"../b"}]`},
		{"POST", "/directories", `{"relative/dir":{}}`},
		{"POST", "/files/permissions", `{"` + dir + `":{"mode":999}}`},
	} {
		resp := do(t, srv, c.method, c.path, strings.NewReader(c.body))
		if body := want(t, resp, 400); !strings.Contains(body, `"code":"INVALID_REQUEST_BODY"`) {
			t.Errorf("%s %s: %s", c.method, c.path, body)
		}
	}
	want(t, do(t, srv, "POST", "/command", strings.NewReader(`{"command":"true","cwd":"`+dir+`/missing"}`)), 404)
	if _, err := os.Stat("relative"); err == nil {
		t.Fatal("a relative folder was made")
	}
}

func TestRuntimeBackend(t *testing.T) {
	rt := sandboxtest.NewMachine().Runtime(sandboxtest.Options{})
	h, err := rt.Start(context.Background(), sandbox.Spec{ID: "box"})
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, RuntimeBackend{Runtime: rt, Handle: h})
	evs := events(t, srv, "/command", `{"command":"echo hi; echo err >&2; exit 3","cwd":"/workspace"}`)
	if evs[0].Type != "init" || text(evs, "stdout") != "hi" || text(evs, "stderr") != "err" || evs[len(evs)-1].Error.Evalue != "3" {
		t.Fatalf("events %+v", evs)
	}
	evs = events(t, srv, "/command", `{"command":"cat /etc/hostname"}`)
	if text(evs, "stdout") != "box" || evs[len(evs)-1].Type != "execution_complete" {
		t.Fatalf("events %+v", evs)
	}
	want(t, upload(t, srv, "/workspace/a.txt", 644, strings.NewReader("hello")), 200)
	if got := want(t, do(t, srv, "GET", "/files/download?path=/workspace/a.txt", nil, "Range", "bytes=1-3"), 206); got != "ell" {
		t.Fatalf("range %q", got)
	}
	want(t, do(t, srv, "POST", "/files/mv", strings.NewReader(`[{"src":"/workspace/a.txt","dest":"/tmp/b.txt"}]`)), 200)
	if got := want(t, do(t, srv, "GET", "/files/download?path=/tmp/b.txt", nil), 200); got != "hello" {
		t.Fatalf("moved file %q", got)
	}
	want(t, do(t, srv, "GET", "/files/info?path=/workspace/a.txt", nil), 404)
	var list []fileJSON
	json.Unmarshal([]byte(want(t, do(t, srv, "GET", "/directories/list?path=/", nil), 200)), &list)
	if len(list) != 3 || list[0].Path != "/etc" || list[0].Type != "directory" {
		t.Fatalf("list %+v", list)
	}
	// Modes go through the sandbox's mkdir -m and chmod.
	want(t, do(t, srv, "POST", "/directories", strings.NewReader(`{"/tmp/d/e":{"mode":750}}`)), 200)
	want(t, do(t, srv, "POST", "/files/permissions", strings.NewReader(`{"/tmp/b.txt":{"mode":600}}`)), 200)
	var infos map[string]fileJSON
	json.Unmarshal([]byte(want(t, do(t, srv, "GET", "/files/info?path=/tmp/d/e&path=/tmp/b.txt&path=/tmp/d", nil), 200)), &infos)
	if infos["/tmp/d/e"].Mode != 750 || infos["/tmp/b.txt"].Mode != 600 || infos["/tmp/d"].Mode != 755 {
		t.Fatalf("modes after POST /directories and /files/permissions: %+v", infos)
	}
	if body := want(t, do(t, srv, "POST", "/files/permissions", strings.NewReader(`{"/tmp/missing":{"mode":600}}`)), 404); !strings.Contains(body, "missing") {
		t.Errorf("chmod of a missing file: %s", body)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/session", `{}`},
		{"POST", "/files/permissions", `{"/tmp/b.txt":{"owner":"root"}}`},
		{"GET", "/metrics", ""},
		{"GET", "/proxy/8080/x", ""},
		{"POST", "/command", `{"command":"true","uid":0}`},
		{"POST", "/command", `{"command":"true","uid":0,"background":true}`},
	} {
		resp := do(t, srv, c.method, c.path, strings.NewReader(c.body))
		if body := want(t, resp, 501); !strings.Contains(body, `"code":"NOT_SUPPORTED"`) || !strings.Contains(body, "memory") {
			t.Errorf("%s %s: %s", c.method, c.path, body)
		}
	}
	want(t, do(t, srv, "DELETE", "/files?path=/tmp/b.txt", nil), 200)
	want(t, do(t, srv, "GET", "/files/info?path=/tmp/b.txt", nil), 404)
}

func FuzzCommandRequest(f *testing.F) {
	for _, s := range []string{`{"command":"echo hi","background":false}`, `{"command":"x","cwd":"/tmp","timeout":5,"uid":1,"gid":2,"envs":{"A":"b"}}`, `{"command":""}`, `[]`, `{"envs":{"1":"x"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/command", bytes.NewReader(body))
		req, err := decodeCommand(w, r)
		if err != nil {
			if ae, ok := err.(*apiError); !ok || ae.status != 400 {
				t.Fatalf("error %v is not a 400", err)
			}
			return
		}
		if strings.TrimSpace(req.Command) == "" || req.Timeout < 0 || strings.ContainsRune(req.Command, 0) || (req.GID != nil && req.UID == nil) {
			t.Fatalf("accepted %+v", req)
		}
		if req.Cwd != "" && checkPath("cwd", req.Cwd) != nil {
			t.Fatalf("accepted cwd %q", req.Cwd)
		}
	})
}

func TestProxy(t *testing.T) {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s token=%q", r.URL.Path, r.URL.RawQuery, r.Header.Get(TokenHeader))
	}))
	defer app.Close()
	port := app.URL[strings.LastIndexByte(app.URL, ':')+1:]
	srv := serve(t, LocalBackend{})
	if got := want(t, do(t, srv, "GET", "/proxy/"+port+"/a/b?x=1", nil), 200); got != `/a/b x=1 token=""` {
		t.Fatalf("proxied %q", got)
	}
	want(t, do(t, srv, "GET", "/proxy/0/a", nil), 400)
}

func TestLogCap(t *testing.T) {
	c := &cmdState{}
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for range 17 {
		c.write(1, chunk)
	}
	c.write(1, []byte("end"))
	if len(c.log) != maxLog || c.logStart != 17<<20+3-maxLog || !bytes.HasSuffix(c.log, []byte("xend")) {
		t.Fatalf("kept %d bytes from %d", len(c.log), c.logStart)
	}
}
