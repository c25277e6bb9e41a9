package web

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
)

func TestHealthz(t *testing.T) {
	e := newEnv(t, Options{Token: strings.Repeat("t", 40)})
	e.token = ""
	var body map[string]string
	for _, path := range []string{"/healthz", "/api/v1/healthz"} {
		e.call("GET", path, "", http.StatusOK, &body)
		if body["status"] != "ok" {
			t.Fatalf("%s body %v", path, body)
		}
	}
}

// TestReadyz: ready with a database that answers, without a token; not
// ready (503) once the engine stops and when the database is gone, with
// the check that failed and no error text.
func TestReadyz(t *testing.T) {
	e := newEnv(t, Options{Token: strings.Repeat("t", 40)})
	e.token = ""
	var rd core.Readiness
	e.call("GET", "/readyz", "", http.StatusOK, &rd)
	if rd != (core.Readiness{Ready: true, Database: "ok", Leases: "ok", Engine: "running"}) {
		t.Fatalf("readyz: %+v", rd)
	}
	if err := e.svc.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.call("GET", "/readyz", "", http.StatusServiceUnavailable, &rd)
	if rd.Ready || rd.Engine != "stopping" || rd.Database != "ok" {
		t.Fatalf("readyz while stopping: %+v", rd)
	}
	e.store.Close()
	r := e.raw("GET", "/readyz", "", nil)
	if err := json.Unmarshal(r.body, &rd); err != nil || r.status != http.StatusServiceUnavailable || rd.Database != "unreachable" {
		t.Fatalf("readyz without a database: %d %s", r.status, r.body)
	}
	if strings.Contains(string(r.body), "closed") {
		t.Errorf("readyz names the error: %s", r.body)
	}
}

