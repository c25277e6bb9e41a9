package web

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
)

// TestApprovalFlow drives a held append_file call through each approval
// decision over HTTP.
func TestApprovalFlow(t *testing.T) {
	e := newEnv(t, Options{})
	for _, tc := range []struct {
		decision  string
		body      string // the decision request, %s is the file name
		wantFile  string // content of the file afterwards; "" = not created
		wantTool  string // substring of the tool result message
		wantError bool   // the tool result is an error
		other     string // a different decision, refused with 409 afterwards
	}{
		{"approve", `{"decision":"approve"}`, "x\n", "appended 1 line", false, `{"decision":"reject"}`},
		{"edit", `{"decision":"edit","args":{"path":"%s","line":"edited"}}`, "edited\n", "appended 1 line", false, `{"decision":"edit","args":{"path":"%s","line":"other"}}`},
		{"reject", `{"decision":"reject","message":"not today"}`, "", "not today", true, `{"decision":"reject","message":"other reason"}`},
		{"respond", `{"decision":"respond","message":"pretend it is written"}`, "", "pretend it is written", false, `{"decision":"approve"}`},
	} {
		t.Run(tc.decision, func(t *testing.T) {
			e := e.in(t)
			file := tc.decision + ".txt"
			th := e.createThread(tc.decision)
			script := `tool append_file {"path":"` + file + `","line":"x"}`
			run := e.startRun(th.ID, script, map[string]any{"interrupt_on": map[string]bool{"append_file": true}})
			e.waitRun(run.ID, core.RunInterrupted)

			item := e.actionItem(run.ID)
			if item.InterruptID == "" || item.Tool != "append_file" || item.ThreadID != th.ID || item.Kind != core.InterruptApproval ||
				!slices.Equal(item.AllowedDecisions, core.AllDecisions) {
				t.Fatalf("action item %+v", item)
			}
			var args map[string]string
			if err := json.Unmarshal(item.Args, &args); err != nil || args["path"] != file || args["line"] != "x" {
				t.Fatalf("action item args %s", item.Args)
			}
			var thread core.Thread
			e.call("GET", "/api/v1/threads/"+th.ID, "", http.StatusOK, &thread)
			if thread.Status != core.ThreadInterrupted || thread.OpenActions != 1 {
				t.Fatalf("interrupted thread %+v", thread)
			}

			decision := strings.ReplaceAll(tc.body, "%s", file)
			var in core.Interrupt
			e.call("POST", "/api/v1/interrupts/"+item.InterruptID+"/decision", decision, http.StatusOK, &in)
			if in.Status != core.InterruptDecided || in.Decision == nil || in.Decision.Decision != tc.decision || in.Decision.By != core.LocalOwner.ID {
				t.Fatalf("decided interrupt %+v", in)
			}
			e.waitRun(run.ID, core.RunSucceeded)

			if got := e.readScratch(file); got != tc.wantFile {
				t.Fatalf("file %s holds %q, want %q", file, got, tc.wantFile)
			}
			result := e.toolResult(th.ID)
			if !strings.Contains(result.Text, tc.wantTool) || result.IsError != tc.wantError {
				t.Fatalf("tool result %+v, want text with %q and is_error %v", result, tc.wantTool, tc.wantError)
			}

			e.call("GET", "/api/v1/threads/"+th.ID, "", http.StatusOK, &thread)
			if !thread.Unread || thread.UnreadRunID != run.ID || thread.OpenActions != 0 || thread.Status != core.ThreadIdle {
				t.Fatalf("finished thread %+v", thread)
			}
			if !e.inUnread(th.ID) {
				t.Fatal("thread is not in the Unread queue")
			}
			if e.actionItemOrNil(run.ID) != nil {
				t.Fatal("the Action item is still there")
			}

			// The same decision again changes nothing; another one conflicts.
			msgs := e.messageCount(th.ID)
			var again core.Interrupt
			e.call("POST", "/api/v1/interrupts/"+item.InterruptID+"/decision", decision, http.StatusOK, &again)
			if again.Status != core.InterruptDecided || again.Decision.Decision != tc.decision {
				t.Fatalf("repeated decision answered %+v", again)
			}
			other := strings.ReplaceAll(tc.other, "%s", file)
			e.wantError("POST", "/api/v1/interrupts/"+item.InterruptID+"/decision", other, nil, http.StatusConflict, core.ECONFLICT)
			if got := e.readScratch(file); got != tc.wantFile {
				t.Fatalf("after repeated decisions the file holds %q, want %q", got, tc.wantFile)
			}
			if n := e.messageCount(th.ID); n != msgs {
				t.Fatalf("messages %d -> %d after repeated decisions", msgs, n)
			}
			var got core.Interrupt
			e.call("GET", "/api/v1/interrupts/"+item.InterruptID, "", http.StatusOK, &got)
			if got.Status != core.InterruptDecided || got.Decision.Decision != tc.decision {
				t.Fatalf("GET interrupt %+v", got)
			}
			var list struct{ Interrupts []core.Interrupt }
			e.call("GET", "/api/v1/runs/"+run.ID+"/interrupts", "", http.StatusOK, &list)
			if len(list.Interrupts) != 1 || list.Interrupts[0].ID != item.InterruptID {
				t.Fatalf("run interrupts %+v", list)
			}
		})
	}
}

