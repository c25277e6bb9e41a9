package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/postgres/pgtest"
	"github.com/kilnhq/kiln/sdk/client"
)

// The chaos test's shape. A run needs about chaosRounds × (chaosSleepMS +
// 3 × chaosToolDelay) of the server's time, and cannot end before its gate
// is approved, which happens after the last kill.
const (
	chaosRuns      = 50
	chaosKills     = 20
	chaosRounds    = 30
	chaosSleepMS   = 200
	chaosToolDelay = 20 * time.Millisecond
	// chaosMaxWait is the longest the test lets a started server work
	// before it kills it again.
	chaosMaxWait = 300 * time.Millisecond
)

// chaosSeed returns the seed of the scripts' sleeps and of the kill
// schedule: KILN_CHAOS_SEED to replay a failure, else a fresh one.
func chaosSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("KILN_CHAOS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("KILN_CHAOS_SEED=%q: %v", s, err)
		}
		return seed
	}
	return rand.Uint64()
}

// chaosScript is run i's script: rounds rounds of one write by each
// side-effecting tool, keyed "i-k" in round k: a line appended to the
// run's file in the scratch folder (append_file: not idempotent, a
// second call appends twice), a file of its own in the writable grant
// "out" (write_file: not idempotent by its spec, idempotent by its path)
// and a virtual file (write_file: it commits with the step, so a crash
// makes the engine run it again), then a sleep of a length drawn from rng
// (around chaosSleepMS, so that the runs, which all resume at once after a
// restart, do not step in lockstep). Odd rounds make the three calls in
// one parallel turn. The run ends with the gate, an echo held for
// approval.
func chaosScript(i, rounds int, rng *rand.Rand) string {
	var b strings.Builder
	for k := range rounds {
		key := fmt.Sprintf("%d-%d", i, k)
		calls := []string{
			"tool append_file " + jsonArgs(map[string]any{"path": chaosLogPath(i), "line": key}),
			"tool write_file " + jsonArgs(map[string]any{"path": fmt.Sprintf("/grants/out/run-%d/%d.txt", i, k), "content": key}),
			"tool write_file " + jsonArgs(map[string]any{"path": fmt.Sprintf("/notes/%d.txt", k), "content": key}),
		}
		if k%2 == 1 {
			calls = append(append([]string{"parallel"}, calls...), "end")
		}
		b.WriteString(strings.Join(calls, "\n") + "\n")
		fmt.Fprintf(&b, "tool sleep {\"ms\": %d}\n", chaosSleepMS/2+rng.IntN(chaosSleepMS))
	}
	fmt.Fprintf(&b, "tool echo {\"gate\": %d}\ntext done %d", i, i)
	return b.String()
}

