package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/postgres/pgtest"
	"github.com/kilnhq/kiln/sdk/client"
)

// buildKiln compiles the kiln binary once per test binary run, with the
// build tags kiln needs (sqlite_fts5: thread search), and beside it the
// static kiln-execd that docker sandboxes mount, as make kiln does.
var buildKiln = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "kiln-e2e-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "kiln")
	out, err := exec.Command("go", "build", "-tags", "sqlite_fts5", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	execd := exec.Command("go", "build", "-o", filepath.Join(dir, "kiln-execd"), "../kiln-execd")
	execd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := execd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build kiln-execd: %v\n%s", err, out)
	}
	return bin, nil
})

// procServer is a `kiln serve` child process.
type procServer struct {
	t    *testing.T
	cmd  *exec.Cmd
	addr string
	data string
	env  []string
	logs *strings.Builder
	done chan error
}

func procAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startProc(t *testing.T, addr, data string, env ...string) *procServer {
	t.Helper()
	bin, err := buildKiln()
	if err != nil {
		t.Fatal(err)
	}
	s := &procServer{t: t, addr: addr, data: data, env: env, logs: &strings.Builder{}, done: make(chan error, 1)}
	s.cmd = exec.Command(bin, "serve", "--addr", addr, "--data", data)
	s.cmd.Env = append(os.Environ(), env...)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			s.logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
		}
		s.done <- s.cmd.Wait()
	}()
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			s.cmd.Process.Kill()
			<-s.done
		}
	})
	c := s.client()
	deadline := time.Now().Add(30 * time.Second)
	for c.Health(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("server did not come up:\n%s", s.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s
}

func (s *procServer) client() *client.Client {
	c, err := client.New("http://" + s.addr)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

func (s *procServer) kill() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		s.t.Fatal(err)
	}
	<-s.done
}

// eventLog gathers the durable events of a stream.
type eventLog struct {
	mu     sync.Mutex
	events []core.Event
}

func (c *eventLog) add(e core.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, e)
}

func (c *eventLog) snapshot() []core.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

func followEvents(ctx context.Context, c *client.Client, opts client.StreamOptions) *eventLog {
	col := &eventLog{}
	st := c.Stream(ctx, opts)
	go func() {
		for ev := range st.Events() {
			if ev.Seq > 0 {
				col.add(ev)
			}
		}
	}()
	return col
}

func e2eScript(i int) string {
	return fmt.Sprintf(`tool sleep {"ms": 100}
tool append_file {"path": "e2e/run-%[1]d.txt", "line": "%[1]d-a"}
tool sleep {"ms": 100}
tool append_file {"path": "e2e/run-%[1]d.txt", "line": "%[1]d-b"}
tool sleep {"ms": 50}
text finished %[1]d`, i)
}

// TestCrashRecoveryEndToEnd runs kiln serve as a separate process, starts 50
// runs, kills the server with SIGKILL in the middle, starts it again and
// checks that every run finishes, no append_file line is written twice,
// runs cut inside append_file come up in Action and finish after a
// decision, and SSE clients that reconnect across the restart receive every
// event of their thread once, in order.
//
// It runs on each Store: SQLite in the data root, and PostgreSQL.
func TestCrashRecoveryEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	t.Run("sqlite", func(t *testing.T) { crashRecovery(t) })
	t.Run("postgres", func(t *testing.T) { crashRecovery(t, "KILN_DATABASE="+pgtest.DSN(t)) })
}

