package execout_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/internal/execout"
)

// TestStreams: writes reach events one at a time, as copies, with their
// stream; empty writes and writes after Close do not.
func TestStreams(t *testing.T) {
	var (
		mu      sync.Mutex
		inside  bool
		got     []sandbox.ExecEvent
		overlap bool
	)
	out := execout.New(func(e sandbox.ExecEvent) {
		mu.Lock()
		overlap = overlap || inside
		inside = true
		mu.Unlock()
		got = append(got, e)
		mu.Lock()
		inside = false
		mu.Unlock()
	})
	buf := []byte("one\n")
	out.Writer(sandbox.Stdout).Write(buf)
	copy(buf, "XXX")
	out.Write(sandbox.Stderr, nil)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { fmt.Fprintf(out.Writer(sandbox.Stderr), "%d", i) })
	}
	wg.Wait()
	out.Close()
	if n, err := out.Writer(sandbox.Stdout).Write([]byte("late")); n != 4 || err != nil {
		t.Fatalf("a write after Close: %d, %v; want it taken and dropped", n, err)
	}
	if overlap {
		t.Fatal("events was called while another call ran")
	}
	if len(got) != 51 {
		t.Fatalf("%d events, want 51", len(got))
	}
	if got[0].Stream != sandbox.Stdout || string(got[0].Data) != "one\n" {
		t.Fatalf("first event %q on %v, want \"one\\n\" on stdout (a copy)", got[0].Data, got[0].Stream)
	}
	var nums []string
	for _, e := range got[1:] {
		if e.Stream != sandbox.Stderr {
			t.Fatalf("event %q on %v, want stderr", e.Data, e.Stream)
		}
		nums = append(nums, string(e.Data))
	}
	slices.Sort(nums)
	if len(slices.Compact(nums)) != 50 {
		t.Fatalf("events %q, want 0..49 once each", nums)
	}
}