// startChaosRun starts run i of chaosScript (of rounds rounds) on a new
// thread through c, with its gate held for approval, and returns the
// thread's and the run's IDs.
func startChaosRun(ctx context.Context, t *testing.T, c *client.Client, i, rounds int, rng *rand.Rand) (thread, run string) {
	t.Helper()
	th, err := c.CreateThread(ctx, core.ThreadInput{Title: fmt.Sprintf("chaos %d", i)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.StartRun(ctx, th.ID, core.RunRequest{
		Input: core.RunInput{Text: chaosScript(i, rounds, rng)}, Model: "scripted",
		InterruptOn: core.Policy{"append_file": {Interrupt: false}, "write_file": {Interrupt: false}, "echo": {Interrupt: true}},
		Limits:      core.Limits{MaxSteps: 1000, MaxToolCalls: 1000},
	})
	if err != nil {
		t.Fatal(err)
	}
	return th.ID, r.ID
}

// chaosLogPath is run i's append_file path, relative to the scratch folder.
func chaosLogPath(i int) string { return fmt.Sprintf("chaos/run-%d.txt", i) }

// carefulUser decides the Action queue as a careful user would: a
// recovery interrupt (a call cut off by a crash) is skipped when the
// call's effect is there and retried when it is not; the gates are
// approved once open is set.
type carefulUser struct {
	// scratch are the servers' scratch folders (one per data root),
	// out the writable grant.
	scratch []string
	out     string
	open    bool
	// decided holds the decision given to each interrupt, by ID.
	decided map[string]string
}

// decide decides every item of the Action queue it may decide.
func (u *carefulUser) decide(ctx context.Context, t *testing.T, c *client.Client) {
	t.Helper()
	page, err := c.Inbox(ctx, client.InboxOptions{Queue: core.QueueAction, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range page.Items {
		if _, ok := u.decided[it.InterruptID]; ok {
			t.Fatalf("interrupt %s is still in Action after its decision", it.InterruptID)
		}
		var d string
		switch {
		case it.Kind == core.InterruptApproval && it.Tool == "echo":
			if !u.open {
				continue
			}
			d = core.DecisionApprove
		case it.Kind == core.InterruptRecovery:
			d = core.DecisionRetry
			if u.tookEffect(t, it) {
				d = core.DecisionSkip
			}
		default:
			t.Fatalf("unexpected action item %+v", it)
		}
		if _, err := c.Decide(ctx, it.InterruptID, core.Decision{Decision: d}); err != nil {
			t.Fatal(err)
		}
		u.decided[it.InterruptID] = d
	}
}

// tookEffect reports whether the call an Action item holds left its
// effect: its line in its file, or its file with its content.
func (u *carefulUser) tookEffect(t *testing.T, it *core.InboxItem) bool {
	t.Helper()
	var a struct{ Path, Line, Content string }
	if err := json.Unmarshal(it.Args, &a); err != nil {
		t.Fatal(err)
	}
	switch kind, rel := chaosKind(core.ToolCall{Name: it.Tool, Args: it.Args}); kind {
	case "append":
		for _, dir := range u.scratch {
			content, _ := os.ReadFile(filepath.Join(dir, a.Path))
			if slices.Contains(strings.Split(string(content), "\n"), a.Line) {
				return true
			}
		}
		return false
	case "grant":
		content, err := os.ReadFile(filepath.Join(u.out, rel))
		return err == nil && string(content) == a.Content
	}
	t.Fatalf("recovery of a call that cannot have been cut off: %s %s (run %s: %s)", it.Tool, it.Args, it.RunID, it.Reason)
	return false
}

// TestChaosEndToEnd kills kiln serve with SIGKILL chaosKills times at
// random moments while 50 runs commit steps with side-effecting tools,
// restarting it each time and deciding the Action queue as a careful user
// in between; after the last restart it drives every run to its end and
// checks that every run succeeded, that every tool call took effect
// exactly once, and that the event log, read through SSE, holds each
// event once, without gaps, as a stream that followed it across the
// restarts received it. KILN_CHAOS_SEED=<seed> replays the scripts and the kill schedule (not
// the timing of the server's steps).
//
// It runs on each Store: SQLite in the data root, and PostgreSQL.
func TestChaosEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	t.Run("sqlite", func(t *testing.T) { chaos(t) })
	t.Run("postgres", func(t *testing.T) { chaos(t, "KILN_DATABASE="+pgtest.DSN(t)) })
}

func chaos(t *testing.T, env ...string) {
	seed := chaosSeed(t)
	t.Logf("seed %d (replay the kill schedule with KILN_CHAOS_SEED=%[1]d)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	addr, data, out := procAddr(t), t.TempDir(), t.TempDir()
	env = append(env, fmt.Sprintf("KILN_TEST_TOOL_DELAY=append_file=%s,write_file=%[1]s", chaosToolDelay))
	srv := startProc(t, addr, data, env...)
	c := srv.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	global := followEvents(ctx, c, client.StreamOptions{})
	if _, err := c.AddGrant(ctx, core.GrantInput{Path: out, Name: "out", Writable: true}); err != nil {
		t.Fatal(err)
	}
	threads := make([]string, chaosRuns)
	runs := make([]string, chaosRuns)
	for i := range chaosRuns {
		threads[i], runs[i] = startChaosRun(ctx, t, c, i, chaosRounds, rng)
	}

	user := &carefulUser{scratch: []string{filepath.Join(data, "scratch")}, out: out, decided: map[string]string{}}
	start := time.Now()
	kills := make([]time.Time, chaosKills)
	waits := make([]time.Duration, chaosKills)
	for k := range chaosKills {
		user.decide(ctx, t, c)
		waits[k] = time.Duration(rng.Int64N(int64(chaosMaxWait)))
		time.Sleep(waits[k])
		kills[k] = time.Now()
		srv.kill()
		srv = startProc(t, addr, data, env...)
	}
	t.Logf("%d kills in %s, %v after the decisions", chaosKills, time.Since(start).Round(time.Millisecond), waits)

	user.open = true
	for {
		user.decide(ctx, t, c)
		finished := succeeded(ctx, t, c, runs)
		if finished == chaosRuns {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d runs finished\n%s", finished, chaosRuns, srv.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	retries := 0
	for _, d := range user.decided {
		if d == core.DecisionRetry {
			retries++
		}
	}
	t.Logf("all runs succeeded %s after the start; %d recovery interrupts decided (%d retried)",
		time.Since(start).Round(time.Millisecond), len(user.decided)-chaosRuns, retries)
	if len(user.decided) == chaosRuns {
		t.Error("no call was cut off by a kill: the kills missed the tool calls")
	}

	logs := make([][]core.Event, chaosRuns)
	leftovers := 0
	for i := range chaosRuns {
		logs[i] = threadLog(ctx, t, c, threads[i], runs[i])
		leftovers += checkChaosRun(ctx, t, c, i, chaosRounds, threads[i], runs[i], logs[i], user.scratch, out, user.decided)
	}
	checkChaosLog(ctx, t, logs, global)
	if leftovers > 0 {
		t.Logf("%d temporary files of write_file calls cut off by a kill are left in the grant", leftovers)
	}
	logKills(t, kills, logs)
	t.Logf("checked %s after the start", time.Since(start).Round(time.Millisecond))
}

// logKills logs, for each kill, how many events the runs committed in the
// 20 ms before it and how many runs were already waiting at their gate.
func logKills(t *testing.T, kills []time.Time, logs [][]core.Event) {
	t.Helper()
	busy := make([]int, len(kills))
	gated := make([]int, len(kills))
	for _, evs := range logs {
		for _, e := range evs {
			for k, at := range kills {
				if e.Time.After(at.Add(-20*time.Millisecond)) && !e.Time.After(at) {
					busy[k]++
				}
				if e.Type == core.EventInterruptCreated && strings.Contains(string(e.Payload), `"kind":"approval"`) && e.Time.Before(at) {
					gated[k]++
				}
			}
		}
	}
	t.Logf("events committed in the 20 ms before each kill: %v; runs waiting at their gate: %v", busy, gated)
}

// threadLog replays a thread's whole event log through its SSE stream, up
// to the end of run.
func threadLog(ctx context.Context, t *testing.T, c *client.Client, threadID, runID string) []core.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	col := followEvents(ctx, c, client.StreamOptions{ThreadID: threadID})
	for {
		evs := col.snapshot()
		if n := len(evs); n > 0 && evs[n-1].Type == core.EventRunFinished && evs[n-1].RunID == runID {
			return evs
		}
		if ctx.Err() != nil {
			t.Fatalf("thread %s: the replay ended after %d events, without the end of run %s", threadID, len(evs), runID)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkChaosRun checks run i (of rounds rounds) after the chaos: each of
// its tool calls was answered once and took effect once (its append_file
// lines in the scratch folders of the servers that ran them), and its
// events are each there once.
//
// It returns how many temporary files of write_file calls cut off by a
// kill are left in the grant.
func checkChaosRun(ctx context.Context, t *testing.T, c *client.Client, i, rounds int, threadID, runID string, evs []core.Event, scratch []string, out string, decided map[string]string) (leftovers int) {
	t.Helper()
	msgs, err := c.Messages(ctx, threadID)
	if err != nil {
		t.Fatal(err)
	}
	// Every call has exactly one result, and its effect is there once.
	calls := map[string]core.ToolCall{}
	results := map[string]int{}
	resultIndex := map[string]int{}
	for j, m := range msgs {
		if m.Index != j {
			t.Fatalf("run %d: message %d has index %d", i, j, m.Index)
		}
		for _, tc := range m.ToolCalls {
			if _, dup := calls[tc.ID]; dup {
				t.Errorf("run %d: tool call %s asked for twice", i, tc.ID)
			}
			calls[tc.ID] = tc
		}
		if m.Role == core.RoleTool {
			results[m.ToolCallID]++
			resultIndex[m.ToolCallID] = m.Index
		}
	}
	if want := 4*rounds + 1; len(calls) != want {
		t.Errorf("run %d: %d tool calls, want %d", i, len(calls), want)
	}
	var lines []string
	wantLocal := map[string]string{}
	for id, tc := range calls {
		if results[id] != 1 {
			t.Errorf("run %d: tool call %s (%s) has %d results", i, id, tc.Name, results[id])
		}
		var a struct{ Path, Line, Content string }
		json.Unmarshal(tc.Args, &a)
		switch kind, rel := chaosKind(tc); kind {
		case "append":
			lines = append(lines, a.Line)
		case "grant":
			if b, err := os.ReadFile(filepath.Join(out, rel)); err != nil || string(b) != a.Content {
				t.Errorf("run %d: call %s wrote %q to %s (%v), want %q", i, id, b, rel, err, a.Content)
			}
		case "local":
			wantLocal[a.Path] = a.Content + "@" + strconv.Itoa(resultIndex[id]+1)
		}
	}
	if len(results) != len(calls) {
		t.Errorf("run %d: %d tool results for %d calls", i, len(results), len(calls))
	}
	// The lines, in whichever servers' scratch folders the run's calls
	// ran, are each there once.
	var appended []string
	for _, dir := range scratch {
		b, err := os.ReadFile(filepath.Join(dir, chaosLogPath(i)))
		if err == nil {
			appended = append(appended, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")...)
		}
	}
	slices.Sort(appended)
	if want := slices.Sorted(slices.Values(lines)); !slices.Equal(appended, want) {
		t.Errorf("run %d: %s holds the lines %q, want %q once each", i, chaosLogPath(i), appended, want)
	}
	entries, err := os.ReadDir(filepath.Join(out, fmt.Sprintf("run-%d", i)))
	if err != nil {
		t.Fatal(err)
	}
	var written []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".kiln-write-") {
			leftovers++
		} else {
			written = append(written, e.Name())
		}
	}
	if len(written) != rounds {
		t.Errorf("run %d: files %v in the grant, want %d", i, written, rounds)
	}
	// A virtual file's version commits with its call's result (its seq is
	// the number of messages then), once.
	files, err := c.ThreadFiles(ctx, threadID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range files {
		b, err := c.ThreadFile(ctx, threadID, f.Path)
		if err != nil {
			t.Fatal(err)
		}
		got[f.Path] = string(b) + "@" + strconv.Itoa(f.Seq)
	}
	if !maps.Equal(got, wantLocal) {
		t.Errorf("run %d: virtual files (content@seq) %v, want %v", i, got, wantLocal)
	}

	// Each event of the run is there once: messages by index, interrupts
	// by ID, and a non-idempotent call started once plus once per retry.
	count := map[string]int{}
	var indexes []int
	var own []core.Event
	started := map[string]int{}
	retried := map[string]int{}
	for _, e := range evs {
		if e.RunID != runID {
			continue
		}
		own = append(own, e)
		count[e.Type]++
		switch e.Type {
		case core.EventMessage:
			var m core.Message
			json.Unmarshal(e.Payload, &m)
			indexes = append(indexes, m.Index)
		case core.EventToolStarted:
			var tc core.ToolCall
			json.Unmarshal(e.Payload, &tc)
			started[tc.ID]++
		case core.EventInterruptCreated, core.EventInterruptDecided:
			var in core.Interrupt
			json.Unmarshal(e.Payload, &in)
			count[e.Type+" "+in.ID]++
			if e.Type == core.EventInterruptDecided {
				if want := decided[in.ID]; in.Decision == nil || in.Decision.Decision != want {
					t.Errorf("run %d: interrupt %s decided %+v, the user said %s", i, in.ID, in.Decision, want)
				}
				if in.Decision != nil && in.Decision.Decision == core.DecisionRetry {
					retried[in.ToolCallID]++
				}
			}
		}
	}
	for typ, n := range count {
		if n != 1 && (typ == core.EventRunStarted || typ == core.EventRunFinished || strings.Contains(typ, " ")) {
			t.Errorf("run %d: %d %s events", i, n, typ)
		}
	}
	if own[0].Type != core.EventRunStarted || own[len(own)-1].Type != core.EventRunFinished {
		t.Errorf("run %d: its events run from %s to %s", i, own[0].Type, own[len(own)-1].Type)
	}
	if count[core.EventInterruptCreated] != count[core.EventInterruptDecided] || count[core.EventRunInterrupted] != count[core.EventRunResumed] {
		t.Errorf("run %d: %d interrupts created, %d decided; %d pauses, %d resumptions", i,
			count[core.EventInterruptCreated], count[core.EventInterruptDecided], count[core.EventRunInterrupted], count[core.EventRunResumed])
	}
	for j, idx := range indexes {
		if idx != j || len(indexes) != len(msgs) {
			t.Errorf("run %d: message events with indexes %v, want 0 to %d once each, in order", i, indexes, len(msgs)-1)
			break
		}
	}
	for id, tc := range calls {
		want := 0
		if kind, _ := chaosKind(tc); kind == "append" || kind == "grant" {
			want = 1 + retried[id]
		}
		if started[id] != want {
			t.Errorf("run %d: call %s (%s) has %d tool.started events, want %d", i, id, tc.Name, started[id], want)
		}
	}
	return leftovers
}

// chaosKind names the kind of a chaos script's call: "append" (to the
// scratch folder), "grant" (a write_file to the grant, at rel inside it),
// "local" (a write_file of a virtual file), or the tool's name.
func chaosKind(tc core.ToolCall) (kind, rel string) {
	var a struct{ Path string }
	json.Unmarshal(tc.Args, &a)
	switch rel, grant := strings.CutPrefix(a.Path, "/grants/out/"); {
	case tc.Name == "append_file":
		return "append", ""
	case tc.Name == "write_file" && grant:
		return "grant", rel
	case tc.Name == "write_file":
		return "local", ""
	}
	return tc.Name, ""
}

// checkChaosLog checks the event log as the threads' replays read it
// (logs) against the stream that followed it across the restarts: no
// event is in two places or twice in one, the Seqs have no gap, and the
// stream received, from its first event on, every event once, in order
// (those of other threads, a trigger's runs, included).
func checkChaosLog(ctx context.Context, t *testing.T, logs [][]core.Event, global *eventLog) {
	t.Helper()
	bySeq := map[int64]core.Event{}
	var last int64
	for _, evs := range logs {
		for j, e := range evs {
			if _, dup := bySeq[e.Seq]; dup || j > 0 && e.Seq <= evs[j-1].Seq {
				t.Fatalf("event %d (%s) of thread %s is out of order or twice in the log", e.Seq, e.Type, e.ThreadID)
			}
			bySeq[e.Seq] = e
			last = max(last, e.Seq)
		}
	}
	var followed []core.Event
	for {
		followed = global.snapshot()
		if n := len(followed); n > 0 && followed[n-1].Seq >= last || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(followed) == 0 || followed[len(followed)-1].Seq < last {
		t.Fatalf("the followed stream got %d events, up to the log's last %d: %v", len(followed), last, followed[max(0, len(followed)-3):])
	}
	first := followed[0].Seq
	for j, e := range followed {
		if e.Seq != first+int64(j) {
			t.Fatalf("the followed stream's event %d is %d %s after %d: a gap or a repeat", j, e.Seq, e.Type, followed[j-1].Seq)
		}
		if w, ok := bySeq[e.Seq]; ok && (w.Type != e.Type || w.RunID != e.RunID || w.ThreadID != e.ThreadID) {
			t.Fatalf("event %d is %s of run %s on the stream, %s of run %s in the log", e.Seq, e.Type, e.RunID, w.Type, w.RunID)
		}
		bySeq[e.Seq] = e
	}
	// Before the stream's first event the log holds the setup's, which
	// are in no thread (the grant's workspace.changed).
	for seq := min(first, slices.Min(slices.Collect(maps.Keys(bySeq)))); seq <= last; seq++ {
		if _, ok := bySeq[seq]; !ok {
			t.Fatalf("no event %d: the log has a gap (stream from %d, log up to %d)", seq, first, last)
		}
	}
	t.Logf("%d events, the followed stream got %d of them across the restarts", last, len(followed))
}

// succeeded returns how many of the runs ended, failing t on one that
// ended otherwise than succeeded.
func succeeded(ctx context.Context, t *testing.T, c *client.Client, ids []string) int {
	t.Helper()
	n := 0
	for _, id := range ids {
		r, err := c.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Terminal() {
			if r.Status != core.RunSucceeded {
				t.Fatalf("run %s %s: %s", id, r.Status, r.Error)
			}
			n++
		}
	}
	return n
}
