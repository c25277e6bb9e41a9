package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

func TestWorkspaceRoutes(t *testing.T) {
	ctx := context.Background()
	const grant = `{"id":"grt_1","name":"docs","path":"/home/u/docs","writable":true,"owner_id":"local","created_at":"2026-05-10T12:00:00Z"}`
	const memory = `{"name":"prefs.md","size":5,"content":"hello","updated_at":"2026-05-10T12:00:00Z"}`
	const attachment = `{"id":"att_1","name":"a.txt","mime_type":"text/plain","size":3,"sha256":"ab","uri":"attachment://att_1","created_at":"2026-05-10T12:00:00Z"}`
	addendum, theme, memoryOn := "Be brief.", "dark", true
	tests := []struct {
		name, respond string
		call          func(c *Client) (any, error)
		method, path  string
		body          string
		check         func(t *testing.T, got any)
	}{
		{
			name: "ListGrants", respond: `{"grants":[` + grant + `]}`,
			call:   func(c *Client) (any, error) { return c.ListGrants(ctx) },
			method: "GET", path: "/api/v1/grants",
			check: func(t *testing.T, got any) {
				if gs := got.([]*core.Grant); len(gs) != 1 || gs[0].Name != "docs" || !gs[0].Writable || gs[0].Path != "/home/u/docs" {
					t.Errorf("grants = %+v", gs)
				}
			},
		},
		{
			name: "AddGrant", respond: grant,
			call: func(c *Client) (any, error) {
				return c.AddGrant(ctx, core.GrantInput{Path: "/home/u/docs", Name: "docs", Writable: true})
			},
			method: "POST", path: "/api/v1/grants", body: `{"path":"/home/u/docs","name":"docs","writable":true}`,
			check: func(t *testing.T, got any) {
				if g := got.(*core.Grant); g.ID != "grt_1" {
					t.Errorf("grant = %+v", g)
				}
			},
		},
		{
			name:   "RemoveGrant",
			call:   func(c *Client) (any, error) { return nil, c.RemoveGrant(ctx, "grt_1") },
			method: "DELETE", path: "/api/v1/grants/grt_1",
		},
		{
			name: "Settings", respond: `{"prompt_addendum":"Be brief.","limits":{"max_steps":5},"memory":true,"theme":"dark"}`,
			call:   func(c *Client) (any, error) { return c.Settings(ctx) },
			method: "GET", path: "/api/v1/settings",
			check: func(t *testing.T, got any) {
				if st := got.(*core.Settings); st.PromptAddendum != "Be brief." || st.Limits.MaxSteps != 5 || !st.Memory || st.Theme != "dark" {
					t.Errorf("settings = %+v", st)
				}
			},
		},
		{
			name: "UpdateSettings", respond: `{"prompt_addendum":"Be brief.","limits":{},"memory":true,"theme":"dark"}`,
			call: func(c *Client) (any, error) {
				return c.UpdateSettings(ctx, core.SettingsPatch{PromptAddendum: &addendum, Memory: &memoryOn, Theme: &theme})
			},
			method: "PUT", path: "/api/v1/settings",
			body: `{"prompt_addendum":"Be brief.","limits":null,"memory":true,"theme":"dark","sandbox_runtime":null}`,
		},
		{
			name: "GetAttachment", respond: attachment,
			call:   func(c *Client) (any, error) { return c.GetAttachment(ctx, "att_1") },
			method: "GET", path: "/api/v1/attachments/att_1",
			check: func(t *testing.T, got any) {
				if a := got.(*Attachment); a.ID != "att_1" || a.MIME != "text/plain" || a.Size != 3 || a.URI != "attachment://att_1" {
					t.Errorf("attachment = %+v", a)
				}
			},
		},
		{
			name:   "DeleteAttachment",
			call:   func(c *Client) (any, error) { return nil, c.DeleteAttachment(ctx, "att_1") },
			method: "DELETE", path: "/api/v1/attachments/att_1",
		},
		{
			name: "Memories", respond: `{"memories":[{"name":"prefs.md","size":5,"preview":"hello","updated_at":"2026-05-10T12:00:00Z"}]}`,
			call:   func(c *Client) (any, error) { return c.Memories(ctx) },
			method: "GET", path: "/api/v1/memories",
			check: func(t *testing.T, got any) {
				if ms := got.([]*core.Memory); len(ms) != 1 || ms[0].Name != "prefs.md" || ms[0].Preview != "hello" || ms[0].Content != nil {
					t.Errorf("memories = %+v", ms)
				}
			},
		},
		{
			name: "Memory", respond: memory,
			call:   func(c *Client) (any, error) { return c.Memory(ctx, "prefs.md") },
			method: "GET", path: "/api/v1/memories/prefs.md",
			check: func(t *testing.T, got any) {
				if m := got.(*core.Memory); m.Content == nil || *m.Content != "hello" {
					t.Errorf("memory = %+v", m)
				}
			},
		},
		{
			name: "CreateMemory", respond: memory,
			call:   func(c *Client) (any, error) { return c.CreateMemory(ctx, "prefs.md", "hello") },
			method: "POST", path: "/api/v1/memories", body: `{"name":"prefs.md","content":"hello"}`,
		},
		{
			name: "PutMemory", respond: memory,
			call:   func(c *Client) (any, error) { return c.PutMemory(ctx, "prefs.md", "") },
			method: "PUT", path: "/api/v1/memories/prefs.md", body: `{"content":""}`,
		},
		{
			name:   "DeleteMemory",
			call:   func(c *Client) (any, error) { return nil, c.DeleteMemory(ctx, "prefs.md") },
			method: "DELETE", path: "/api/v1/memories/prefs.md",
		},
		{
			name: "ThreadFiles", respond: `{"files":[{"path":"/notes/plan.md","size":12,"seq":3,"updated_at":"2026-05-10T12:00:00Z"}]}`,
			call:   func(c *Client) (any, error) { return c.ThreadFiles(ctx, "thr_1") },
			method: "GET", path: "/api/v1/threads/thr_1/files",
			check: func(t *testing.T, got any) {
				if fs := got.([]*core.File); len(fs) != 1 || fs[0].Path != "/notes/plan.md" || fs[0].Size != 12 || fs[0].Seq != 3 {
					t.Errorf("files = %+v", fs)
				}
			},
		},
		{
			name: "ForkThread", respond: `{"id":"thr_2","title":"T (fork)","source":"fork","parent_thread_id":"thr_1","parent_message_index":1}`,
			call:   func(c *Client) (any, error) { return c.ForkThread(ctx, "thr_1", 1, "") },
			method: "POST", path: "/api/v1/threads/thr_1/fork", body: `{"message_index":1}`,
			check: func(t *testing.T, got any) {
				if th := got.(*core.Thread); th.ID != "thr_2" || th.ParentThreadID != "thr_1" || th.ParentMessage == nil || *th.ParentMessage != 1 {
					t.Errorf("fork = %+v", th)
				}
			},
		},
		{
			name: "ForkThreadTitled", respond: `{"id":"thr_2"}`,
			call:   func(c *Client) (any, error) { return c.ForkThread(ctx, "thr_1", 0, "Other way") },
			method: "POST", path: "/api/v1/threads/thr_1/fork", body: `{"message_index":0,"title":"Other way"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status := http.StatusOK
			if tt.respond == "" {
				status = http.StatusNoContent
			}
			c, reqs := fakeAPI(t, status, tt.respond)
			got, err := tt.call(c)
			if err != nil {
				t.Fatal(err)
			}
			if len(*reqs) != 1 {
				t.Fatalf("%d requests", len(*reqs))
			}
			r := (*reqs)[0]
			if r.method != tt.method || r.path != tt.path {
				t.Errorf("request %s %s, want %s %s", r.method, r.path, tt.method, tt.path)
			}
			if (tt.body == "") != (r.body == "") || tt.body != "" && !jsonEqual(r.body, tt.body) {
				t.Errorf("body %q, want %q", r.body, tt.body)
			}
			if r.header.Get("Authorization") != "Bearer s3cret" {
				t.Errorf("Authorization %q", r.header.Get("Authorization"))
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

// rawAPI answers every request with status, content type and body, and
// records the escaped path asked for.
func rawAPI(t *testing.T, status int, contentType, body string) (*Client, *[]string) {
	t.Helper()
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.EscapedPath())
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c, &paths
}

func TestThreadFileAndAttachmentContent(t *testing.T) {
	ctx := context.Background()
	c, paths := rawAPI(t, http.StatusOK, "text/plain; charset=utf-8", "# Plan\n")
	b, err := c.ThreadFile(ctx, "thr_1", "/notes/a plan?.md")
	if err != nil || string(b) != "# Plan\n" {
		t.Fatalf("ThreadFile = %q, %v", b, err)
	}
	rc, err := c.AttachmentContent(ctx, "att_1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(rc)
	rc.Close()
	if string(b) != "# Plan\n" {
		t.Errorf("AttachmentContent = %q", b)
	}
	want := []string{"/api/v1/threads/thr_1/files/notes/a%20plan%3F.md", "/api/v1/attachments/att_1/content"}
	if strings.Join(*paths, " ") != strings.Join(want, " ") {
		t.Errorf("paths = %q, want %q", *paths, want)
	}
	for _, p := range []string{"", "/", "notes/plan.md"} {
		if _, err := c.ThreadFile(ctx, "thr_1", p); err == nil {
			t.Errorf("ThreadFile(%q) succeeded", p)
		}
	}
	if len(*paths) != 2 {
		t.Errorf("relative paths sent requests: %q", *paths)
	}

	c, _ = rawAPI(t, http.StatusNotFound, "application/json", `{"error":{"code":"not_found","message":"file \"/x\" not found"}}`)
	if _, err := c.ThreadFile(ctx, "thr_1", "/x"); !IsNotFound(err) || err.Error() != `file "/x" not found` {
		t.Errorf("missing file: %v", err)
	}
	if _, err := c.AttachmentContent(ctx, "att_9"); !IsNotFound(err) {
		t.Errorf("missing attachment: %v", err)
	}
}

func TestWorkspaceRefusedLocally(t *testing.T) {
	ctx := context.Background()
	c, reqs := fakeAPI(t, http.StatusOK, `{}`)
	for name, call := range map[string]func() error{
		"RemoveGrant":       func() error { return c.RemoveGrant(ctx, "") },
		"GetAttachment":     func() error { _, err := c.GetAttachment(ctx, ""); return err },
		"AttachmentContent": func() error { _, err := c.AttachmentContent(ctx, ""); return err },
		"DeleteAttachment":  func() error { return c.DeleteAttachment(ctx, "") },
		"Memory":            func() error { _, err := c.Memory(ctx, ""); return err },
		"PutMemory":         func() error { _, err := c.PutMemory(ctx, "", "x"); return err },
		"DeleteMemory":      func() error { return c.DeleteMemory(ctx, "") },
		"ThreadFiles":       func() error { _, err := c.ThreadFiles(ctx, ""); return err },
		"ThreadFile":        func() error { _, err := c.ThreadFile(ctx, "", "/a"); return err },
		"ForkThread":        func() error { _, err := c.ForkThread(ctx, "", 1, ""); return err },
	} {
		if err := call(); err == nil || !strings.Contains(err.Error(), "empty") {
			t.Errorf("%s with an empty id: %v", name, err)
		}
	}
	if _, err := c.PutMemory(ctx, "a.md", "\xff"); err == nil || err.Error() != "memory content is not UTF-8 text" {
		t.Errorf("PutMemory of bytes that are not UTF-8: %v", err)
	}
	if _, err := c.CreateMemory(ctx, "a.md", "\xff"); err == nil {
		t.Error("CreateMemory of bytes that are not UTF-8 succeeded")
	}
	if len(*reqs) != 0 {
		t.Errorf("empty ids and bad content sent %d requests", len(*reqs))
	}
}

// uploadServer reads uploads as the Kiln server does: a multipart form
// whose part "file" is hashed as it is read, at most limit bytes of it.
// Each upload's request is recorded. When firstMiB is not nil it is
// closed once the first MiB of a file has arrived.
type uploadServer struct {
	limit    int64
	firstMiB chan struct{}
	once     sync.Once

	mu       sync.Mutex
	lengths  []int64 // each request's Content-Length, -1 when chunked
	received []int64 // the bytes of the file each request carried
}

func (s *uploadServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.lengths = append(s.lengths, r.ContentLength)
	s.mu.Unlock()
	fail := func(status int, code, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"code":%q,"message":%q}}`, code, msg)
	}
	if r.Method != http.MethodPost || r.URL.Path != "/api/v1/attachments" {
		fail(http.StatusNotFound, "not_found", "no route")
		return
	}
	if r.ContentLength > s.limit+4096 {
		fail(http.StatusRequestEntityTooLarge, "too_large", "the file exceeds the attachment limit")
		return
	}
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		fail(http.StatusUnsupportedMediaType, "unsupported_media_type", "not multipart")
		return
	}
	part, err := multipart.NewReader(r.Body, params["boundary"]).NextPart()
	if err != nil || part.FormName() != "file" {
		fail(http.StatusBadRequest, "invalid", fmt.Sprintf("no file part: %v", err))
		return
	}
	h := sha256.New()
	var n int64
	for buf := make([]byte, 64<<10); ; {
		m, err := part.Read(buf)
		h.Write(buf[:m])
		if n+int64(m) >= 1<<20 && s.firstMiB != nil {
			s.once.Do(func() { close(s.firstMiB) })
		}
		n += int64(m)
		if n > s.limit {
			fail(http.StatusRequestEntityTooLarge, "too_large", "the file exceeds the attachment limit")
			return
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fail(http.StatusBadRequest, "invalid", err.Error())
			return
		}
	}
	s.mu.Lock()
	s.received = append(s.received, n)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":"att_1","name":%q,"mime_type":"text/plain","size":%d,"sha256":%q,"uri":"attachment://att_1"}`,
		part.FileName(), n, hex.EncodeToString(h.Sum(nil)))
}

