package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
)

// upload posts content as the multipart part "file" named name.
func (e *env) upload(name string, content []byte) response {
	e.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		e.t.Fatal(err)
	}
	fw.Write(content)
	mw.Close()
	return e.raw("POST", "/api/v1/attachments", buf.String(), map[string]string{"Content-Type": mw.FormDataContentType()})
}

var tinyPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82")

func TestAttachmentsAPI(t *testing.T) {
	e := newEnv(t, Options{MaxAttachment: 1 << 10})
	blobs := filepath.Join(e.dir, "attachments")

	r := e.upload("dot.png", tinyPNG)
	var img map[string]any
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &img) != nil || img["mime_type"] != "image/png" || img["uri"] != "attachment://"+img["id"].(string) {
		t.Fatalf("image upload: %d %s", r.status, r.body)
	}
	// The type is sniffed: text named .png is text, a PNG named .txt an image.
	r = e.upload("notes.csv", []byte("a,b\n1,2\n"))
	var csv map[string]any
	json.Unmarshal(r.body, &csv)
	if r.status != http.StatusCreated || csv["mime_type"] != "text/csv" {
		t.Fatalf("csv upload: %d %s", r.status, r.body)
	}
	if r = e.upload("fake.png", []byte("just text")); r.status != http.StatusCreated || !strings.Contains(string(r.body), `"text/plain"`) {
		t.Fatalf("text named .png: %d %s", r.status, r.body)
	}
	// Refused: too large (nothing kept), not an image or text, not multipart.
	before := countBlobs(t, blobs)
	big := bytes.Repeat([]byte("x"), 1<<10+1)
	if r = e.upload("big.txt", big); r.status != http.StatusRequestEntityTooLarge || r.errorCode() != codeTooLarge {
		t.Fatalf("oversized: %d %s", r.status, r.body)
	}
	if r = e.upload("x.bin", []byte{0x7f, 'E', 'L', 'F', 0, 1, 2}); r.status != http.StatusUnsupportedMediaType {
		t.Fatalf("binary: %d %s", r.status, r.body)
	}
	e.wantError("POST", "/api/v1/attachments", `{"file":"x"}`, nil, http.StatusUnsupportedMediaType, codeUnsupportedMedia)
	if n := countBlobs(t, blobs); n != before {
		t.Fatalf("%d blobs after refused uploads, want %d", n, before)
	}
	entries, _ := os.ReadDir(blobs)
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), ".upload") {
			t.Errorf("temporary file %s left behind", en.Name())
		}
	}

	content := e.raw("GET", "/api/v1/attachments/"+img["id"].(string)+"/content", "", nil)
	if content.status != 200 || !bytes.Equal(content.body, tinyPNG) || content.header.Get("Content-Type") != "image/png" {
		t.Fatalf("content: %d %q", content.status, content.header)
	}

	// A run takes both; the user message carries them as parts.
	th := e.createThread("with files")
	run := e.startRun(th.ID, "text seen", map[string]any{"input": map[string]any{"text": "text seen", "attachments": []string{img["id"].(string), csv["id"].(string)}}})
	e.waitRun(run.ID, core.RunSucceeded)
	var msgs struct{ Messages []core.Message }
	e.call("GET", "/api/v1/threads/"+th.ID+"/messages", "", 200, &msgs)
	parts := msgs.Messages[0].Parts
	if len(parts) != 3 || parts[1].Type != "image" || parts[2].Type != "file" || parts[2].Name != "notes.csv" {
		t.Fatalf("parts %+v", parts)
	}
	e.wantError("DELETE", "/api/v1/attachments/"+img["id"].(string), "", nil, http.StatusConflict, core.ECONFLICT)
	e.wantError("POST", "/api/v1/threads/"+th.ID+"/runs", `{"input":{"text":"x","attachments":["att_nope"]}}`, nil, http.StatusBadRequest, core.EINVALID)

	// Deleting the thread deletes its attachments and their bytes.
	e.call("DELETE", "/api/v1/threads/"+th.ID, "", http.StatusNoContent, nil)
	e.wantError("GET", "/api/v1/attachments/"+img["id"].(string), "", nil, http.StatusNotFound, core.ENOTFOUND)
	if n := countBlobs(t, blobs); n != 1 { // the unused text upload
		t.Fatalf("%d blobs after deleting the thread, want 1", n)
	}
}

