package wasm

import (
	"context"
	"testing"
	"time"
)

func TestKeptCompiledModule(t *testing.T) {
	h := newHost(t, "")
	// Long enough for the second Load to come within it even under the
	// race detector, where reading and hashing the entry is slow.
	h.keep = 2 * time.Second
	dir, m := writePlugin(t, "")
	ctx := context.Background()
	ts, err := h.Load(ctx, dir, m, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustAdd(t, ts)
	c, _ := ts.current()
	ts.Close()
	// Enabled again within h.keep: the same compiled module, no compile.
	ts, err = h.Load(ctx, dir, m, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := ts.current(); again != c {
		t.Fatal("Load after a close did not reuse the kept module")
	}
	mustAdd(t, ts)
	ts.Close()
	// Then, unused for h.keep, it is closed.
	deadline := time.Now().Add(h.keep + 10*time.Second)
	for {
		h.mu.Lock()
		n := len(h.compiled)
		h.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d compiled modules still kept after %v", n, h.keep)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// And a Load after that compiles again (from the disk cache).
	ts, err = h.Load(ctx, dir, m, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	mustAdd(t, ts)
}
