package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/sqlite"
	"github.com/kilnhq/kiln/plugins/builtin"
	"github.com/kilnhq/kiln/skills"
)

// The LangGraph JS peer workload (../shared/bench/langgraph): R runs, each
// on a new thread, each K echo tool calls then a final text: 2K+1 = 21
// super-steps and 22 messages per run, checkpointed on a SQLite file (WAL,
// synchronous=NORMAL, as better-sqlite3's default there).
const (
	lgRuns  = 200
	lgCalls = 10
)

func lgScript() string {
	var b strings.Builder
	for i := range lgCalls {
		fmt.Fprintf(&b, "tool echo {\"i\": %d}\n", i)
	}
	return b.String()
}

func newBenchService(b *testing.B, path string, tools []core.Tool) (*core.Service, *sqlite.Store) {
	b.Helper()
	st, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	models := builtin.Models()
	svc, err := core.New(core.Config{
		Store: st, Tools: tools, DefaultModel: "scripted", ShutdownGrace: time.Millisecond,
		Models: func(ref string) (core.Model, error) {
			if m, ok := models[ref]; ok {
				return m, nil
			}
			return nil, core.Errorf(core.EINVALID, "unknown model %q", ref)
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return svc, st
}

// oneRun creates a thread, runs the script on it and waits for the end.
func oneRun(ctx context.Context, svc *core.Service, script string) (*core.Run, error) {
	th, err := svc.CreateThread(ctx, core.LocalOwner, core.ThreadInput{Title: "bench"})
	if err != nil {
		return nil, err
	}
	sub := svc.Broker().Subscribe(core.Filter{OwnerID: core.LocalOwner.ID, ThreadID: th.ID}, 64)
	defer sub.Close()
	r, err := svc.StartRun(ctx, core.LocalOwner, th.ID, core.RunRequest{Input: core.RunInput{Text: script}})
	if err != nil {
		return nil, err
	}
	for ev := range sub.C {
		if ev.Type == core.EventRunFinished && ev.RunID == r.ID {
			return svc.GetRun(ctx, core.LocalOwner, r.ID)
		}
	}
	return svc.GetRun(ctx, core.LocalOwner, r.ID)
}

// BenchmarkEngine runs the LangGraph workload sequentially and 8 runs at a
// time (in batches, as the peer does) and reports super-steps per second and
// the size of the whole database file per run (checkpoints, messages, the
// event log, runs and threads), measured like the peer's: after close.
func BenchmarkEngine(b *testing.B) {
	for _, c := range []struct {
		name string
		conc int
	}{{"sequential", 1}, {"concurrent-8", 8}} {
		b.Run(c.name, func(b *testing.B) {
			script := lgScript()
			var steps int
			var elapsed time.Duration
			var dbBytes int64
			for range b.N {
				b.StopTimer()
				dir := b.TempDir()
				path := filepath.Join(dir, "kiln.db")
				svc, st := newBenchService(b, path, builtin.Tools(dir))
				ctx := context.Background()
				b.StartTimer()
				t0 := time.Now()
				for i := 0; i < lgRuns; i += c.conc {
					var wg sync.WaitGroup
					errs := make(chan error, c.conc)
					for j := i; j < min(lgRuns, i+c.conc); j++ {
						wg.Go(func() {
							r, err := oneRun(ctx, svc, script)
							if err == nil && (r.Status != core.RunSucceeded || r.Steps != 2*lgCalls+1) {
								err = fmt.Errorf("run %s: %s after %d steps (%s)", r.ID, r.Status, r.Steps, r.Error)
							}
							if err != nil {
								errs <- err
							}
						})
					}
					wg.Wait()
					close(errs)
					for err := range errs {
						b.Fatal(err)
					}
				}
				elapsed += time.Since(t0)
				b.StopTimer()
				steps += lgRuns * (2*lgCalls + 1)
				svc.Shutdown(ctx)
				if err := st.Close(); err != nil {
					b.Fatal(err)
				}
				fi, err := os.Stat(path)
				if err != nil {
					b.Fatal(err)
				}
				dbBytes += fi.Size()
				b.StartTimer()
			}
			b.ReportMetric(float64(steps)/elapsed.Seconds(), "steps/s")
			b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N*lgRuns), "ms/run")
			b.ReportMetric(float64(dbBytes)/float64(b.N*lgRuns), "db-B/run")
		})
	}
}

// hold is an idempotent tool that blocks until its context ends and counts
// how often it started.
type hold struct{ started *atomic.Int64 }

func (h hold) Spec() core.ToolSpec { return core.ToolSpec{Name: "hold", Idempotent: true} }
func (h hold) Call(ctx context.Context, _ json.RawMessage) (core.ToolResult, error) {
	h.started.Add(1)
	<-ctx.Done()
	return core.ToolResult{}, ctx.Err()
}

// BenchmarkRecovery crashes a server with 1,000 runs in flight and reports
// the time from the next Start until every one of them is running again
// (back inside its tool call, resumed from its checkpoint).
func BenchmarkRecovery(b *testing.B) {
	const runs = 1000
	var total time.Duration
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		path := filepath.Join(dir, "kiln.db")
		var started atomic.Int64
		svc, st := newBenchService(b, path, []core.Tool{hold{&started}})
		ctx := context.Background()
		for range runs {
			th, err := svc.CreateThread(ctx, core.LocalOwner, core.ThreadInput{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := svc.StartRun(ctx, core.LocalOwner, th.ID, core.RunRequest{Input: core.RunInput{Text: "tool echo {}\ntool hold {}"}}); err != nil {
				b.Fatal(err)
			}
		}
		for started.Load() < runs {
			time.Sleep(time.Millisecond)
		}
		dead, cancel := context.WithCancel(ctx)
		cancel()
		svc.Shutdown(dead) // as SIGKILL: nothing in flight commits
		st.Close()

		var again atomic.Int64
		st2, err := sqlite.Open(path, sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		models := builtin.Models()
		svc2, err := core.New(core.Config{Store: st2, Tools: []core.Tool{hold{&again}}, DefaultModel: "scripted", ShutdownGrace: time.Millisecond,
			Models: func(ref string) (core.Model, error) { return models[ref], nil }})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		if err := svc2.Start(ctx); err != nil {
			b.Fatal(err)
		}
		for again.Load() < runs {
			time.Sleep(100 * time.Microsecond)
		}
		total += time.Since(t0)
		b.StopTimer()
		svc2.Shutdown(dead)
		st2.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "recovery-ms")
}

// BenchmarkTaskCall measures what a task call costs over a plain tool
// call: a run that calls echo once and answers (plain), against one that
// hands the task to a subagent (the task tool over a real skills catalog)
// which answers at once (task) — the child run, its checkpoints and
// events, and the parent's wake. Sequential runs on one server, each on a
// new thread; ms/run each.
func BenchmarkTaskCall(b *testing.B) {
	dir := b.TempDir()
	skill := filepath.Join(dir, "skills", "bench")
	if err := os.MkdirAll(skill, 0o755); err != nil {
		b.Fatal(err)
	}
	src := "---\nname: bench\ndescription: Answers at once.\ntools: echo\n---\n# Bench\nAnswer.\n"
	if err := os.WriteFile(filepath.Join(skill, "SKILL.md"), []byte(src), 0o644); err != nil {
		b.Fatal(err)
	}
	cat, err := skills.NewCatalog(filepath.Join(dir, "skills"), nil)
	if err != nil {
		b.Fatal(err)
	}
	tools := append(builtin.Tools(dir), &skills.Task{Catalog: cat})
	for _, c := range []struct{ name, script string }{
		{"plain", "tool echo {\"i\": 1}\ntext done"},
		{"task", "tool task {\"skill\": \"bench\", \"prompt\": \"text child done\"}\ntext done"},
	} {
		b.Run(c.name, func(b *testing.B) {
			svc, st := newBenchService(b, filepath.Join(b.TempDir(), "kiln.db"), tools)
			defer st.Close()
			defer svc.Shutdown(context.Background())
			ctx := context.Background()
			b.ResetTimer()
			t0 := time.Now()
			for range b.N {
				r, err := oneRun(ctx, svc, c.script)
				if err != nil {
					b.Fatal(err)
				}
				if r.Status != core.RunSucceeded || r.ToolCalls != 1 {
					b.Fatalf("run %s: %s, %d tool calls (%s)", r.ID, r.Status, r.ToolCalls, r.Error)
				}
			}
			b.ReportMetric(float64(time.Since(t0).Microseconds())/1000/float64(b.N), "ms/run")
		})
	}
}