func TestThreads(t *testing.T) {
	e := newEnv(t, Options{})

	var def core.Thread
	e.call("POST", "/api/v1/threads", "", http.StatusCreated, &def)
	if def.ID == "" || def.Title != "New thread" || def.Status != core.ThreadIdle {
		t.Fatalf("thread from empty body: %+v", def)
	}
	var fld core.Folder
	e.call("POST", "/api/v1/folders", `{"name":"Work"}`, http.StatusCreated, &fld)
	var th core.Thread
	e.call("POST", "/api/v1/threads", `{"title":"  Plan  ","folder_id":"`+fld.ID+`","pinned":true}`, http.StatusCreated, &th)
	if th.Title != "Plan" || th.FolderID != fld.ID || !th.Pinned {
		t.Fatalf("created thread: %+v", th)
	}

	var got core.Thread
	e.call("GET", "/api/v1/threads/"+th.ID, "", http.StatusOK, &got)
	if got.ID != th.ID || got.Title != "Plan" {
		t.Fatalf("GET thread: %+v", got)
	}

	list := func(query string) []string {
		t.Helper()
		var page core.ThreadPage
		e.call("GET", "/api/v1/threads"+query, "", http.StatusOK, &page)
		ids := make([]string, len(page.Threads))
		for i, x := range page.Threads {
			ids[i] = x.ID
		}
		return ids
	}
	if ids := list(""); len(ids) != 2 || ids[0] != th.ID {
		t.Fatalf("list: %v, want the pinned thread first of two", ids)
	}
	if ids := list("?folder_id=" + fld.ID); !slices.Equal(ids, []string{th.ID}) {
		t.Fatalf("list by folder: %v", ids)
	}
	if ids := list("?no_folder=true"); !slices.Equal(ids, []string{def.ID}) {
		t.Fatalf("list without folder: %v", ids)
	}
	if ids := list("?q=plan"); !slices.Equal(ids, []string{th.ID}) {
		t.Fatalf("search: %v", ids)
	}
	var page core.ThreadPage
	e.call("GET", "/api/v1/threads?limit=1", "", http.StatusOK, &page)
	if len(page.Threads) != 1 || page.NextCursor == "" {
		t.Fatalf("page of 1: %d threads, cursor %q", len(page.Threads), page.NextCursor)
	}
	e.call("GET", "/api/v1/threads?limit=1&cursor="+page.NextCursor, "", http.StatusOK, &page)
	if len(page.Threads) != 1 || page.Threads[0].ID != def.ID {
		t.Fatalf("second page: %+v", page)
	}

	e.call("PATCH", "/api/v1/threads/"+th.ID, `{"title":"Renamed","pinned":false}`, http.StatusOK, &got)
	if got.Title != "Renamed" || got.Pinned || got.FolderID != fld.ID {
		t.Fatalf("patched title and pinned: %+v", got)
	}
	e.call("PATCH", "/api/v1/threads/"+th.ID, `{"folder_id":null}`, http.StatusOK, &got)
	if got.FolderID != "" || got.Title != "Renamed" {
		t.Fatalf("folder_id null: %+v", got)
	}
	e.call("PATCH", "/api/v1/threads/"+th.ID, `{"folder_id":"`+fld.ID+`"}`, http.StatusOK, &got)
	e.call("PATCH", "/api/v1/threads/"+th.ID, `{"folder_id":""}`, http.StatusOK, &got)
	if got.FolderID != "" {
		t.Fatalf(`folder_id "": %+v`, got)
	}
	e.wantError("PATCH", "/api/v1/threads/"+th.ID, `{"title":""}`, nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("PATCH", "/api/v1/threads/"+th.ID, `{"folder_id":"fld_missing"}`, nil, http.StatusNotFound, core.ENOTFOUND)

	var msgs struct{ Messages []core.Message }
	e.call("GET", "/api/v1/threads/"+th.ID+"/messages", "", http.StatusOK, &msgs)
	if msgs.Messages == nil || len(msgs.Messages) != 0 {
		t.Fatalf("messages of a new thread: %+v", msgs)
	}

	r := e.call("DELETE", "/api/v1/threads/"+th.ID, "", http.StatusNoContent, nil)
	if len(r.body) != 0 {
		t.Fatalf("DELETE body %q", r.body)
	}
	e.wantError("GET", "/api/v1/threads/"+th.ID, "", nil, http.StatusNotFound, core.ENOTFOUND)
	e.wantError("DELETE", "/api/v1/threads/"+th.ID, "", nil, http.StatusNotFound, core.ENOTFOUND)
}

func TestFolders(t *testing.T) {
	e := newEnv(t, Options{})
	var a, b core.Folder
	e.call("POST", "/api/v1/folders", `{"name":"Alpha"}`, http.StatusCreated, &a)
	e.call("POST", "/api/v1/folders", `{"name":"Beta","position":-1}`, http.StatusCreated, &b)
	e.wantError("POST", "/api/v1/folders", `{"name":"alpha"}`, nil, http.StatusConflict, core.ECONFLICT)
	e.wantError("POST", "/api/v1/folders", `{"name":""}`, nil, http.StatusBadRequest, core.EINVALID)

	var list struct{ Folders []core.Folder }
	e.call("GET", "/api/v1/folders", "", http.StatusOK, &list)
	if len(list.Folders) != 2 || list.Folders[0].ID != b.ID {
		t.Fatalf("folders: %+v", list.Folders)
	}
	var got core.Folder
	e.call("GET", "/api/v1/folders/"+a.ID, "", http.StatusOK, &got)
	if got.Name != "Alpha" {
		t.Fatalf("GET folder: %+v", got)
	}
	// Positions are a dense order: 7 means last, which is 1 of two.
	e.call("PATCH", "/api/v1/folders/"+a.ID, `{"name":"Gamma","position":7}`, http.StatusOK, &got)
	if got.Name != "Gamma" || got.Position != 1 {
		t.Fatalf("patched folder: %+v", got)
	}
	e.wantError("PATCH", "/api/v1/folders/"+a.ID, `{"name":"beta"}`, nil, http.StatusConflict, core.ECONFLICT)

	th := e.createThread("inside")
	e.call("PATCH", "/api/v1/threads/"+th.ID, `{"folder_id":"`+a.ID+`"}`, http.StatusOK, nil)
	e.call("DELETE", "/api/v1/folders/"+a.ID, "", http.StatusNoContent, nil)
	e.wantError("GET", "/api/v1/folders/"+a.ID, "", nil, http.StatusNotFound, core.ENOTFOUND)
	var moved core.Thread
	e.call("GET", "/api/v1/threads/"+th.ID, "", http.StatusOK, &moved)
	if moved.FolderID != "" {
		t.Fatalf("thread of a deleted folder: %+v", moved)
	}
}

func TestRunLifecycle(t *testing.T) {
	e := newEnv(t, Options{})
	th := e.createThread("run")
	run := e.startRun(th.ID, "tool echo {\"a\":1}\ntext all done", nil)
	if run.ThreadID != th.ID || run.Model != "scripted" {
		t.Fatalf("started run: %+v", run)
	}
	run = e.waitRun(run.ID, core.RunSucceeded)
	if run.ToolCalls != 1 || run.FinishedAt == nil {
		t.Fatalf("finished run: %+v", run)
	}

	var msgs struct{ Messages []core.Message }
	e.call("GET", "/api/v1/threads/"+th.ID+"/messages", "", http.StatusOK, &msgs)
	roles := make([]string, len(msgs.Messages))
	for i, m := range msgs.Messages {
		roles[i] = m.Role
	}
	if !slices.Equal(roles, []string{"user", "assistant", "tool", "assistant"}) {
		t.Fatalf("roles %v", roles)
	}
	if m := msgs.Messages[2]; m.Text != `{"a":1}` || m.Name != "echo" {
		t.Fatalf("tool result %+v", m)
	}
	if m := msgs.Messages[3]; m.Text != "all done" {
		t.Fatalf("final answer %+v", m)
	}

	var runs struct{ Runs []core.Run }
	e.call("GET", "/api/v1/threads/"+th.ID+"/runs", "", http.StatusOK, &runs)
	if len(runs.Runs) != 1 || runs.Runs[0].ID != run.ID {
		t.Fatalf("runs %+v", runs)
	}
	var ins struct{ Interrupts []core.Interrupt }
	e.call("GET", "/api/v1/runs/"+run.ID+"/interrupts", "", http.StatusOK, &ins)
	if ins.Interrupts == nil || len(ins.Interrupts) != 0 {
		t.Fatalf("interrupts %+v", ins)
	}

	var inbox core.InboxPage
	e.call("GET", "/api/v1/inbox?queue=unread", "", http.StatusOK, &inbox)
	if len(inbox.Items) != 1 || inbox.Items[0].ThreadID != th.ID || inbox.Counts.Unread != 1 || inbox.Queue != core.QueueUnread {
		t.Fatalf("unread inbox %+v", inbox)
	}
	var read core.Thread
	e.call("POST", "/api/v1/threads/"+th.ID+"/read", "", http.StatusOK, &read)
	if read.Unread || read.UnreadRunID != "" {
		t.Fatalf("read thread %+v", read)
	}
	e.call("GET", "/api/v1/inbox?queue=unread&limit=10", "", http.StatusOK, &inbox)
	if len(inbox.Items) != 0 || inbox.Counts != (core.InboxCounts{}) {
		t.Fatalf("inbox after read %+v", inbox)
	}

	e.wantError("POST", "/api/v1/runs/"+run.ID+"/cancel", "", nil, http.StatusConflict, core.ECONFLICT)
	e.wantError("POST", "/api/v1/threads/"+th.ID+"/runs", `{"input":{"text":"text x"},"model":"nope"}`, nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("POST", "/api/v1/threads/"+th.ID+"/runs", `{"input":{"text":"   "}}`, nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("POST", "/api/v1/threads/"+th.ID+"/runs", `{"input":{"text":"text x"},"limits":{"max_steps":-1}}`, nil, http.StatusBadRequest, core.EINVALID)
}

// TestCancelRun cancels a run during a long tool call.
func TestCancelRun(t *testing.T) {
	e := newEnv(t, Options{})
	th := e.createThread("cancel")
	run := e.startRun(th.ID, `tool sleep {"ms":60000}`, nil)
	// Checkpoint 2 is the model's turn: the sleep call runs after it.
	e.waitRunUntil(run.ID, "the sleep call under way", func(r core.Run) bool {
		return r.Status == core.RunRunning && r.Checkpoint >= 2
	})
	var cancelled core.Run
	e.call("POST", "/api/v1/runs/"+run.ID+"/cancel", "", http.StatusAccepted, &cancelled)
	if cancelled.ID != run.ID {
		t.Fatalf("cancel answered %+v", cancelled)
	}
	e.waitRun(run.ID, core.RunCancelled)
	e.wantError("POST", "/api/v1/runs/"+run.ID+"/cancel", "", nil, http.StatusConflict, core.ECONFLICT)
	e.call("DELETE", "/api/v1/threads/"+th.ID, "", http.StatusNoContent, nil)
}

func TestDeleteThreadWithActiveRun(t *testing.T) {
	e := newEnv(t, Options{})
	th := e.createThread("busy")
	run := e.startRun(th.ID, `tool append_file {"path":"busy.txt","line":"x"}`, map[string]any{"interrupt_on": map[string]bool{"append_file": true}})
	e.waitRun(run.ID, core.RunInterrupted)
	e.wantError("DELETE", "/api/v1/threads/"+th.ID, "", nil, http.StatusConflict, core.ECONFLICT)
}

func TestToolsAndStatus(t *testing.T) {
	e := newEnv(t, Options{Version: "v1.2.3", DataRoot: "/data", DefaultModel: "scripted"})
	var tools struct{ Tools []core.ToolSpec }
	e.call("GET", "/api/v1/tools", "", http.StatusOK, &tools)
	var names []string
	for _, s := range tools.Tools {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"echo", "append_file", "sleep"}) {
		t.Fatalf("tools %v", names)
	}
	var st map[string]any
	e.call("GET", "/api/v1/status", "", http.StatusOK, &st)
	for _, k := range []string{"version", "data_root", "default_model", "started_at", "uptime_seconds", "active_runs", "subscribers", "search"} {
		if _, ok := st[k]; !ok {
			t.Errorf("status lacks %q: %v", k, st)
		}
	}
	if st["version"] != "v1.2.3" || st["data_root"] != "/data" || st["default_model"] != "scripted" || st["search"] != e.store.SearchMode() {
		t.Fatalf("status %v", st)
	}
}

func TestNotFound(t *testing.T) {
	e := newEnv(t, Options{})
	for _, path := range []string{
		"/api/v1/threads/thr_missing", "/api/v1/threads/thr_missing/messages", "/api/v1/threads/thr_missing/runs",
		"/api/v1/threads/thr_missing/events", "/api/v1/runs/run_missing", "/api/v1/runs/run_missing/interrupts",
		"/api/v1/interrupts/int_missing", "/api/v1/folders/fld_missing",
	} {
		e.wantError("GET", path, "", nil, http.StatusNotFound, core.ENOTFOUND)
	}
	e.wantError("POST", "/api/v1/threads/thr_missing/runs", `{"input":{"text":"text x"}}`, nil, http.StatusNotFound, core.ENOTFOUND)
	e.wantError("POST", "/api/v1/threads/thr_missing/read", "", nil, http.StatusNotFound, core.ENOTFOUND)
	e.wantError("POST", "/api/v1/runs/run_missing/cancel", "", nil, http.StatusNotFound, core.ENOTFOUND)
	e.wantError("POST", "/api/v1/interrupts/int_missing/decision", `{"decision":"approve"}`, nil, http.StatusNotFound, core.ENOTFOUND)
	e.wantError("DELETE", "/api/v1/folders/fld_missing", "", nil, http.StatusNotFound, core.ENOTFOUND)
	e.wantError("PATCH", "/api/v1/folders/fld_missing", `{"name":"x"}`, nil, http.StatusNotFound, core.ENOTFOUND)

	e.wantError("GET", "/api/v1/nothing", "", nil, http.StatusNotFound, core.ENOTFOUND)
	e.wantError("GET", "/nothing.js", "", nil, http.StatusNotFound, core.ENOTFOUND)

	r := e.wantError("PUT", "/api/v1/threads", "", nil, http.StatusMethodNotAllowed, codeMethodNotAllowed)
	if got := r.header.Get("Allow"); got != "GET, POST" {
		t.Fatalf("Allow %q", got)
	}
	r = e.wantError("POST", "/api/v1/threads/thr_x", "", nil, http.StatusMethodNotAllowed, codeMethodNotAllowed)
	if got := r.header.Get("Allow"); got != "GET, PATCH, DELETE" {
		t.Fatalf("Allow %q", got)
	}
}

func TestDecodeErrors(t *testing.T) {
	e := newEnv(t, Options{})
	th := e.createThread("decode")
	runs := "/api/v1/threads/" + th.ID + "/runs"
	for _, tc := range []struct {
		name, method, path, body, ctype string
		status                          int
		code, message                   string
	}{
		{"malformed", "POST", "/api/v1/threads", `{"title":`, "", 400, codeInvalidJSON, "unexpected end of input"},
		{"bad token", "POST", "/api/v1/threads", `{"title" "x"}`, "", 400, codeInvalidJSON, "malformed JSON at byte"},
		{"unknown field", "POST", "/api/v1/threads", `{"title":"x","foo":1}`, "", 400, codeInvalidJSON, `json: unknown field "foo"`},
		{"nested unknown field", "POST", runs, `{"input":{"text":"text x","extra":true}}`, "", 400, codeInvalidJSON, `json: unknown field "extra"`},
		{"wrong type", "POST", "/api/v1/threads", `{"title":5}`, "", 400, codeInvalidJSON, `field "title": expected string, got number`},
		{"nested wrong type", "POST", runs, `{"input":{"text":true}}`, "", 400, codeInvalidJSON, `field "input.text": expected string, got boolean`},
		{"folder_id type", "PATCH", "/api/v1/threads/" + th.ID, `{"folder_id":3}`, "", 400, codeInvalidJSON, `field "folder_id": expected string, got number`},
		{"fractional integer", "POST", "/api/v1/folders", `{"name":"x","position":1.5}`, "", 400, codeInvalidJSON, `field "position": expected integer, got number 1.5`},
		{"trailing garbage", "POST", "/api/v1/threads", `{"title":"x"} {}`, "", 400, codeInvalidJSON, "after the JSON object"},
		{"trailing word", "POST", "/api/v1/threads", `{"title":"x"}garbage`, "", 400, codeInvalidJSON, "after the JSON object"},
		{"array", "POST", "/api/v1/threads", `[{"title":"x"}]`, "", 400, codeInvalidJSON, "must be a JSON object"},
		{"null", "POST", runs, `null`, "", 400, codeInvalidJSON, "must be a JSON object"},
		{"empty required", "POST", runs, ``, "", 400, codeInvalidJSON, "request body is empty"},
		{"blank required", "PATCH", "/api/v1/threads/" + th.ID, " \n", "", 400, codeInvalidJSON, "request body is empty"},
		{"bad rule", "POST", runs, `{"input":{"text":"text x"},"interrupt_on":{"echo":"yes"}}`, "", 400, core.EINVALID, "interrupt_on rule"},
		{"empty decisions", "POST", runs, `{"input":{"text":"text x"},"interrupt_on":{"echo":{"allowed_decisions":[]}}}`, "", 400, core.EINVALID, "allowed_decisions is empty"},
		{"text/plain", "POST", "/api/v1/threads", `{"title":"x"}`, "text/plain", 415, codeUnsupportedMedia, "application/json"},
		{"form", "POST", "/api/v1/folders", `name=x`, "application/x-www-form-urlencoded", 415, codeUnsupportedMedia, "application/json"},
		{"unknown decision", "POST", "/api/v1/interrupts/int_x/decision", `{"decision":"maybe"}`, "", 400, core.EINVALID, `field "decision" must be one of`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := e.in(t)
			hdr := map[string]string{}
			if tc.ctype != "" {
				hdr["Content-Type"] = tc.ctype
			}
			r := e.wantError(tc.method, tc.path, tc.body, hdr, tc.status, tc.code)
			if !strings.Contains(r.errorMessage(), tc.message) {
				t.Fatalf("message %q does not contain %q", r.errorMessage(), tc.message)
			}
		})
	}

	t.Run("charset is fine", func(t *testing.T) {
		e := e.in(t)
		r := e.raw("POST", "/api/v1/threads", `{"title":"x"}`, map[string]string{"Content-Type": "application/json; charset=utf-8"})
		if r.status != http.StatusCreated {
			t.Fatalf("status %d %s", r.status, r.body)
		}
	})

	t.Run("too large", func(t *testing.T) {
		e := e.in(t)
		before := e.threadCount()
		big := `{"title":"` + strings.Repeat("a", maxBody) + `"}`
		e.wantError("POST", "/api/v1/threads", big, nil, http.StatusRequestEntityTooLarge, codeTooLarge)
		// Without Content-Length the limit is enforced while reading.
		req := e.newRequest(t.Context(), "POST", "/api/v1/threads", "", nil)
		req.Body, req.GetBody, req.ContentLength = io.NopCloser(strings.NewReader(big)), nil, -1
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("chunked: status %d", resp.StatusCode)
		}
		if after := e.threadCount(); after != before {
			t.Fatalf("threads %d -> %d: an oversized request changed state", before, after)
		}
	})
}

