package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/coretest"
	"github.com/kilnhq/kiln/core/sqlite"
	"github.com/kilnhq/kiln/plugins/builtin"
	"github.com/kilnhq/kiln/skills"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// The LangGraph JS peer workload (../shared/bench/langgraph), as
// coretest's Workload*, checkpointed on a SQLite file (WAL,
// synchronous=NORMAL, as better-sqlite3's default there).
const (
	lgRuns  = coretest.WorkloadRuns
	lgCalls = coretest.WorkloadCalls
)

func newBenchService(b *testing.B, path string, tools []core.Tool) (*core.Service, *sqlite.Store) {
	b.Helper()
	st, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	svc := coretest.StartService(b, core.Config{Store: st, Tools: tools, DefaultModel: "scripted"}, builtin.Models())
	return svc, st
}

// BenchmarkEngine runs the LangGraph workload sequentially, 8 and 64 runs
// at a time (in batches, as the peer does) and reports super-steps per
// second, the wall time per step (us/step; sequentially, what a step costs,
// to set beside BenchmarkBareStep) and the size of the whole database file
// per run (checkpoints, messages, the event log, runs and threads),
// measured like the peer's: after close. cpu-us/step is the CPU time the
// process spent a step (both cores), against which 2 cores put the
// ceiling at 2,000,000 / cpu-us/step steps per second; steps/commit is
// how many steps shared a transaction, on average. The garbage
// collector runs with kiln serve's target.
func BenchmarkEngine(b *testing.B) {
	// The collector's target is kiln serve's (serveGCPercent in
	// cmd/kiln/serve.go), the process this engine runs in.
	defer debug.SetGCPercent(debug.SetGCPercent(150))
	for _, c := range []struct {
		name string
		conc int
	}{{"sequential", 1}, {"concurrent-8", 8}, {"concurrent-64", 64}} {
		b.Run(c.name, func(b *testing.B) {
			var steps int
			var elapsed time.Duration
			var dbBytes int64
			var cpu time.Duration
			var commits int64
			for range b.N {
				b.StopTimer()
				dir := b.TempDir()
				path := filepath.Join(dir, "kiln.db")
				svc, st := newBenchService(b, path, builtin.Tools(dir))
				ctx := context.Background()
				b.StartTimer()
				t0, cpu0, st0 := time.Now(), coretest.ProcessCPU(), st.Stats()
				if err := coretest.RunWorkload(ctx, c.conc, func(int) *core.Service { return svc }); err != nil {
					b.Fatal(err)
				}
				elapsed += time.Since(t0)
				cpu += coretest.ProcessCPU() - cpu0
				commits += st.Stats().Commits - st0.Commits
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
			b.ReportMetric(float64(elapsed.Microseconds())/float64(steps), "us/step")
			b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N*lgRuns), "ms/run")
			b.ReportMetric(float64(dbBytes)/float64(b.N*lgRuns), "db-B/run")
			b.ReportMetric(float64(cpu.Microseconds())/float64(steps), "cpu-us/step")
			b.ReportMetric(float64(steps)/float64(commits), "steps/commit")
		})
	}
}

// bareDriver is go-sqlite3 with the pragmas core/sqlite's writer sets when
// it connects (page_size=1024 before WAL, wal_autocheckpoint,
// journal_size_limit), for BenchmarkBareStep.
const bareDriver = "sqlite3_bench_bare"

func init() {
	sql.Register(bareDriver, &sqlite3.SQLiteDriver{
		ConnectHook: func(c *sqlite3.SQLiteConn) error {
			_, err := c.Exec("PRAGMA page_size = 1024; PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 16000; PRAGMA journal_size_limit = 67108864", nil)
			return err
		},
	})
}

// bareSchema holds what a step writes in tables with the kinds of columns
// the Store's have (IDs interned as integers, JSON as text, times as
// integers), their foreign keys and the events' thread index; a run has one
// checkpoint row, upserted by each step.
const bareSchema = `
CREATE TABLE threads (n INTEGER PRIMARY KEY, created_at INTEGER NOT NULL);
CREATE TABLE runs (n INTEGER PRIMARY KEY, thread INTEGER NOT NULL REFERENCES threads (n), created_at INTEGER NOT NULL);
CREATE TABLE messages (
    thread       INTEGER NOT NULL REFERENCES threads (n),
    idx          INTEGER NOT NULL,
    run          INTEGER,
    role         TEXT NOT NULL,
    text         TEXT NOT NULL,
    tool_calls   TEXT,
    tool_call_id TEXT NOT NULL,
    name         TEXT NOT NULL,
    is_error     INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (thread, idx)
) WITHOUT ROWID;
CREATE TABLE checkpoints (
    run        INTEGER PRIMARY KEY REFERENCES runs (n),
    version    INTEGER NOT NULL,
    messages   INTEGER NOT NULL,
    state      TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE events (
    seq     INTEGER PRIMARY KEY,
    thread  INTEGER,
    run     INTEGER,
    type    INTEGER NOT NULL,
    payload TEXT,
    time    INTEGER NOT NULL
);
CREATE INDEX events_thread ON events (thread) WHERE thread IS NOT NULL;`

// bareStep is what step k of a run writes, sized as the engine's rows for
// the LangGraph workload: an assistant message calling echo, or echo's
// result, or the final text; the checkpoint's state; the message's event
// and the step's event.
type bareStep struct {
	role, text, calls, callID, name string
	state, msgEvent, stepEvent      string
}