func crashRecovery(t *testing.T, env ...string) {
	const runs = 50
	addr, data := procAddr(t), t.TempDir()
	// The delay keeps each append_file call open for a while after its
	// effect, so the kill lands inside non-idempotent calls.
	env = append(env, "KILN_TEST_TOOL_DELAY=append_file=400ms")
	srv := startProc(t, addr, data, env...)
	c := srv.client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	global := followEvents(ctx, c, client.StreamOptions{})
	runIDs := make([]string, runs)
	threadIDs := make([]string, runs)
	streams := map[string]*eventLog{}
	for i := range runs {
		th, err := c.CreateThread(ctx, core.ThreadInput{Title: fmt.Sprintf("e2e %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		threadIDs[i] = th.ID
		if i%10 == 0 {
			streams[th.ID] = followEvents(ctx, c, client.StreamOptions{ThreadID: th.ID})
		}
		r, err := c.StartRun(ctx, th.ID, core.RunRequest{
			Input:       core.RunInput{Text: e2eScript(i)},
			Model:       "scripted",
			InterruptOn: core.Policy{"append_file": {Interrupt: false}},
		})
		if err != nil {
			t.Fatal(err)
		}
		runIDs[i] = r.ID
	}

	// Kill once many append_file calls have durably started.
	for {
		n := 0
		for _, ev := range global.snapshot() {
			if ev.Type == core.EventToolStarted && strings.Contains(string(ev.Payload), "append_file") {
				n++
			}
		}
		if n >= runs/2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("append_file calls never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	srv.kill()
	srv = startProc(t, addr, data, env...)

	// Act as the user: a cut-off append_file is skipped if its line is in
	// the file and retried if not.
	recoveries := 0
	decided := map[string]bool{}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		page, err := c.Inbox(ctx, client.InboxOptions{Queue: core.QueueAction})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			if decided[it.InterruptID] {
				continue
			}
			if it.Kind != core.InterruptRecovery || it.Tool != "append_file" {
				t.Fatalf("unexpected action item %+v", it)
			}
			var args struct{ Path, Line string }
			if err := json.Unmarshal(it.Args, &args); err != nil {
				t.Fatal(err)
			}
			content, _ := os.ReadFile(filepath.Join(data, "scratch", args.Path))
			d := core.DecisionRetry
			if slices.Contains(strings.Split(string(content), "\n"), args.Line) {
				d = core.DecisionSkip
			}
			if _, err := c.Decide(ctx, it.InterruptID, core.Decision{Decision: d}); err != nil {
				t.Fatal(err)
			}
			decided[it.InterruptID] = true
			recoveries++
		}
		finished := 0
		for _, id := range runIDs {
			r, err := c.GetRun(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status.Terminal() {
				if r.Status != core.RunSucceeded {
					t.Fatalf("run %s %s: %s", id, r.Status, r.Error)
				}
				finished++
			}
		}
		if finished == runs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs finished\n%s", finished, runs, srv.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if recoveries == 0 {
		t.Fatal("no run was cut inside append_file; the kill came too late to test recovery")
	}
	t.Logf("%d runs cut inside append_file were decided from the Action queue", recoveries)

	for i := range runs {
		content, err := os.ReadFile(filepath.Join(data, "scratch", "e2e", fmt.Sprintf("run-%d.txt", i)))
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%d-a\n%d-b\n", i, i)
		if string(content) != want {
			t.Errorf("run %d wrote %q, want %q", i, content, want)
		}
	}

	// Every reconnecting stream got exactly its thread's durable events.
	for threadID, col := range streams {
		fresh := followEvents(ctx, c, client.StreamOptions{ThreadID: threadID})
		var want []core.Event
		for end := time.Now().Add(10 * time.Second); ; {
			want = fresh.snapshot()
			got := col.snapshot()
			if len(want) > 0 && len(got) >= len(want) && want[len(want)-1].Type == core.EventRunFinished {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("thread %s: streams did not catch up (%d vs %d events)", threadID, len(got), len(want))
			}
			time.Sleep(20 * time.Millisecond)
		}
		got := col.snapshot()
		if len(got) != len(want) {
			t.Fatalf("thread %s: reconnecting stream got %d events, the log has %d", threadID, len(got), len(want))
		}
		for i := range got {
			if got[i].Seq != want[i].Seq || got[i].Type != want[i].Type || (i > 0 && got[i].Seq <= got[i-1].Seq) {
				t.Fatalf("thread %s: event %d is %d %s, want %d %s", threadID, i, got[i].Seq, got[i].Type, want[i].Seq, want[i].Type)
			}
		}
	}
}

// TestGracefulShutdownEndToEnd sends SIGTERM while a run sleeps: the server
// exits 0 after the step, and the run finishes after the next start.
func TestGracefulShutdownEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	addr, data := procAddr(t), t.TempDir()
	srv := startProc(t, addr, data)
	c := srv.client()
	ctx := context.Background()
	th, err := c.CreateThread(ctx, core.ThreadInput{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.StartRun(ctx, th.ID, core.RunRequest{Model: "scripted", Input: core.RunInput{Text: "tool sleep {\"ms\": 300}\ntool sleep {\"ms\": 300}\ntext ok"}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-srv.done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, srv.logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("server did not stop after SIGTERM")
	}
	srv = startProc(t, addr, data)
	c = srv.client()
	got, err := c.WaitRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != core.RunSucceeded || got.Steps != 5 {
		t.Fatalf("run after restart: %s, %d steps (%s)", got.Status, got.Steps, got.Error)
	}
}