// TestBadText: bytes that are not UTF-8, unpaired surrogates and control
// characters in single-line fields are refused with 400 and change
// nothing; a run's input keeps its newlines and tabs.
func TestBadText(t *testing.T) {
	e := newEnv(t, Options{})
	th := e.createThread("text")
	var fld core.Folder
	e.call("POST", "/api/v1/folders", `{"name":"Work"}`, http.StatusCreated, &fld)
	runs := "/api/v1/threads/" + th.ID + "/runs"
	bad, inv := codeInvalidJSON, core.EINVALID
	for _, tc := range []struct{ name, method, path, body, code, message string }{
		{"invalid UTF-8 title", "POST", "/api/v1/threads", "{\"title\":\"bad \xff\"}", bad, "not valid UTF-8 (at byte 14)"},
		{"invalid UTF-8 key", "POST", "/api/v1/threads", "{\"ti\xc3tle\":\"x\"}", bad, "not valid UTF-8"},
		{"lone high surrogate", "POST", "/api/v1/threads", `{"title":"\ud800"}`, bad, "unpaired UTF-16 surrogate \\ud800"},
		{"lone low surrogate", "PATCH", "/api/v1/threads/" + th.ID, `{"title":"a\udc00b"}`, bad, "unpaired UTF-16 surrogate \\udc00"},
		{"reversed pair", "POST", "/api/v1/folders", `{"name":"\udc00\ud800"}`, bad, "unpaired UTF-16 surrogate"},
		{"NUL in a title", "POST", "/api/v1/threads", `{"title":"a\u0000b"}`, inv, "control character U+0000"},
		{"newline in a title", "PATCH", "/api/v1/threads/" + th.ID, `{"title":"two\nlines"}`, inv, "control character U+000A"},
		{"tab in a folder name", "PATCH", "/api/v1/folders/" + fld.ID, `{"name":"a\tb"}`, inv, "control character U+0009"},
		{"escape in a folder name", "POST", "/api/v1/folders", `{"name":"\u001b[31mred"}`, inv, "control character U+001B"},
		{"line separator", "POST", "/api/v1/threads", `{"title":"a\u2028b"}`, inv, "control character U+2028"},
		{"NUL in a run's input", "POST", runs, `{"input":{"text":"text a\u0000b"}}`, inv, "control character U+0000"},
		{"invalid UTF-8 input", "POST", runs, "{\"input\":{\"text\":\"text \xc0\xaf\"}}", bad, "not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := e.in(t)
			before := e.threadCount()
			r := e.wantError(tc.method, tc.path, tc.body, nil, http.StatusBadRequest, tc.code)
			if !strings.Contains(r.errorMessage(), tc.message) {
				t.Fatalf("message %q does not contain %q", r.errorMessage(), tc.message)
			}
			if after := e.threadCount(); after != before {
				t.Fatalf("threads %d -> %d", before, after)
			}
		})
	}
	var got core.Thread
	e.call("GET", "/api/v1/threads/"+th.ID, "", http.StatusOK, &got)
	if got.Title != "text" || got.ActiveRunID != "" {
		t.Fatalf("thread changed: %+v", got)
	}
	var f core.Folder
	e.call("GET", "/api/v1/folders/"+fld.ID, "", http.StatusOK, &f)
	if f.Name != "Work" {
		t.Fatalf("folder changed: %+v", f)
	}
	// Paired surrogates and other characters are fine; input keeps newlines and tabs.
	var ok core.Thread
	e.call("POST", "/api/v1/threads", `{"title":"\ud83d\ude00 caf\u00e9 ✓"}`, http.StatusCreated, &ok)
	if ok.Title != "😀 café ✓" {
		t.Fatalf("title %q", ok.Title)
	}
	run := e.startRun(th.ID, "text line one\n\tline two", nil)
	var msgs struct{ Messages []core.Message }
	e.waitRun(run.ID, core.RunSucceeded, core.RunFailed)
	e.call("GET", "/api/v1/threads/"+th.ID+"/messages", "", http.StatusOK, &msgs)
	if len(msgs.Messages) == 0 || msgs.Messages[0].Text != "text line one\n\tline two" {
		t.Fatalf("input: %+v", msgs.Messages)
	}
	// Query parameters are text too.
	for _, path := range []string{"/api/v1/threads?q=%ff", "/api/v1/threads?q=a%00b", "/api/v1/inbox?queue=unread&cursor=%c0"} {
		e.wantError("GET", path, "", nil, http.StatusBadRequest, core.EINVALID)
	}
}

