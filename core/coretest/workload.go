package coretest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// The engine benchmarks' workload, the LangGraph JS peer's: WorkloadRuns
// runs, each on a new thread, each WorkloadCalls echo tool calls then a
// final text, so WorkloadSteps super-steps and WorkloadSteps+1 messages
// per run, with the scripted model.
const (
	WorkloadRuns  = 200
	WorkloadCalls = 10
	WorkloadSteps = 2*WorkloadCalls + 1
)

// WorkloadScript is the scripted model's script of one workload run.
func WorkloadScript() string {
	var b strings.Builder
	for i := range WorkloadCalls {
		fmt.Fprintf(&b, "tool echo {\"i\": %d}\n", i)
	}
	return b.String()
}

// RunScript creates a thread on svc, runs the scripted model's script on
// it, waits for the run's end (its run.finished event on svc's broker) and
// returns the run.
func RunScript(ctx context.Context, svc *core.Service, script string) (*core.Run, error) {
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
			break
		}
	}
	return svc.GetRun(ctx, core.LocalOwner, r.ID)
}

// WorkloadRun is RunScript of WorkloadScript, failing unless the run
// succeeded after WorkloadSteps steps.
func WorkloadRun(ctx context.Context, svc *core.Service) error {
	r, err := RunScript(ctx, svc, WorkloadScript())
	if err == nil && (r.Status != core.RunSucceeded || r.Steps != WorkloadSteps) {
		err = fmt.Errorf("run %s: %s after %d steps (%s)", r.ID, r.Status, r.Steps, r.Error)
	}
	return err
}

// StartService is core.New(cfg), started, with a ShutdownGrace of a
// millisecond and cfg.Models resolving the names in models (the scripted
// model, for the workload); it fails tb on an error.
func StartService(tb testing.TB, cfg core.Config, models map[string]core.Model) *core.Service {
	tb.Helper()
	cfg.ShutdownGrace = time.Millisecond
	cfg.Models = func(ref string) (core.Model, error) {
		if m, ok := models[ref]; ok {
			return m, nil
		}
		return nil, core.Errorf(core.EINVALID, "unknown model %q", ref)
	}
	svc, err := core.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return svc
}

// RunWorkload runs the workload's WorkloadRuns runs conc at a time, in
// batches (the next batch starts when the whole batch ended, as the peer
// benchmark does), run j on the Service svc(j), and returns the first
// error.
func RunWorkload(ctx context.Context, conc int, svc func(j int) *core.Service) error {
	for i := 0; i < WorkloadRuns; i += conc {
		var wg sync.WaitGroup
		errs := make(chan error, conc)
		for j := i; j < min(WorkloadRuns, i+conc); j++ {
			wg.Go(func() {
				if err := WorkloadRun(ctx, svc(j)); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

// ProcessCPU is the user and system CPU time the process has used so far.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// MachineCPU is the CPU time all processes have used so far (user,
// nice, system, irq and softirq in /proc/stat's cpu line): a benchmark takes the difference over its timed
// part, less ProcessCPU's, as what the other processes (a database
// server) spent. It returns 0 where /proc/stat cannot be read.
func MachineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} { // user nice system irq softirq
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}
