//go:build unix

package execapi

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/sandbox/internal/oapitest"
)

// TestSpecGolden checks real answers of the handler over the local OS,
// streams included, against specs/sandbox-execd.yaml's statuses and
// schemas.
func TestSpecGolden(t *testing.T) {
	s := oapitest.Load(t, specFile)
	srv := serve(t, LocalBackend{})
	dir := t.TempDir()
	q := func(p string) string { return url.QueryEscape(p) }
	call := func(method, path, ctype string, body io.Reader, want int, hdr ...string) []byte {
		t.Helper()
		hdr = append(hdr, "Content-Type", ctype)
		resp := do(t, srv, method, path, body, hdr...)
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Errorf("%s %s: %d %s, want %d", method, path, resp.StatusCode, raw, want)
		}
		p, _, _ := strings.Cut(path, "?")
		tmpl, ok := s.Match(p, "path")
		if !ok {
			t.Fatalf("%s %s is no path of the spec", method, path)
		}
		if err := s.CheckAnswer(method, tmpl, resp.StatusCode, resp.Header.Get("Content-Type"), raw); err != nil {
			t.Errorf("%s %s: %v", method, path, err)
		}
		return raw
	}
	js := func(method, path, body string, want int) []byte {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		return call(method, path, "application/json", rd, want)
	}

	// The token is checked first.
	req, _ := http.NewRequest("GET", srv.URL+"/ping", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := s.CheckAnswer("GET", "/ping", resp.StatusCode, resp.Header.Get("Content-Type"), raw); err != nil || resp.StatusCode != 401 {
		t.Errorf("without the token: %d %v", resp.StatusCode, err)
	}
	js("GET", "/ping", "", 200)

	// Streams: success, a failing exit code, a timeout, a background run.
	out := js("POST", "/command", `{"command":"echo hi; echo err >&2"}`, 200)
	for _, typ := range []string{`"type":"init"`, `"type":"stdout"`, `"type":"stderr"`, `"type":"execution_complete"`} {
		if !bytes.Contains(out, []byte(typ)) {
			t.Errorf("stream without %s: %s", typ, out)
		}
	}
	if !bytes.Contains(out, []byte(`"type":"stdout","text":"hi",`)) {
		t.Errorf("stdout is not one line without its ending: %s", out)
	}
	if out := js("POST", "/command", `{"command":"exit 3","cwd":"`+dir+`"}`, 200); !bytes.Contains(out, []byte(`"evalue":"3"`)) {
		t.Errorf("exit 3: %s", out)
	}
	js("POST", "/command", `{"command":"sleep 5","timeout":100}`, 200)
	bg := js("POST", "/command", `{"command":"echo later","background":true}`, 200)
	var init event
	json.Unmarshal(bytes.SplitN(bg, []byte("\n\n"), 2)[0], &init)
	js("GET", "/command/status/"+init.Text, "", 200)
	js("GET", "/command/"+init.Text+"/logs?cursor=0", "", 200)
	js("GET", "/command/"+init.Text+"/logs?cursor=x", "", 400)
	js("GET", "/command/status/nope", "", 404)
	js("DELETE", "/command?id=nope", "", 404)
	js("POST", "/command", `{"command":" "}`, 400)
	js("POST", "/command", `{"command":"true","cwd":"`+dir+`/missing"}`, 404)

	// Sessions.
	var sess struct {
		ID string `json:"session_id"`
	}
	json.Unmarshal(js("POST", "/session", `{"cwd":"`+dir+`"}`, 200), &sess)
	if out := js("POST", "/session/"+sess.ID+"/run", `{"command":"export A=1; pwd"}`, 200); !bytes.Contains(out, []byte(dir)) {
		t.Errorf("session run: %s", out)
	}
	js("DELETE", "/session/"+sess.ID, "", 200)
	js("POST", "/session/"+sess.ID+"/run", `{"command":"true"}`, 404)

	// Files and folders.
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	mw.WriteField("metadata", `{"path":"`+dir+`/a.txt","mode":640}`)
	fw, _ := mw.CreateFormFile("file", "a.txt")
	fw.Write([]byte("one\ntwo\nthree\n"))
	mw.Close()
	call("POST", "/files/upload", mw.FormDataContentType(), &mp, 200)
	call("POST", "/files/upload", "text/plain", strings.NewReader("x"), 400)
	js("GET", "/files/download?path="+q(dir+"/a.txt"), "", 200)
	call("GET", "/files/download?path="+q(dir+"/a.txt"), "", nil, 206, "Range", "bytes=0-2")
	call("GET", "/files/download?path="+q(dir+"/a.txt"), "", nil, 416, "Range", "bytes=100-")
	js("GET", "/files/download?path="+q(dir+"/a.txt")+"&offset=1&limit=1", "", 200)
	js("GET", "/files/download?path="+q(dir+"/missing"), "", 404)
	js("GET", "/files/download?path=relative", "", 400)
	js("GET", "/files/info?path="+q(dir+"/a.txt")+"&path="+q(dir), "", 200)
	js("GET", "/files/info?path="+q(dir+"/missing"), "", 404)
	js("POST", "/files/replace?verbose=true", `{"`+dir+`/a.txt":{"old":"two","new":"2"}}`, 200)
	js("POST", "/files/replace", `{"`+dir+`/a.txt":{"old":""}}`, 400)
	js("POST", "/files/permissions", `{"`+dir+`/a.txt":{"mode":600}}`, 200)
	js("POST", "/files/permissions", `{"`+dir+`/a.txt":{"mode":9}}`, 400)
	js("POST", "/files/mv", `[{"src":"`+dir+`/a.txt","dest":"`+dir+`/b.txt"}]`, 200)
	js("POST", "/files/mv", `[{"src":"`+dir+`/a.txt","dest":"`+dir+`/c.txt"}]`, 404)
	js("POST", "/directories", `{"`+dir+`/d/e":{"mode":755}}`, 200)
	js("GET", "/directories/list?path="+q(dir)+"&depth=2", "", 200)
	js("GET", "/directories/list?path="+q(dir+"/b.txt"), "", 400)
	js("GET", "/files/search?path="+q(dir)+"&pattern="+q("**/*.txt"), "", 200)
	js("GET", "/files/search?path="+q(dir+"/missing"), "", 404)
	js("DELETE", "/files?path="+q(dir+"/d"), "", 400)
	js("DELETE", "/files?path="+q(dir+"/b.txt"), "", 200)
	js("DELETE", "/directories?path="+q(dir+"/d"), "", 200)
	js("DELETE", "/directories?path=/", "", 400)

	// Metrics and the proxy.
	js("GET", "/metrics", "", 200)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	js("GET", "/proxy/"+itoa(port)+"/x", "", 502)
	js("GET", "/proxy/0/x", "", 400)
}

func itoa(n int) string { return strconv.Itoa(n) }
