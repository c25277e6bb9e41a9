package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/postgres/pgtest"
	"github.com/kilnhq/kiln/sdk/client"
)

// postgresRows measures the PostgreSQL figures of the replicas issue, on
// one throw-away cluster (pgtest's: fsync off, a unix socket): the
// engine's steps/s with 1 and 3 replicas (core/postgres's
// BenchmarkEngine) beside LangGraph JS on PostgresSaver on the same
// cluster (cmd/kiln-bench/langgraph-pg), a replica's runs resuming on
// another after a SIGKILL, and the latency of an event committed by one
// replica to an SSE client of another, both with kiln serve processes.
func postgresRows(bin string, count int, add func(figure string, v float64, unit, target string, ok bool), note func(figure, why string)) {
	dsn, stop, err := pgtest.Start()
	if err != nil {
		note("PostgreSQL figures", "no PostgreSQL: "+err.Error()+" (make deps installs it)")
		return
	}
	defer stop()

	os.Setenv(pgtest.DSNEnv, dsn)
	m := metrics{}
	if err := runGoBench(bench{"./core/postgres", "^BenchmarkEngine$", "1x"}, count, m); err != nil {
		note("engine on PostgreSQL", err.Error())
	}
	get := func(key string) float64 { return median(m[key]) }
	kiln := map[string]float64{}
	for _, r := range []int{1, 3} {
		for _, c := range []int{8, 64} {
			key := fmt.Sprintf("replicas-%d/concurrent-%d", r, c)
			kiln[key] = get("BenchmarkEngine/" + key + " steps/s")
			add(fmt.Sprintf("engine on PostgreSQL, %d replica(s), %d runs at once (200 x 21 steps)", r, c), kiln[key], "steps/s", "", true)
		}
	}
	lg, lgErr := langGraphPG(dsn, count)
	for _, c := range []int{8, 64} {
		key := fmt.Sprintf("concurrent-%d", c)
		if lgErr != nil {
			note("LangGraph JS PostgresSaver, "+key, lgErr.Error())
			continue
		}
		add(fmt.Sprintf("LangGraph JS PostgresSaver, %d runs at once, same cluster", c), lg[key], "steps/s", "peer", true)
		ratio := kiln["replicas-1/"+key] / lg[key]
		add(fmt.Sprintf("ratio Kiln / LangGraph on PostgreSQL, %d at once", c), ratio, "x", ">= 5x", ratio >= 5)
	}
	for _, c := range []int{8, 64} {
		key := fmt.Sprintf("concurrent-%d", c)
		scale := kiln["replicas-3/"+key] / kiln["replicas-1/"+key]
		busy := get("BenchmarkEngine/replicas-1/" + key + " busy-%")
		add(fmt.Sprintf("3 replicas over 1, %d at once", c), scale, "x", ">= 1.8x", scale >= 1.8)
		add(fmt.Sprintf("  the machine's 2 cores busy with 1 replica, %d at once (3 could reach at most 100 / this)", c), busy, "%", "", true)
		for _, r := range []int{1, 3} {
			add(fmt.Sprintf("  PostgreSQL's CPU a step, %d replica(s), %d at once", r, c), get(fmt.Sprintf("BenchmarkEngine/replicas-%d/%s db-cpu-us/step", r, key)), "us", "", true)
		}
	}

	resume, err := resumeAfterKill(bin, dsn, count)
	if err != nil {
		note("a killed replica's runs resumed by another", err.Error())
	} else {
		add("a killed replica's runs resumed by another (median over runs and kills)", median(resume), "s", "< 5 s", median(resume) < 5)
		worst := slices.Max(resume)
		add("  the slowest of them", worst, "s", "< 5 s", worst < 5)
	}
	lat, err := crossReplicaLatency(bin, dsn)
	if err != nil {
		note("commit on one replica to an SSE client of another", err.Error())
	} else {
		add(fmt.Sprintf("a thread created on one replica to an SSE client of another, p50 (%d, one at a time)", len(lat)), percentile(lat, 50), "ms", "", true)
		add("a thread created on one replica to an SSE client of another, p99", percentile(lat, 99), "ms", "< 20 ms", percentile(lat, 99) < 20)
	}
}

// langGraphPG runs cmd/kiln-bench/langgraph-pg on the cluster at dsn count
// times and returns the median steps/s of each concurrency.
func langGraphPG(dsn string, count int) (map[string]float64, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return nil, fmt.Errorf("node not found")
	}
	work, err := npmWork("cmd/kiln-bench/langgraph-pg", "langgraph-pg", "about ten seconds")
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	env := []string{"PGHOST=" + q.Get("host"), "PGPORT=" + q.Get("port"), "PGUSER=" + u.User.Username(), "PGDATABASE=" + strings.TrimPrefix(u.Path, "/")}
	all := map[string][]float64{}
	for range count {
		var res struct {
			Results map[string]struct {
				StepsPerS float64 `json:"steps_per_s"`
			} `json:"results"`
		}
		if err := nodeJSON(work, env, &res); err != nil {
			return nil, err
		}
		for k, v := range res.Results {
			all[k] = append(all[k], v.StepsPerS)
		}
	}
	out := map[string]float64{}
	for k, v := range all {
		out[k] = median(v)
	}
	return out, nil
}