// gatedSource yields size bytes of a repeating pattern without a known
// length. Past half of them it waits until gate is closed: an upload that
// read the whole source before sending any of it would never get there.
type gatedSource struct {
	size, off int64
	gate      <-chan struct{}
	sum       hash.Hash
}

func (g *gatedSource) Read(p []byte) (int, error) {
	if g.off >= g.size {
		return 0, io.EOF
	}
	if g.off >= g.size/2 {
		select {
		case <-g.gate:
		case <-time.After(20 * time.Second):
			return 0, errors.New("the server saw nothing of the file while half of it was read: the upload is not streamed")
		}
	}
	n := min(int64(len(p)), g.size-g.off)
	for i := range p[:n] {
		p[i] = byte('a' + (g.off+int64(i))%26)
	}
	g.off += n
	g.sum.Write(p[:n])
	return int(n), nil
}

func TestUploadAttachmentStreams(t *testing.T) {
	ctx := context.Background()
	const size = 8 << 20
	us := &uploadServer{limit: 16 << 20, firstMiB: make(chan struct{})}
	srv := httptest.NewServer(us)
	defer srv.Close()
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}

	src := &gatedSource{size: size, gate: us.firstMiB, sum: sha256.New()}
	var sent, total int64 = 0, 0
	a, err := c.UploadAttachment(ctx, `notes "big".txt`, src, WithProgress(func(s, t int64) { sent, total = s, t }))
	if err != nil {
		t.Fatal(err)
	}
	if want := hex.EncodeToString(src.sum.Sum(nil)); a.SHA256 != want || a.Size != size || a.Name != `notes "big".txt` {
		t.Errorf("attachment = %+v, want sha256 %s, size %d", a, want, size)
	}
	if sent != size || total != -1 {
		t.Errorf("last progress %d of %d, want %d of -1", sent, total, size)
	}

	// A file's length is known: the request says it, and progress has the
	// total.
	path := filepath.Join(t.TempDir(), "data.txt")
	content := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err = c.UploadAttachment(ctx, "data.txt", f, WithProgress(func(s, t int64) { sent, total = s, t }))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	if a.SHA256 != hex.EncodeToString(sum[:]) || a.Size != int64(len(content)) {
		t.Errorf("file attachment = %+v", a)
	}
	if sent != int64(len(content)) || total != int64(len(content)) {
		t.Errorf("file progress %d of %d, want %d of %d", sent, total, len(content), len(content))
	}
	us.mu.Lock()
	defer us.mu.Unlock()
	if len(us.lengths) != 2 || us.lengths[0] != -1 || us.lengths[1] <= int64(len(content)) || us.lengths[1] > int64(len(content))+1024 {
		t.Errorf("Content-Length of the uploads = %v; want -1 (unknown), then the file's size and the envelope", us.lengths)
	}
}

