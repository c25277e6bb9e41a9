package mcpserverstest

import (
	"io/fs"
	"testing"

	"github.com/kilnhq/kiln/plugins/internal/bundletest"
	"github.com/kilnhq/kiln/plugins/mcp/mcpservers"
)

// source is the client a runtime handed out, as the kind takes it.
func source(t *testing.T, c any) mcpservers.Source {
	t.Helper()
	src, ok := c.(mcpservers.Source)
	if !ok {
		t.Fatalf("the runtime handed out %T for %q, not an mcpservers.Source", c, mcpservers.Name)
	}
	return src
}

// The two runtimes that carry the kind: an installed bundle's folder
// ("data", through an os.Root) and definitions compiled into kiln
// ("builtin", a MapFS as go:embed would make it).
func TestMCPServersConformance(t *testing.T) {
	t.Run("data", func(t *testing.T) {
		Run(t, func(t *testing.T, dir string) mcpservers.Source {
			return source(t, bundletest.Data(t, dir, mcpservers.Name))
		})
	})
	t.Run("builtin", func(t *testing.T) {
		Run(t, func(t *testing.T, dir string) mcpservers.Source {
			return source(t, bundletest.Builtin(t, dir, mcpservers.Name, func(f fs.FS) any { return bundletest.Folder{Files: f} }))
		})
	})
}
