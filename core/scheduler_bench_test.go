package core_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// blockModel's turns wait until the run is cancelled: the runs a
// benchmark starts hold still, so it measures the dispatch alone.
type blockModel struct{}

func (blockModel) Turn(ctx context.Context, _ core.ModelRequest, _ func(string)) (core.ModelResponse, error) {
	<-ctx.Done()
	return core.ModelResponse{}, ctx.Err()
}

// BenchmarkSchedulerDispatch: 10,000 cron triggers due in the same
// second, each dispatched into a durable run (occurrence, thread, run,
// first checkpoint, events) by one Tick. It reports the time the Tick
// took and the fires per second.
func BenchmarkSchedulerDispatch(b *testing.B) {
	const n = 10000
	for range b.N {
		b.StopTimer()
		se := newSchedEnvB(b, blockModel{})
		for i := range n {
			if _, err := se.svc.CreateTrigger(context.Background(), owner, core.TriggerInput{Kind: "cron", Name: fmt.Sprint("t", i), Cron: "@every 1m", Prompt: "go"}); err != nil {
				b.Fatal(err)
			}
		}
		se.clock.add(time.Minute)
		b.StartTimer()
		began := time.Now()
		r, err := se.sc.Tick(context.Background())
		took := time.Since(began)
		if err != nil || r.Started != n {
			b.Fatalf("started %d of %d: %v", r.Started, n, err)
		}
		b.ReportMetric(float64(took.Milliseconds()), "dispatch-ms")
		b.ReportMetric(float64(n)/took.Seconds(), "fires/s")
	}
}