func countBlobs(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.HasPrefix(d.Name(), ".") {
			n++
		}
		return nil
	})
	return n
}

func TestGrantsAPI(t *testing.T) {
	e := newEnv(t, Options{})
	dir := t.TempDir()
	body, _ := json.Marshal(map[string]any{"path": dir, "name": "proj", "writable": true})
	var g core.Grant
	e.call("POST", "/api/v1/grants", string(body), http.StatusCreated, &g)
	real, _ := filepath.EvalSymlinks(dir)
	if g.Name != "proj" || g.Path != real || !g.Writable {
		t.Fatalf("grant %+v", g)
	}
	e.wantError("POST", "/api/v1/grants", string(body), nil, http.StatusConflict, core.ECONFLICT)
	e.wantError("POST", "/api/v1/grants", `{"path":"/definitely/not/here"}`, nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("POST", "/api/v1/grants", `{"path":"`+e.dir+`"}`, nil, http.StatusConflict, core.ECONFLICT)
	e.wantError("POST", "/api/v1/grants", `{"path":"x","bogus":1}`, nil, http.StatusBadRequest, codeInvalidJSON)
	var list struct{ Grants []core.Grant }
	e.call("GET", "/api/v1/grants", "", 200, &list)
	if len(list.Grants) != 1 {
		t.Fatalf("grants %+v", list)
	}
	// A run names it as its working folder, by name.
	th := e.createThread("w")
	run := e.startRun(th.ID, "text ok", map[string]any{"working_folder": "proj", "system": "Be terse."})
	if run.WorkingFolder != g.ID || run.System != "Be terse." {
		t.Fatalf("run %+v", run)
	}
	e.wantError("POST", "/api/v1/threads/"+th.ID+"/runs", `{"input":{"text":"x"},"working_folder":"nope"}`, nil, http.StatusBadRequest, core.EINVALID)
	e.call("DELETE", "/api/v1/grants/"+g.ID, "", http.StatusNoContent, nil)
	e.wantError("DELETE", "/api/v1/grants/"+g.ID, "", nil, http.StatusNotFound, core.ENOTFOUND)
}

func TestSettingsAPI(t *testing.T) {
	e := newEnv(t, Options{})
	var st core.Settings
	e.call("GET", "/api/v1/settings", "", 200, &st)
	if st.Memory || st.Theme != "system" {
		t.Fatalf("defaults %+v", st)
	}
	e.call("PUT", "/api/v1/settings", `{"memory":true,"theme":"dark"}`, 200, &st)
	e.call("PUT", "/api/v1/settings", `{"prompt_addendum":"Use metric units."}`, 200, &st)
	if !st.Memory || st.Theme != "dark" || st.PromptAddendum != "Use metric units." {
		t.Fatalf("settings %+v", st)
	}
	long, _ := json.Marshal(map[string]string{"prompt_addendum": strings.Repeat("a", core.MaxPromptAddendum+1)})
	e.wantError("PUT", "/api/v1/settings", string(long), nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("PUT", "/api/v1/settings", `{"theme":"neon"}`, nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("PUT", "/api/v1/settings", `{"colour":"red"}`, nil, http.StatusBadRequest, codeInvalidJSON)
	e.call("GET", "/api/v1/settings", "", 200, &st)
	if st.Theme != "dark" || st.PromptAddendum != "Use metric units." {
		t.Fatalf("a refused change changed %+v", st)
	}
}

func TestMemoriesAPI(t *testing.T) {
	e := newEnv(t, Options{})
	var m core.Memory
	e.call("POST", "/api/v1/memories", `{"name":"prefs.md","content":"Likes tea."}`, http.StatusCreated, &m)
	e.wantError("POST", "/api/v1/memories", `{"name":"prefs.md","content":"again"}`, nil, http.StatusConflict, core.ECONFLICT)
	e.wantError("POST", "/api/v1/memories", `{"name":"../x.md","content":"x"}`, nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("POST", "/api/v1/memories", `{"name":"x.md"}`, nil, http.StatusBadRequest, core.EINVALID)
	e.call("PUT", "/api/v1/memories/prefs.md", `{"content":"Likes coffee."}`, 200, &m)
	e.call("GET", "/api/v1/memories/prefs.md", "", 200, &m)
	if m.Content == nil || *m.Content != "Likes coffee." {
		t.Fatalf("memory %+v", m)
	}
	var list struct{ Memories []core.Memory }
	e.call("GET", "/api/v1/memories", "", 200, &list)
	if len(list.Memories) != 1 || list.Memories[0].Preview != "Likes coffee." {
		t.Fatalf("list %+v", list)
	}
	e.wantError("GET", "/api/v1/memories/..%2Fkiln.db", "", nil, http.StatusBadRequest, core.EINVALID)
	e.call("DELETE", "/api/v1/memories/prefs.md", "", http.StatusNoContent, nil)
	e.wantError("GET", "/api/v1/memories/prefs.md", "", nil, http.StatusNotFound, core.ENOTFOUND)
}

func TestForkAPI(t *testing.T) {
	e := newEnv(t, Options{})
	th := e.createThread("parent")
	run := e.startRun(th.ID, "tool echo {\"a\":1}\ntext done", nil)
	e.waitRun(run.ID, core.RunSucceeded)
	var msgs struct{ Messages []core.Message }
	e.call("GET", "/api/v1/threads/"+th.ID+"/messages", "", 200, &msgs)
	// user, assistant(call), tool, assistant(done)
	if len(msgs.Messages) != 4 {
		t.Fatalf("%d messages", len(msgs.Messages))
	}
	path := "/api/v1/threads/" + th.ID + "/fork"
	e.wantError("POST", path, `{}`, nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("POST", path, `{"message_index":0}`, nil, http.StatusConflict, core.ECONFLICT)
	e.wantError("POST", path, `{"message_index":2}`, nil, http.StatusConflict, core.ECONFLICT)
	e.wantError("POST", path, `{"message_index":9}`, nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("POST", "/api/v1/threads/thr_nope/fork", `{"message_index":1}`, nil, http.StatusNotFound, core.ENOTFOUND)
	for _, at := range []int{1, 3} {
		var f core.Thread
		e.call("POST", path, fmt.Sprintf(`{"message_index":%d}`, at), http.StatusCreated, &f)
		if f.Source != "fork" || f.ParentThreadID != th.ID || f.ParentMessage == nil || *f.ParentMessage != at {
			t.Fatalf("fork %+v", f)
		}
		var got struct{ Messages []core.Message }
		e.call("GET", "/api/v1/threads/"+f.ID+"/messages", "", 200, &got)
		want := map[int]int{1: 3, 3: 4}[at]
		if len(got.Messages) != want {
			t.Fatalf("fork at %d has %d messages, want %d", at, len(got.Messages), want)
		}
		for i, m := range got.Messages {
			p := msgs.Messages[i]
			if m.Role != p.Role || m.Text != p.Text || m.ToolCallID != p.ToolCallID || len(m.ToolCalls) != len(p.ToolCalls) {
				t.Errorf("fork message %d %+v, parent's %+v", i, m, p)
			}
		}
	}
	// Refused while a run is active.
	slow := e.startRun(th.ID, "tool sleep {\"ms\":3000}\ntext late", nil)
	e.waitRun(slow.ID, core.RunRunning)
	e.wantError("POST", path, `{"message_index":1}`, nil, http.StatusConflict, core.ECONFLICT)
	e.call("POST", "/api/v1/runs/"+slow.ID+"/cancel", "", http.StatusAccepted, nil)
	e.waitRun(slow.ID, core.RunCancelled)
}

func TestThreadFilesAPI(t *testing.T) {
	e := newEnv(t, Options{})
	th := e.createThread("files")
	var list struct{ Files []core.File }
	e.call("GET", "/api/v1/threads/"+th.ID+"/files", "", 200, &list)
	if list.Files == nil || len(list.Files) != 0 {
		t.Fatalf("files %+v", list)
	}
	e.wantError("GET", "/api/v1/threads/"+th.ID+"/files/nope.md", "", nil, http.StatusNotFound, core.ENOTFOUND)
	e.wantError("GET", "/api/v1/threads/"+th.ID+"/files/a/../b", "", nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("GET", "/api/v1/threads/thr_nope/files", "", nil, http.StatusNotFound, core.ENOTFOUND)
}