func TestUploadAttachmentErrors(t *testing.T) {
	ctx := context.Background()
	us := &uploadServer{limit: 1 << 20}
	srv := httptest.NewServer(us)
	defer srv.Close()
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	big := func() io.Reader { return io.LimitReader(neverEnding('x'), 8<<20) }
	// The server stops reading a body of unknown length at its limit; a
	// body that says its length is refused before it is read.
	for name, r := range map[string]io.Reader{"chunked": big(), "sized": bytes.NewReader(make([]byte, 8<<20))} {
		_, err := c.UploadAttachment(ctx, "big.txt", r)
		if !IsTooLarge(err) || err.Error() != "the file exceeds the attachment limit" {
			t.Errorf("%s: upload over the limit: %v", name, err)
		}
	}

	c, _ = fakeAPI(t, http.StatusUnsupportedMediaType,
		`{"error":{"code":"unsupported_media_type","message":"a.bin is application/octet-stream; attachments are images (PNG, JPEG, GIF, WebP) or UTF-8 text files"}}`)
	_, err = c.UploadAttachment(ctx, "a.bin", strings.NewReader("\x00\x01"))
	if !IsUnsupportedMedia(err) || IsTooLarge(err) || !strings.HasPrefix(err.Error(), "a.bin is application/octet-stream") {
		t.Errorf("binary upload: %v", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Code != "unsupported_media_type" {
		t.Errorf("error = %#v", err)
	}
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}
