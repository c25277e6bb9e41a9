package sandboxtest

import (
	"testing"

	"github.com/kilnhq/kiln/sandbox"
)

// The suite over the in-memory Machine: with Pause, without it (an
// adapter that has the Pauser methods and refuses them), and as a
// runtime that is no Pauser at all, with resource limits.
func TestMemoryConformance(t *testing.T) {
	t.Run("pause", func(t *testing.T) {
		m := NewMachine()
		Run(t, func(*testing.T) sandbox.Runtime { return m.Runtime(Options{}) })
		if ids := m.Sandboxes(); len(ids) > 0 {
			t.Errorf("the suite left sandboxes behind: %q", ids)
		}
	})
	t.Run("no-pause", func(t *testing.T) {
		m := NewMachine()
		Run(t, func(*testing.T) sandbox.Runtime { return m.Runtime(Options{Name: "memory.no-pause", NoPause: true}) })
	})
	t.Run("not-a-pauser", func(t *testing.T) {
		m := NewMachine()
		Run(t, func(*testing.T) sandbox.Runtime {
			return plain{m.Runtime(Options{Name: "plain", NoPause: true, Max: sandbox.Resources{MemoryMiB: 1024, CPUMillis: 2000}})}
		})
	})
}

// plain hides the Pauser methods of the runtime it wraps.
type plain struct{ sandbox.Runtime }
