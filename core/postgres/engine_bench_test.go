package postgres

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/coretest"
	"github.com/kilnhq/kiln/core/postgres/pgtest"
	"github.com/kilnhq/kiln/plugins/builtin"
)

// BenchmarkEngine runs the engine benchmarks' workload (coretest's: 200
// runs x 21 steps with the scripted model) on PostgreSQL, with 1 and with
// 3 replicas (Services, each with a Store, a pool and a lease holder of
// its own, on one database: run j starts on, and is driven by, replica j
// mod 3), 8 and 64 runs at a time, in batches as the SQLite benchmark
// does. It reports super-steps per second, ms/run, cpu-us/step (this
// process), db-cpu-us/step (every other process: PostgreSQL's backends,
// on a machine doing nothing else), busy-% (how much of the machine's
// CPUs everything used) and commits/step.
func BenchmarkEngine(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(150))
	for _, replicas := range []int{1, 3} {
		for _, conc := range []int{8, 64} {
			b.Run(fmt.Sprintf("replicas-%d/concurrent-%d", replicas, conc), func(b *testing.B) {
				var elapsed, cpu, machine time.Duration
				var commits int64
				for range b.N {
					b.StopTimer()
					dsn := pgtest.DSN(b)
					var mu sync.Mutex
					var n int64
					svcs := make([]*core.Service, replicas)
					for i := range svcs {
						st, err := Open(context.Background(), dsn, Options{OnCommit: func(time.Duration, int) {
							mu.Lock()
							n++
							mu.Unlock()
						}})
						if err != nil {
							b.Fatal(err)
						}
						svcs[i] = benchService(b, st, fmt.Sprintf("replica-%d", i))
						b.Cleanup(func() { st.Close() })
					}
					ctx := context.Background()
					b.StartTimer()
					t0, cpu0, m0 := time.Now(), coretest.ProcessCPU(), coretest.MachineCPU()
					if err := coretest.RunWorkload(ctx, conc, func(j int) *core.Service { return svcs[j%replicas] }); err != nil {
						b.Fatal(err)
					}
					elapsed += time.Since(t0)
					cpu += coretest.ProcessCPU() - cpu0
					machine += coretest.MachineCPU() - m0
					b.StopTimer()
					mu.Lock()
					commits += n
					mu.Unlock()
					for _, svc := range svcs {
						svc.Shutdown(ctx)
					}
					b.StartTimer()
				}
				steps := float64(b.N * coretest.WorkloadRuns * coretest.WorkloadSteps)
				b.ReportMetric(steps/elapsed.Seconds(), "steps/s")
				b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N*coretest.WorkloadRuns), "ms/run")
				b.ReportMetric(float64(cpu.Microseconds())/steps, "cpu-us/step")
				b.ReportMetric(float64(commits)/steps, "commits/step")
				b.ReportMetric(float64((machine-cpu).Microseconds())/steps, "db-cpu-us/step")
				b.ReportMetric(100*machine.Seconds()/(float64(runtime.NumCPU())*elapsed.Seconds()), "busy-%")
			})
		}
	}
}

// benchService is a started Service on st with the scripted model and
// the built-in tools, its leases held as holder.
func benchService(b *testing.B, st core.Store, holder string) *core.Service {
	b.Helper()
	return coretest.StartService(b, core.Config{Store: st, Tools: builtin.Tools(b.TempDir()), DefaultModel: "scripted", Holder: holder}, builtin.Models())
}