// threadCount counts the owner's threads.
func (e *env) threadCount() int {
	e.t.Helper()
	var page core.ThreadPage
	e.call("GET", "/api/v1/threads?limit=500", "", http.StatusOK, &page)
	return len(page.Threads)
}

func TestQueryValidation(t *testing.T) {
	e := newEnv(t, Options{})
	th := e.createThread("q")
	for _, path := range []string{
		"/api/v1/threads?limit=0", "/api/v1/threads?limit=501", "/api/v1/threads?limit=ten", "/api/v1/threads?limit=-3",
		"/api/v1/threads?no_folder=maybe", "/api/v1/threads?no_folder=true&folder_id=fld_x", "/api/v1/threads?cursor=%21%21",
		"/api/v1/inbox", "/api/v1/inbox?queue=later", "/api/v1/inbox?queue=unread&limit=1000",
		"/api/v1/events?since=-1", "/api/v1/events?since=x", "/api/v1/threads/" + th.ID + "/events?since=1.5",
	} {
		r := e.raw("GET", path, "", nil)
		if r.status != http.StatusBadRequest || r.errorCode() != core.EINVALID {
			t.Errorf("GET %s: %d %s, want 400 invalid", path, r.status, r.body)
		}
	}
	r := e.wantError("GET", "/api/v1/threads/"+th.ID+"/events", "", map[string]string{"Last-Event-ID": "abc"}, http.StatusBadRequest, core.EINVALID)
	if !strings.Contains(r.errorMessage(), "Last-Event-ID") {
		t.Fatalf("message %q", r.errorMessage())
	}
	var page core.ThreadPage
	e.call("GET", "/api/v1/threads?limit=500&no_folder=false", "", http.StatusOK, &page)
	if len(page.Threads) != 1 {
		t.Fatalf("threads %+v", page)
	}
}