func bareSteps() []bareStep {
	steps := make([]bareStep, 2*lgCalls+1)
	for k := range steps {
		st := &steps[k]
		i, id := k/2, fmt.Sprintf("call_9699f1_%d_0", k/2)
		switch {
		case k == 2*lgCalls:
			st.role, st.text = "assistant", "done"
			st.msgEvent = fmt.Sprintf(`{"index":%d,"role":"assistant","text":"done"}`, k+1)
		case k%2 == 0:
			st.role = "assistant"
			st.calls = fmt.Sprintf(`[{"id":%q,"name":"echo","args":{"i":%d}}]`, id, i)
			st.msgEvent = fmt.Sprintf(`{"index":%d,"role":"assistant","tool_calls":%s}`, k+1, st.calls)
		default:
			st.role, st.text, st.callID, st.name = "tool", fmt.Sprintf(`{"i":%d}`, i), id, "echo"
			st.msgEvent = fmt.Sprintf(`{"index":%d,"role":"tool","text":%q,"tool_call_id":%q,"name":"echo"}`, k+1, st.text, id)
		}
		st.state = fmt.Sprintf(`{"v":2,"phase":"model","steps":%d,"tool_calls":%d}`, k+1, (k+1)/2)
		st.stepEvent = fmt.Sprintf(`{"run":"run_01JE0000000000000000000000","step":%d,"phase":"model"}`, k+1)
	}
	return steps
}

// BenchmarkBareStep is the floor under BenchmarkEngine: the same 200 runs
// x 21 steps, each step written directly with database/sql and
// go-sqlite3 (one message insert, one checkpoint upsert, two event
// inserts), on one connection opened as the Store's writer is (BEGIN
// IMMEDIATE, WAL, synchronous=NORMAL, the same page size, cache and
// statement cache). Threads and runs are created before the clock
// starts. sequential writes each step in its own transaction: the
// engine's us/step over this one is what a step costs above the disk.
// grouped-8 and grouped-64 write the runs 8 or 64 at a time, one step of
// each in a transaction, as a perfect group commit of that many
// concurrent runs would: the ceiling of BenchmarkEngine/concurrent-8 and
// concurrent-64 on this disk. It reports steps per second and us/step.
func BenchmarkBareStep(b *testing.B) {
	for _, c := range []struct {
		name  string
		group int
	}{{"sequential", 1}, {"grouped-8", 8}, {"grouped-64", 64}} {
		b.Run(c.name, func(b *testing.B) { benchBare(b, c.group) })
	}
}

func benchBare(b *testing.B, group int) {
	ctx := context.Background()
	steps := bareSteps()
	var elapsed time.Duration
	for range b.N {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), "bare.db")
		db, err := sql.Open(bareDriver, "file:"+path+"?_txlock=immediate&_synchronous=NORMAL"+
			"&_busy_timeout=10000&_foreign_keys=1&_cache_size=-16000&_stmt_cache_size=128")
		if err != nil {
			b.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(0)
		if _, err := db.Exec(bareSchema); err != nil {
			b.Fatal(err)
		}
		now := time.Now().UnixMilli()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		for r := 1; r <= lgRuns; r++ {
			for _, q := range []string{
				"INSERT INTO threads (n, created_at) VALUES (?1, ?2)",
				"INSERT INTO runs (n, thread, created_at) VALUES (?1, ?1, ?2)",
				"INSERT INTO messages (thread, idx, run, role, text, tool_call_id, name, is_error, created_at) VALUES (?1, 0, ?1, 'user', 'go', '', '', 0, ?2)",
			} {
				if _, err := tx.Exec(q, r, now); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		seq := 0
		for first := 1; first <= lgRuns; first += group {
			for k, st := range steps {
				if err := bareCommit(ctx, db, first, min(first+group, lgRuns+1), k, seq, st); err != nil {
					b.Fatal(err)
				}
				seq += 2 * (min(first+group, lgRuns+1) - first)
			}
		}
		elapsed += time.Since(t0)
		b.StopTimer()
		var n int
		if err := db.QueryRow("SELECT count(*) FROM messages").Scan(&n); err != nil {
			b.Fatal(err)
		}
		if want := lgRuns * (len(steps) + 1); n != want {
			b.Fatalf("%d messages, want %d", n, want)
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	total := b.N * lgRuns * len(steps)
	b.ReportMetric(float64(total)/elapsed.Seconds(), "steps/s")
	b.ReportMetric(float64(elapsed.Microseconds())/float64(total), "us/step")
}

// bareCommit writes step k of runs first up to (not including) end in one
// transaction; seq is the number of events before it.
func bareCommit(ctx context.Context, db *sql.DB, first, end, k, seq int, st bareStep) error {
	now := time.Now().UnixMilli()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var calls any
	if st.calls != "" {
		calls = st.calls
	}
	for r := first; r < end; r++ {
		if _, err := tx.ExecContext(ctx, `INSERT INTO messages (thread, idx, run, role, text, tool_calls, tool_call_id, name, is_error, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?)`, r, k+1, r, st.role, st.text, calls, st.callID, st.name, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (run, version, messages, state, created_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (run) DO UPDATE SET version = excluded.version, messages = excluded.messages, state = excluded.state, created_at = excluded.created_at`,
			r, k+1, k+2, st.state, now); err != nil {
			return err
		}
		for _, ev := range []struct {
			typ     int
			payload string
		}{{6, st.msgEvent}, {8, st.stepEvent}} {
			seq++
			if _, err := tx.ExecContext(ctx, "INSERT INTO events (seq, thread, run, type, payload, time) VALUES (?, ?, ?, ?, ?, ?)",
				seq, r, r, ev.typ, ev.payload, now); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
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
				r, err := coretest.RunScript(ctx, svc, c.script)
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
