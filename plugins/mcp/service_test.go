package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/sqlite"
	"github.com/kilnhq/kiln/plugins/builtin"
	"github.com/kilnhq/kiln/plugins/mcp/mcpservers"
)

// newService is a started core.Service on SQLite whose model "scripted"
// plays the run's input as a script (builtin.Scripted).
func newService(t testing.TB) *core.Service {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "kiln.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	svc, err := core.New(core.Config{Store: store, DefaultModel: "scripted", ShutdownGrace: 50 * time.Millisecond, Models: func(ref string) (core.Model, error) {
		if ref != "scripted" {
			return nil, errors.New("no such model")
		}
		return builtin.Scripted{}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Shutdown(context.Background()) })
	return svc
}

// run starts a run of script on a new thread and waits until it is in
// one of the states want.
func run(t testing.TB, svc *core.Service, script string, want ...core.RunStatus) (*core.Thread, *core.Run) {
	t.Helper()
	ctx := context.Background()
	th, err := svc.CreateThread(ctx, core.LocalOwner, core.ThreadInput{Title: "mcp"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := svc.StartRun(ctx, core.LocalOwner, th.ID, core.RunRequest{Input: core.RunInput{Text: script}})
	if err != nil {
		t.Fatal(err)
	}
	return th, waitRun(t, svc, r.ID, want...)
}

// waitRun waits up to 30 s until the run is in one of the states want.
func waitRun(t testing.TB, svc *core.Service, id string, want ...core.RunStatus) *core.Run {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := svc.GetRun(context.Background(), core.LocalOwner, id)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(want, r.Status) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s (error %q), want %v", id, r.Status, r.Error, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCoreService registers a real server's tools with a core.Service:
// they are listed as mcp.<server>.<tool>, and withdrawn on Disable.
func TestCoreService(t *testing.T) {
	nodePath, script := node(t), npmServer(t, "server-filesystem")
	svc := newService(t)
	m := start(t, svc, Config{Servers: []ServerConfig{{Server: mcpservers.Server{
		Name: "my_files", Command: nodePath, Args: []string{script, t.TempDir()},
	}}}})
	st := waitState(t, m, "my_files", StateConnected)
	names := func() []string {
		var out []string
		for _, sp := range svc.ToolSpecs() {
			out = append(out, sp.Name)
		}
		return out
	}
	if got := names(); !slices.Contains(got, "mcp.my-files.read_text_file") || len(got) != len(st.Tools) {
		t.Errorf("service tools %v, status tools %v", got, st.Tools)
	}
	if err := m.Disable("my_files"); err != nil {
		t.Fatal(err)
	}
	waitState(t, m, "my_files", StateDisabled)
	if got := names(); len(got) != 0 {
		t.Errorf("tools after Disable: %v", got)
	}
}

// TestRunsNeverStuck: a run whose MCP call is answered with a malformed
// message, or not at all, ends with the tool's error in the thread; a
// cancelled run cancels its call on the server.
func TestRunsNeverStuck(t *testing.T) {
	svc := newService(t)
	tee := teeHost{newHost(), svc}
	m := start(t, tee, Config{Servers: []ServerConfig{misbehaving(t, 1000)}, PingInterval: time.Hour})
	waitState(t, m, "bad", StateConnected)
	toolMessage := func(th *core.Thread) *core.Message {
		msgs, err := svc.Messages(context.Background(), core.LocalOwner, th.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, msg := range msgs {
			if msg.Role == core.RoleTool {
				return msg
			}
		}
		t.Fatal("no tool message")
		return nil
	}

	th, _ := run(t, svc, "tool mcp.bad.reply {\"line\":\"{oops\"}\ntext done", core.RunSucceeded)
	if msg := toolMessage(th); !msg.IsError || !strings.Contains(msg.Text, "not JSON-RPC 2.0") {
		t.Errorf("tool message %+v", msg)
	}
	waitState(t, m, "bad", StateError)
	waitState(t, m, "bad", StateConnected) // after the default backoff

	th, _ = run(t, svc, "tool mcp.bad.slow {\"ms\":60000}\ntext done", core.RunSucceeded)
	if msg := toolMessage(th); !msg.IsError || !strings.Contains(msg.Text, "within 1s") {
		t.Errorf("tool message %+v", msg)
	}

	ctx := context.Background()
	th, err := svc.CreateThread(ctx, core.LocalOwner, core.ThreadInput{Title: "cancel"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := svc.StartRun(ctx, core.LocalOwner, th.ID, core.RunRequest{Input: core.RunInput{Text: "tool mcp.bad.slow {\"ms\":60000}\ntext done"}})
	if err != nil {
		t.Fatal(err)
	}
	before := call(t, tee.tool(t, "mcp.bad", "cancelled"), `{}`).Text()
	time.Sleep(300 * time.Millisecond) // the call is in flight
	if _, err := svc.CancelRun(ctx, core.LocalOwner, r.ID); err != nil {
		t.Fatal(err)
	}
	waitRun(t, svc, r.ID, core.RunCancelled)
	waitCancelled(t, tee.tool(t, "mcp.bad", "cancelled"), before)
}

// teeHost registers tools with a core.Service and records them, so a
// test can also call them directly.
type teeHost struct {
	*fakeHost
	svc *core.Service
}

func (h teeHost) AddTools(source string, tools []core.Tool, defaults core.Policy) error {
	if err := h.svc.AddTools(source, tools, defaults); err != nil {
		return err
	}
	return h.fakeHost.AddTools(source, tools, defaults)
}

func (h teeHost) RemoveTools(source string) error {
	_ = h.fakeHost.RemoveTools(source)
	return h.svc.RemoveTools(source)
}

// TestProgressEvents: a server's progress notifications for a call
// become the run's tool.progress events, in order, with progress, total
// and message; one for a token of no call is dropped.
func TestProgressEvents(t *testing.T) {
	svc := newService(t)
	m := start(t, svc, Config{Servers: []ServerConfig{everything(t), misbehaving(t, 0)}})
	waitState(t, m, "everything", StateConnected)
	waitState(t, m, "bad", StateConnected)
	ctx := context.Background()
	th, err := svc.CreateThread(ctx, core.LocalOwner, core.ThreadInput{Title: "progress"})
	if err != nil {
		t.Fatal(err)
	}
	sub := svc.Subscribe(core.LocalOwner, th.ID)
	defer sub.Close()
	script := "tool mcp.everything.trigger-long-running-operation {\"duration\":1,\"steps\":3}\ntool mcp.bad.progress {\"steps\":4}\ntext done"
	r, err := svc.StartRun(ctx, core.LocalOwner, th.ID, core.RunRequest{Input: core.RunInput{Text: script}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	timeout := time.After(30 * time.Second)
	for done := false; !done; {
		select {
		case ev := <-sub.C:
			if ev.Type == core.EventToolProgress {
				if ev.RunID != r.ID || ev.ThreadID != th.ID {
					t.Errorf("event %+v", ev)
				}
				var p struct {
					Tool     string          `json:"tool"`
					Progress json.RawMessage `json:"progress"`
				}
				if err := json.Unmarshal(ev.Payload, &p); err != nil {
					t.Fatal(err)
				}
				got = append(got, p.Tool+" "+string(p.Progress))
			}
			done = ev.Type == core.EventRunFinished
		case <-timeout:
			t.Fatalf("the run did not finish; progress so far %q", got)
		}
	}
	want := []string{
		`mcp.everything.trigger-long-running-operation {"progress":1,"total":3}`,
		`mcp.everything.trigger-long-running-operation {"progress":2,"total":3}`,
		`mcp.everything.trigger-long-running-operation {"progress":3,"total":3}`,
		`mcp.bad.progress {"progress":1,"total":4,"message":"step 1 of 4"}`,
		`mcp.bad.progress {"progress":2,"total":4,"message":"step 2 of 4"}`,
		`mcp.bad.progress {"progress":3,"total":4,"message":"step 3 of 4"}`,
		`mcp.bad.progress {"progress":4,"total":4,"message":"step 4 of 4"}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("progress events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	waitRun(t, svc, r.ID, core.RunSucceeded)
}