func TestErrorStatusMapping(t *testing.T) {
	for code, status := range map[string]int{
		core.EINVALID: 400, core.ENOTFOUND: 404, core.ECONFLICT: 409, core.EFORBIDDEN: 403,
		core.ELIMIT: 429, core.EUNAVAIL: 503, core.EINTERNAL: 500, codeUnauthorized: 401,
		codeTooLarge: 413, codeInvalidJSON: 400, codeUnsupportedMedia: 415, codeMethodNotAllowed: 405, "bogus": 500,
	} {
		if got := statusOf(code); got != status {
			t.Errorf("statusOf(%q) = %d, want %d", code, got, status)
		}
	}
	for _, tc := range []struct {
		err           error
		code, message string
	}{
		{core.Errorf(core.ECONFLICT, "busy"), core.ECONFLICT, "busy"},
		{core.Errorf(core.EINTERNAL, "disk on fire"), core.EINTERNAL, internalErrorMessage},
		{json.Unmarshal([]byte("x"), new(int)), core.EINTERNAL, internalErrorMessage},
	} {
		if code, msg := classify(tc.err); code != tc.code || msg != tc.message {
			t.Errorf("classify(%v) = %s %q, want %s %q", tc.err, code, msg, tc.code, tc.message)
		}
	}
}

