package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
)

// loadIn loads calc from dir into a new Host on cache, and reports whether
// Load compiled it.
func loadIn(t *testing.T, cache, dir string, m *plugins.Manifest) (*Host, *Module, bool) {
	t.Helper()
	h := newHost(t, cache)
	ts, err := h.Load(context.Background(), dir, m, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	in := ts
	c, _ := in.current()
	return h, in, c != nil
}

func TestDescriptionSkipsCompile(t *testing.T) {
	cache := t.TempDir()
	dir, m := writePlugin(t, "")
	h, first, compiled := loadIn(t, cache, dir, m)
	if !compiled {
		t.Fatal("the first Load on an empty cache did not compile")
	}
	want, _ := tools(first)
	first.Close()
	h.Close(context.Background())

	// A restart: a new Host on the same cache folder.
	start := time.Now()
	_, ts, compiled := loadIn(t, cache, dir, m)
	t.Logf("load with a description: %v", time.Since(start))
	if compiled {
		t.Fatal("Load compiled a module it had a description of")
	}
	got, _ := tools(ts)
	if len(got) != len(want) || !slices.EqualFunc(got, want, func(a, b core.ToolSpec) bool { return a.Name == b.Name && a.Description == b.Description }) {
		t.Fatalf("tools from the description %v, want %v", got, want)
	}
	mustAdd(t, ts) // compiles and instantiates
	if c, _ := ts.current(); c == nil {
		t.Fatal("the first call did not compile")
	}
}

func TestChangedEntryRefusedAtFirstCall(t *testing.T) {
	cache := t.TempDir()
	dir, m := writePlugin(t, "")
	h, ts, _ := loadIn(t, cache, dir, m)
	ts.Close()
	h.Close(context.Background())

	_, ts, compiled := loadIn(t, cache, dir, m)
	if compiled {
		t.Fatal("Load compiled a module it had a description of")
	}
	// Changed between Load and the first call: refused before it runs.
	path := filepath.Join(dir, "calc.wasm")
	b, _ := os.ReadFile(path)
	b[len(b)-1] ^= 0xff
	os.WriteFile(path, b, 0o644)
	_, err := callCtx(context.Background(), ts, "add", `{"a":1,"b":2}`)
	if !errors.Is(err, plugins.ErrChecksumMismatch) || !errors.Is(err, plugins.ErrTransport) {
		t.Fatalf("first call after the entry changed: %v", err)
	}
}

func TestUnusableDescriptionIgnored(t *testing.T) {
	cache := t.TempDir()
	dir, m := writePlugin(t, "")
	h, ts, _ := loadIn(t, cache, dir, m)
	ts.Close()
	h.Close(context.Background())
	files, _ := filepath.Glob(filepath.Join(describedDir(cache), "*.json"))
	if len(files) != 1 {
		t.Fatalf("description files %v, want one", files)
	}
	for _, garbage := range []string{`{`, `{"abi":3,"tools":[]}`, `{"abi":1,"tools":[{"name":""}]}`} {
		os.WriteFile(files[0], []byte(garbage), 0o600)
		_, ts, compiled := loadIn(t, cache, dir, m)
		if !compiled {
			t.Errorf("description %s: Load did not compile", garbage)
		}
		mustAdd(t, ts)
		ts.Close()
	}
	// The last full Load wrote it again.
	if b, _ := os.ReadFile(files[0]); !json.Valid(b) {
		t.Errorf("description not rewritten: %s", b)
	}
}

// A description is for one memory limit: the same module with too little
// memory is compiled, and refused, at Load.
func TestDescriptionPerMemoryLimit(t *testing.T) {
	cache := t.TempDir()
	dir, m := writePlugin(t, "")
	h, ts, _ := loadIn(t, cache, dir, m)
	ts.Close()
	h.Close(context.Background())
	m.Permissions.MemoryMiB = 1
	if _, err := newHost(t, cache).Load(context.Background(), dir, m, LoadOptions{}); err == nil {
		t.Fatal("loaded calc with 1 MiB of memory")
	}
}
