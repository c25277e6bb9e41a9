package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/postgres/pgtest"
	"github.com/kilnhq/kiln/sdk/client"
)

// The shape of the replicas' chaos test.
const (
	rcReplicas = 3
	rcRuns     = 300
	rcRounds   = 12
	rcClients  = 100
	rcKills    = 10
	// rcStopped more runs start through the replica stopped with
	// SIGSTOP, just before.
	rcStopped = 10
	// rcPause is how long one replica is stopped (SIGSTOP): past its
	// runs' leases (KILN_LEASE_TTL=1s here) and the others' sweep.
	rcPause = 5 * time.Second
)

// TestReplicasChaosEndToEnd runs three kiln serve processes on one
// PostgreSQL database and one shared folder, with 1 s leases. 300 runs
// with side-effecting tools (chaosScript) start spread over them, 100
// SSE clients each follow a thread through one of them, a client
// follows every event through another, and a cron trigger fires every
// second. A random replica is killed with SIGKILL and restarted 10 times,
// and one is stopped with SIGSTOP for 3 s once, while a careful user
// decides the Action queue. Then every run must succeed with each tool
// call taking effect once (append_file's lines in whichever replicas'
// scratch folders ran them), every client must have every event of its
// thread once, in order, the log must have no gap, the stopped replica
// must have had its late commits refused (its leases lost), and every
// second's slot of the trigger must have fired once.
// KILN_CHAOS_SEED=<seed> replays the scripts and the schedule.
func TestReplicasChaosEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	seed := chaosSeed(t)
	t.Logf("seed %d (replay with KILN_CHAOS_SEED=%[1]d)", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	out := t.TempDir()
	env := []string{"KILN_DATABASE=" + pgtest.DSN(t), "KILN_SHARED_ROOT=" + t.TempDir(), "KILN_LEASE_TTL=1s",
		fmt.Sprintf("KILN_TEST_TOOL_DELAY=append_file=%s,write_file=%[1]s", chaosToolDelay)}
	var addrs, datas [rcReplicas]string
	var procs [rcReplicas]*procServer
	for i := range procs {
		addrs[i], datas[i] = procAddr(t), t.TempDir()
		procs[i] = startProc(t, addrs[i], datas[i], env...)
	}
	clientOf := func(i int) *client.Client {
		c, err := client.New("http://" + addrs[i%rcReplicas])
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := clientOf(0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	if _, err := c.AddGrant(ctx, core.GrantInput{Path: out, Name: "out", Writable: true}); err != nil {
		t.Fatal(err)
	}
	tick, err := c.CreateTrigger(ctx, core.TriggerInput{Kind: core.TriggerCron, Cron: "@every 1s", Prompt: "text tick", Model: "scripted"})
	if err != nil {
		t.Fatal(err)
	}
	global := followEvents(ctx, clientOf(1), client.StreamOptions{})
	threads := make([]string, rcRuns)
	runs := make([]string, rcRuns)
	for i := range rcRuns {
		threads[i], runs[i] = startChaosRun(ctx, t, clientOf(i), i, rcRounds, rng)
	}
	clients := make([]*eventLog, rcClients)
	for i := range clients {
		clients[i] = followEvents(ctx, clientOf(i+1), client.StreamOptions{ThreadID: threads[i]})
	}

	var scratch []string
	for _, d := range datas {
		scratch = append(scratch, filepath.Join(d, "scratch"))
	}
	user := &carefulUser{scratch: scratch, out: out, decided: map[string]string{}}
	start := time.Now()
	// A replica is stopped with SIGSTOP while it drives runs: rcStopped
	// more runs start through it, and once each has committed a step
	// (the others' Updates may be waiting behind one of its own).
	paused := rng.IntN(rcReplicas)
	for i := rcRuns; i < rcRuns+rcStopped; i++ {
		th, r := startChaosRun(ctx, t, clientOf(paused), i, rcRounds, rng)
		threads, runs = append(threads, th), append(runs, r)
	}
	waitFor(t, "a step of each run the replica to stop drives", func() bool {
		for _, id := range runs[rcRuns:] {
			if r, err := c.GetRun(ctx, id); err != nil || r.Steps == 0 {
				return false
			}
		}
		return true
	})
	t.Logf("replica %d, driving %d runs it started, is stopped", paused, rcStopped)
	p := procs[paused].cmd.Process
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(rcPause)
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Its drivers go on where they stopped, and none commits: a step or
	// lease renewal carries a lease the others have taken over since,
	// refused for its token (kiln_run_leases_total{event="lost"}) or
	// because the run no longer runs (the others drove it on to its gate
	// meanwhile); or the step was in the Update the database ended while
	// it waited (idle_in_transaction_session_timeout), which fails as a
	// crash's would. Counted before a later kill restarts the replica.
	time.Sleep(3 * time.Second)
	lost := leasesLost(t, addrs[paused])
	pausedLog := procs[paused].logs.String()
	refused := strings.Count(pausedLog, "run driver stopped: its step or lease was refused")
	aborted := strings.Count(pausedLog, "run stopped on a store error")
	for range rcKills {
		victim := rng.IntN(rcReplicas)
		user.decide(ctx, t, clientOf(victim+1))
		time.Sleep(time.Duration(rng.Int64N(int64(400 * time.Millisecond))))
		procs[victim].kill()
		procs[victim] = startProc(t, addrs[victim], datas[victim], env...)
	}
	t.Logf("%d kills and a %s pause of replica %d in %s", rcKills, rcPause, paused, time.Since(start).Round(time.Millisecond))

	user.open = true
	for {
		user.decide(ctx, t, c)
		if succeeded(ctx, t, c, runs) == len(runs) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("not every run finished:\n%s", procs[0].logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	off := false
	if _, err := c.UpdateTrigger(ctx, tick.ID, core.TriggerPatch{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	t.Logf("all %d runs succeeded %s after the start; %d recovery interrupts decided", len(runs),
		time.Since(start).Round(time.Millisecond), len(user.decided)-len(runs))

	logs := make([][]core.Event, len(runs))
	for i := range runs {
		logs[i] = threadLog(ctx, t, c, threads[i], runs[i])
		checkChaosRun(ctx, t, c, i, rcRounds, threads[i], runs[i], logs[i], scratch, out, user.decided)
	}
	checkChaosLog(ctx, t, logs, global)
	for i, col := range clients {
		checkFollowed(t, i, col.snapshot(), logs[i])
	}

	if refused+aborted == 0 {
		t.Errorf("replica %d, stopped past its leases while driving %d runs, had none of its late commits refused; its log:\n%s", paused, rcStopped, pausedLog)
	} else {
		t.Logf("replica %d, stopped while driving %d runs: %d drivers had a late step or renewal refused (%d for a lease token taken over), %d steps were in the Update the database ended",
			paused, rcStopped, refused, lost, aborted)
	}

	page, err := c.TriggerOccurrences(ctx, tick.ID, 500)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the trigger fired %d slots once each; checked %s after the start", everySlotOnce(t, page), time.Since(start).Round(time.Millisecond))
}

// checkFollowed checks what SSE client i received of its thread, through
// one replica killed and restarted under it: the thread's log (want),
// each event once, in order.
func checkFollowed(t *testing.T, i int, got, want []core.Event) {
	t.Helper()
	seqs := func(evs []core.Event) []int64 {
		var out []int64
		for _, e := range evs {
			out = append(out, e.Seq)
		}
		return out
	}
	g, w := seqs(got), seqs(want)
	if len(g) > len(w) {
		g = g[:len(w)]
	}
	if !slices.Equal(g, w) {
		t.Errorf("client %d: received seqs %v, want the thread's %v", i, seqs(got), w)
	}
}

// leasesLost is the kiln_run_leases_total{event="lost"} of the server at
// addr: how many of its drivers had a step refused for a lease another
// server holds.
func leasesLost(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`kiln_run_leases_total\{event="lost"\} (\d+)`).FindSubmatch(metrics)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