// TestRunsAcrossThreads: GET /runs lists runs newest first across threads,
// filtered by thread and state, in pages; GET /threads/{id}/runs pages too.
func TestRunsAcrossThreads(t *testing.T) {
	e := newEnv(t, Options{})
	a, b := e.createThread("a"), e.createThread("b")
	var ids []string
	for i := range 3 {
		for _, th := range []core.Thread{a, b} {
			r := e.startRun(th.ID, fmt.Sprintf("text done %d", i), nil)
			e.waitRun(r.ID, core.RunSucceeded)
			ids = append(ids, r.ID)
		}
	}
	held := e.startRun(a.ID, "tool append_file {\"path\":\"x\",\"line\":\"y\"}\ntext done", map[string]any{"interrupt_on": map[string]any{"append_file": true}})
	e.waitRun(held.ID, core.RunInterrupted)
	ids = append(ids, held.ID)
	slices.Reverse(ids) // newest first
	list := func(query string) (out []string) {
		t.Helper()
		cursor := ""
		for {
			var page core.RunPage
			e.call("GET", "/api/v1/runs?limit=2"+query+cursor, "", http.StatusOK, &page)
			for _, r := range page.Runs {
				out = append(out, r.ID)
			}
			if page.NextCursor == "" {
				return out
			}
			cursor = "&cursor=" + page.NextCursor
		}
	}
	if got := list(""); !slices.Equal(got, ids) {
		t.Errorf("all runs %v, want %v", got, ids)
	}
	var ofA []string
	for _, id := range ids {
		var r core.Run
		e.call("GET", "/api/v1/runs/"+id, "", http.StatusOK, &r)
		if r.ThreadID == a.ID {
			ofA = append(ofA, id)
		}
	}
	if got := list("&thread_id=" + a.ID); !slices.Equal(got, ofA) {
		t.Errorf("runs of a %v, want %v", got, ofA)
	}
	if got := list("&status=interrupted,running"); !slices.Equal(got, []string{held.ID}) {
		t.Errorf("active runs %v", got)
	}
	if got := list("&status=succeeded&thread_id=" + b.ID); len(got) != 3 {
		t.Errorf("b's succeeded runs %v", got)
	}
	var page core.RunPage
	e.call("GET", "/api/v1/threads/"+a.ID+"/runs?limit=3", "", http.StatusOK, &page)
	if len(page.Runs) != 3 || page.NextCursor == "" || page.Runs[0].ID != ofA[len(ofA)-1] {
		t.Errorf("thread runs, first page: %+v", page)
	}
	e.wantError("GET", "/api/v1/runs?status=sleeping", "", nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("GET", "/api/v1/runs?cursor=nonsense", "", nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("GET", "/api/v1/runs?thread_id=thr_nope", "", nil, http.StatusNotFound, core.ENOTFOUND)
	e.wantError("GET", "/api/v1/runs?limit=0", "", nil, http.StatusBadRequest, core.EINVALID)
}

// TestSearchAPI: q on the thread list and on both queues, with the match.
func TestSearchAPI(t *testing.T) {
	e := newEnv(t, Options{})
	inv := e.createThread("Invoice for March")
	other := e.createThread("Holiday plans")
	r := e.startRun(other.ID, "text The invoice is attached.", nil)
	e.waitRun(r.ID, core.RunSucceeded)
	var page core.ThreadPage
	e.call("GET", "/api/v1/threads?q=INVOIC", "", http.StatusOK, &page)
	if len(page.Threads) != 2 {
		t.Fatalf("search: %+v", page.Threads)
	}
	for _, th := range page.Threads {
		if th.Match == nil || len(th.Match.Snippet) == 0 {
			t.Errorf("%s has no match", th.ID)
			continue
		}
		var marked []string
		for _, p := range th.Match.Snippet {
			if p.Match {
				marked = append(marked, p.Text)
			}
		}
		if th.ID == inv.ID && (th.Match.In != core.SearchInTitle || !slices.Equal(marked, []string{"Invoice"})) {
			t.Errorf("title match %+v", th.Match)
		}
		if th.ID == other.ID && (th.Match.In != core.SearchInMessage || !slices.Equal(marked, []string{"invoice"})) {
			t.Errorf("message match %+v", th.Match)
		}
	}
	var inbox core.InboxPage
	e.call("GET", "/api/v1/inbox?queue=unread&q=attached", "", http.StatusOK, &inbox)
	if len(inbox.Items) != 1 || inbox.Items[0].ThreadID != other.ID || inbox.Items[0].Match == nil || inbox.Counts.Unread != 1 {
		t.Errorf("unread search: %+v", inbox)
	}
	e.call("GET", "/api/v1/inbox?queue=unread&q=%21%21", "", http.StatusOK, &inbox)
	if len(inbox.Items) != 0 {
		t.Errorf("a search without words: %+v", inbox.Items)
	}
}

// TestMarkAllRead: POST /inbox/read empties Unread, a thread.read each.
func TestMarkAllRead(t *testing.T) {
	e := newEnv(t, Options{})
	var threads []core.Thread
	for i := range 3 {
		th := e.createThread(fmt.Sprintf("t%d", i))
		e.waitRun(e.startRun(th.ID, "text done", nil).ID, core.RunSucceeded)
		threads = append(threads, th)
	}
	var page core.InboxPage
	e.call("GET", "/api/v1/inbox?queue=unread", "", http.StatusOK, &page)
	if page.Counts.Unread != 3 {
		t.Fatalf("unread before: %+v", page.Counts)
	}
	var out struct{ Marked int }
	e.call("POST", "/api/v1/inbox/read", "", http.StatusOK, &out)
	if out.Marked != 3 {
		t.Fatalf("marked %d, want 3", out.Marked)
	}
	e.call("GET", "/api/v1/inbox?queue=unread", "", http.StatusOK, &page)
	if page.Counts.Unread != 0 || len(page.Items) != 0 {
		t.Fatalf("unread after: %+v", page)
	}
	for _, th := range threads {
		reads := 0
		for _, ev := range e.storedEvents(th.ID) {
			if ev.Type == core.EventThreadRead {
				reads++
			}
		}
		if reads != 1 {
			t.Errorf("%s: %d thread.read events", th.ID, reads)
		}
	}
	e.call("POST", "/api/v1/inbox/read", "", http.StatusOK, &out)
	if out.Marked != 0 {
		t.Errorf("again: marked %d", out.Marked)
	}
}