// TestDecisionErrors covers decisions the interrupt does not accept.
func TestDecisionErrors(t *testing.T) {
	e := newEnv(t, Options{})
	th := e.createThread("errors")
	run := e.startRun(th.ID, `tool append_file {"path":"e.txt","line":"x"}`, map[string]any{
		"interrupt_on": map[string]any{"append_file": map[string]any{"allowed_decisions": []string{"approve", "reject"}}},
	})
	e.waitRun(run.ID, core.RunInterrupted)
	item := e.actionItem(run.ID)
	if !slices.Equal(item.AllowedDecisions, []string{"approve", "reject"}) {
		t.Fatalf("allowed decisions %v", item.AllowedDecisions)
	}
	path := "/api/v1/interrupts/" + item.InterruptID + "/decision"
	e.wantError("POST", path, `{"decision":"edit","args":{"path":"e.txt","line":"y"}}`, nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("POST", path, `{"decision":"retry"}`, nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("POST", path, `{"decision":"approve","args":{"a":1}}`, nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("POST", path, `{"decision":"approve","by":"mallory"}`, nil, http.StatusBadRequest, codeInvalidJSON)
	e.wantError("POST", path, ``, nil, http.StatusBadRequest, codeInvalidJSON)
	if e.actionItemOrNil(run.ID) == nil {
		t.Fatal("a refused decision resolved the interrupt")
	}

	// Cancelling the run cancels its interrupt: deciding it then conflicts.
	e.call("POST", "/api/v1/runs/"+run.ID+"/cancel", "", http.StatusAccepted, nil)
	e.waitRun(run.ID, core.RunCancelled)
	e.wantError("POST", path, `{"decision":"approve"}`, nil, http.StatusConflict, core.ECONFLICT)
	if e.actionItemOrNil(run.ID) != nil {
		t.Fatal("the Action item of a cancelled run is still there")
	}
	if got := e.readScratch("e.txt"); got != "" {
		t.Fatalf("cancelled call wrote %q", got)
	}
}

// TestEditValidatedAgainstSchema: edited arguments that break the tool's
// JSON Schema are refused with 400 and the interrupt stays open, so the
// typo can be corrected; a corrected edit then runs.
func TestEditValidatedAgainstSchema(t *testing.T) {
	e := newEnv(t, Options{})
	th := e.createThread("edit")
	run := e.startRun(th.ID, "tool append_file {\"path\":\"e.txt\",\"line\":\"x\"}\ntext done",
		map[string]any{"interrupt_on": map[string]any{"append_file": true}})
	e.waitRun(run.ID, core.RunInterrupted)
	item := e.actionItem(run.ID)
	path := "/api/v1/interrupts/" + item.InterruptID + "/decision"
	for _, tc := range []struct{ args, why string }{
		{`{"path":"e.txt","line":"y","lines":2}`, "additional properties 'lines' not allowed"},
		{`{"path":"e.txt","line":7}`, "at '/line'"},
		{`{"path":"e.txt"}`, "missing property 'line'"},
	} {
		r := e.wantError("POST", path, `{"decision":"edit","args":`+tc.args+`}`, nil, http.StatusBadRequest, core.EINVALID)
		if msg := r.errorMessage(); !strings.Contains(msg, "append_file") || !strings.Contains(msg, tc.why) {
			t.Errorf("edit %s: message %q, want it to name the tool and say %q", tc.args, msg, tc.why)
		}
		if e.actionItemOrNil(run.ID) == nil {
			t.Fatalf("edit %s: a refused edit closed the interrupt", tc.args)
		}
	}
	var in core.Interrupt
	e.call("POST", path, `{"decision":"edit","args":{"path":"e.txt","line":"fixed"}}`, http.StatusOK, &in)
	if in.Status != core.InterruptDecided || in.Decision.Decision != core.DecisionEdit {
		t.Fatalf("corrected edit: %+v", in)
	}
	e.waitRun(run.ID, core.RunSucceeded)
	if got := e.readScratch("e.txt"); got != "fixed\n" {
		t.Fatalf("e.txt = %q", got)
	}
}

// actionItem returns the Action queue item of run, failing if there is none.
func (e *env) actionItem(runID string) *core.InboxItem {
	e.t.Helper()
	item := e.actionItemOrNil(runID)
	if item == nil {
		e.t.Fatalf("no Action item for run %s", runID)
	}
	return item
}

// actionItemOrNil returns the Action queue item of run, or nil.
func (e *env) actionItemOrNil(runID string) *core.InboxItem {
	e.t.Helper()
	var page core.InboxPage
	e.call("GET", "/api/v1/inbox?queue=action&limit=500", "", http.StatusOK, &page)
	if page.Queue != core.QueueAction || page.Counts.Action != len(page.Items) {
		e.t.Fatalf("action page %+v", page)
	}
	for _, it := range page.Items {
		if it.RunID == runID {
			return it
		}
	}
	return nil
}

// inUnread reports whether thread is in the Unread queue.
func (e *env) inUnread(threadID string) bool {
	e.t.Helper()
	var page core.InboxPage
	e.call("GET", "/api/v1/inbox?queue=unread&limit=500", "", http.StatusOK, &page)
	return slices.ContainsFunc(page.Items, func(it *core.InboxItem) bool { return it.ThreadID == threadID })
}

// toolResult returns the thread's only tool message.
func (e *env) toolResult(threadID string) core.Message {
	e.t.Helper()
	var msgs struct{ Messages []core.Message }
	e.call("GET", "/api/v1/threads/"+threadID+"/messages", "", http.StatusOK, &msgs)
	var tools []core.Message
	for _, m := range msgs.Messages {
		if m.Role == core.RoleTool {
			tools = append(tools, m)
		}
	}
	if len(tools) != 1 {
		e.t.Fatalf("%d tool messages: %+v", len(tools), msgs.Messages)
	}
	return tools[0]
}

// messageCount counts the thread's messages.
func (e *env) messageCount(threadID string) int {
	e.t.Helper()
	var msgs struct{ Messages []core.Message }
	e.call("GET", "/api/v1/threads/"+threadID+"/messages", "", http.StatusOK, &msgs)
	return len(msgs.Messages)
}

// readScratch returns a scratch file's content, "" if it does not exist.
func (e *env) readScratch(name string) string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.scratch, name))
	if errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}
