package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/postgres/pgtest"
	"github.com/kilnhq/kiln/sdk/client"
)

// TestReplicasEndToEnd runs two kiln serve processes, A and B, on one
// PostgreSQL database, each with a data root of its own and a grant to
// one shared folder. Runs started through A are driven by A; a client of
// B follows one of them live. A is killed with SIGKILL in the middle:
// B takes its runs over once their leases lapse (a call the kill cut off
// waits for a decision, as after any crash), every run finishes with
// every file written, and B's stream holds every event of the thread
// once, in order, those A committed included; a client that followed it
// through A resumes on B with its last event and misses nothing.
func TestReplicasEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	const runs, rounds = 10, 6
	env := "KILN_DATABASE=" + pgtest.DSN(t)
	a := startProc(t, procAddr(t), t.TempDir(), env)
	b := startProc(t, procAddr(t), t.TempDir(), env)
	ca, cb := a.client(), b.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	out := t.TempDir()
	if _, err := ca.AddGrant(ctx, core.GrantInput{Path: out, Name: "out", Writable: true}); err != nil {
		t.Fatal(err)
	}
	runIDs := make([]string, runs)
	var watched string
	var stream, onA *eventLog
	for i := range runs {
		th, err := ca.CreateThread(ctx, core.ThreadInput{Title: fmt.Sprintf("replicas %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			watched, stream = th.ID, followEvents(ctx, cb, client.StreamOptions{ThreadID: th.ID})
			onA = followEvents(ctx, ca, client.StreamOptions{ThreadID: th.ID})
		}
		var script strings.Builder
		for k := range rounds {
			fmt.Fprintf(&script, "tool write_file %s\ntool sleep {\"ms\": 250}\n", jsonArgs(map[string]any{"path": fmt.Sprintf("/grants/out/run-%d-%d.txt", i, k), "content": fmt.Sprint(i, "-", k)}))
		}
		fmt.Fprintf(&script, "text done %d", i)
		r, err := ca.StartRun(ctx, th.ID, core.RunRequest{Input: core.RunInput{Text: script.String()}, Model: "scripted",
			InterruptOn: core.Policy{"write_file": {Interrupt: false}}})
		if err != nil {
			t.Fatal(err)
		}
		runIDs[i] = r.ID
	}
	// B's client sees A's steps as they commit.
	for deadline := time.Now().Add(30 * time.Second); ; {
		if n := countMessages(stream.snapshot()); n >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B's stream got no step of the run A drives:\n%s", b.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.kill()
	killed := time.Now()
	before := len(stream.snapshot())

	var resumed time.Duration
	recoveries := 0
	for deadline := time.Now().Add(60 * time.Second); ; {
		if resumed == 0 && len(stream.snapshot()) > before {
			resumed = time.Since(killed)
		}
		// A write_file cut off by the kill waits for a decision, as after
		// any crash: writing the file again is safe.
		page, err := cb.Inbox(ctx, client.InboxOptions{Queue: core.QueueAction})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			if it.Kind != core.InterruptRecovery || it.Tool != "write_file" {
				t.Fatalf("unexpected action item %+v", it)
			}
			if _, err := cb.Decide(ctx, it.InterruptID, core.Decision{Decision: core.DecisionRetry}); err != nil {
				t.Fatal(err)
			}
			recoveries++
		}
		done := 0
		var left []string
		for _, id := range runIDs {
			r, err := cb.GetRun(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status.Terminal() {
				if r.Status != core.RunSucceeded {
					t.Fatalf("run %s %s: %s", id, r.Status, r.Error)
				}
				done++
			} else {
				left = append(left, fmt.Sprintf("%s (%s, step %d)", id, r.Status, r.Steps))
			}
		}
		if done == runs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs finished after A was killed; left: %v\n%s", done, runs, left, b.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("B's stream moved again %s after A was killed; all runs finished %s after (%d calls cut off by the kill retried)",
		resumed.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond), recoveries)
	if !strings.Contains(b.logs.String(), "taking over runs whose lease lapsed") || !strings.Contains(b.logs.String(), "replica=") {
		t.Errorf("B's log does not say it took runs over, naming itself:\n%s", b.logs.String())
	}
	// B's metrics count the runs it took over and the events of A's that
	// reached it.
	resp, err := http.Get("http://" + b.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, re := range []string{`kiln_run_leases_total\{event="taken_over"\} [1-9]`, `kiln_run_leases_held \d`, `kiln_event_notify_lag_seconds_count [1-9]`, `kiln_replica_info\{replica="[^"]+"\} 1`} {
		if !regexp.MustCompile(re).Match(metrics) {
			t.Errorf("B's metrics have no %s", re)
		}
	}
	for i := range runs {
		for k := range rounds {
			got, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("run-%d-%d.txt", i, k)))
			if want := fmt.Sprint(i, "-", k); err != nil || string(got) != want {
				t.Errorf("run %d round %d wrote %q (%v), want %q", i, k, got, err, want)
			}
		}
	}
	// The stream that followed the thread on B, across A's death, has
	// each of its events once, in order, as the log does.
	var log []core.Event
	for deadline := time.Now().Add(10 * time.Second); ; {
		fresh := followEvents(ctx, cb, client.StreamOptions{ThreadID: watched})
		time.Sleep(200 * time.Millisecond)
		log = fresh.snapshot()
		got := stream.snapshot()
		if len(log) > 0 && log[len(log)-1].Type == core.EventRunFinished && len(got) == len(log) || time.Now().After(deadline) {
			break
		}
	}
	got := stream.snapshot()
	if len(got) != len(log) {
		t.Fatalf("B's stream got %d events of the thread, the log has %d", len(got), len(log))
	}
	for i := range got {
		if got[i].Seq != log[i].Seq || got[i].Type != log[i].Type {
			t.Fatalf("event %d: the stream has %d %s, the log %d %s", i, got[i].Seq, got[i].Type, log[i].Seq, log[i].Type)
		}
	}
	// A client of A resumes on B with the last event A gave it
	// (Last-Event-ID): together the two streams are the log, each event
	// once, in order.
	fromA := onA.snapshot()
	if len(fromA) == 0 {
		t.Fatal("A's stream gave nothing before A was killed")
	}
	rest := followEvents(ctx, cb, client.StreamOptions{ThreadID: watched, Since: fromA[len(fromA)-1].Seq})
	waitFor(t, "the stream resumed on B to reach the run's end", func() bool {
		evs := rest.snapshot()
		return len(evs) > 0 && evs[len(evs)-1].Type == core.EventRunFinished
	})
	joined := append(fromA, rest.snapshot()...)
	if len(joined) != len(log) {
		t.Fatalf("A's stream (%d events) and its resumption on B (%d) make %d events, the log has %d", len(fromA), len(joined)-len(fromA), len(joined), len(log))
	}
	for i := range joined {
		if joined[i].Seq != log[i].Seq {
			t.Fatalf("event %d: A's stream and its resumption on B have %d, the log %d", i, joined[i].Seq, log[i].Seq)
		}
	}
}

// countMessages counts the message events among evs.
func countMessages(evs []core.Event) int {
	n := 0
	for _, e := range evs {
		if e.Type == core.EventMessage {
			n++
		}
	}
	return n
}