// replicaSchema makes a new schema on the cluster at dsn and returns the
// connection string of kiln serve --database for it.
func replicaSchema(dsn, name string) (string, error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE; CREATE SCHEMA "+name); err != nil {
		return "", err
	}
	return dsn + "&search_path=" + name, nil
}

// replica is a kiln serve process on a shared database.
type replica struct {
	addr string
	pid  int
	stop func()
	c    *client.Client
}

func startReplica(bin, database string) (*replica, error) {
	data, err := os.MkdirTemp("", "kiln-bench-replica")
	if err != nil {
		return nil, err
	}
	addr, pid, stop, err := startServerPid(bin, data, "KILN_DATABASE="+database, "KILN_MODEL=scripted")
	if err != nil {
		os.RemoveAll(data)
		return nil, err
	}
	c, err := client.New("http://" + addr)
	if err != nil {
		stop()
		os.RemoveAll(data)
		return nil, err
	}
	return &replica{addr: addr, pid: pid, c: c, stop: func() { stop(); os.RemoveAll(data) }}, nil
}

// resumeAfterKill starts replicas A and B on one database count times;
// A starts 8 runs that sleep in their tools, and once B's client has
// seen a step of each (its message) A is killed (SIGKILL); the figure of
// a run is the time from the kill to its first event from B, which takes
// it over when its lease lapses (3 s, kiln serve's default on
// PostgreSQL) and calls the sleep again (tool.started).
func resumeAfterKill(bin, dsn string, count int) ([]float64, error) {
	const runs = 8
	var times []float64
	for round := range count {
		database, err := replicaSchema(dsn, fmt.Sprintf("bench_resume_%d", round))
		if err != nil {
			return nil, err
		}
		a, err := startReplica(bin, database)
		if err != nil {
			return nil, err
		}
		b, err := startReplica(bin, database)
		if err != nil {
			a.stop()
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		st := b.c.Stream(ctx, client.StreamOptions{})
		ids := map[string]bool{}
		err = func() error {
			for i := range runs {
				th, err := a.c.CreateThread(ctx, core.ThreadInput{Title: fmt.Sprint("resume ", i)})
				if err != nil {
					return err
				}
				r, err := a.c.StartRun(ctx, th.ID, core.RunRequest{Model: "scripted",
					Input: core.RunInput{Text: "tool sleep {\"ms\": 1500}\ntool sleep {\"ms\": 1500}\ntool sleep {\"ms\": 1500}\ntext done"}})
				if err != nil {
					return err
				}
				ids[r.ID] = true
			}
			started := map[string]bool{}
			for len(started) < runs {
				ev, ok := <-st.Events()
				if !ok {
					return fmt.Errorf("B's stream ended: %v", st.Err())
				}
				if ev.Type == core.EventMessage && ids[ev.RunID] {
					started[ev.RunID] = true
				}
			}
			syscall.Kill(a.pid, syscall.SIGKILL)
			killed := time.Now()
			resumed := map[string]bool{}
			for len(resumed) < runs {
				var ev core.Event
				select {
				case ev = <-st.Events():
				case <-time.After(200 * time.Millisecond):
					continue
				}
				if ids[ev.RunID] && !resumed[ev.RunID] && ev.Time.After(killed) {
					resumed[ev.RunID] = true
					times = append(times, time.Since(killed).Seconds())
				}
			}
			return nil
		}()
		st.Close()
		cancel()
		a.stop()
		b.stop()
		if err != nil {
			return nil, err
		}
	}
	return times, nil
}

// crossReplicaLatency starts replicas A and B on one database and a
// client of B following every event; 500 times, one after the other, it
// creates a thread through A's API and takes the time from the request
// to the thread.created event's arrival at B's client, in ms: the
// single server's commit-to-SSE figure (web's BenchmarkSSELatency),
// across replicas.
func crossReplicaLatency(bin, dsn string) ([]float64, error) {
	database, err := replicaSchema(dsn, "bench_latency")
	if err != nil {
		return nil, err
	}
	a, err := startReplica(bin, database)
	if err != nil {
		return nil, err
	}
	defer a.stop()
	b, err := startReplica(bin, database)
	if err != nil {
		return nil, err
	}
	defer b.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := b.c.Stream(ctx, client.StreamOptions{})
	defer st.Close()
	// B's stream is connected once it delivers an event made after it.
	if _, err := a.c.CreateThread(ctx, core.ThreadInput{Title: "warm up"}); err != nil {
		return nil, err
	}
	for ev := range st.Events() {
		if ev.Type == core.EventThreadCreated {
			break
		}
	}
	const samples = 500
	lat := make([]float64, 0, samples)
	for range samples {
		t0 := time.Now()
		th, err := a.c.CreateThread(ctx, core.ThreadInput{Title: "latency"})
		if err != nil {
			return nil, err
		}
		for {
			ev, ok := <-st.Events()
			if !ok {
				return nil, fmt.Errorf("B's stream ended: %v", st.Err())
			}
			if ev.Type == core.EventThreadCreated && ev.ThreadID == th.ID {
				break
			}
		}
		lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
	}
	return lat, nil
}
