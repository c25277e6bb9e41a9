package skillbundletest

import (
	"io/fs"
	"testing"

	"github.com/kilnhq/kiln/plugins/internal/bundletest"
	"github.com/kilnhq/kiln/plugins/skillbundle"
)

// source is the client a runtime handed out, as the kind takes it.
func source(t *testing.T, c any) skillbundle.Source {
	t.Helper()
	src, ok := c.(skillbundle.Source)
	if !ok {
		t.Fatalf("the runtime handed out %T for %q, not a skillbundle.Source", c, skillbundle.Name)
	}
	return src
}

// The two runtimes that carry the kind: an installed bundle's folder
// ("data", through an os.Root) and skills compiled into kiln ("builtin",
// a MapFS as go:embed would make it).
func TestSkillsConformance(t *testing.T) {
	t.Run("data", func(t *testing.T) {
		Run(t, func(t *testing.T, dir string) skillbundle.Source {
			return source(t, bundletest.Data(t, dir, skillbundle.Name))
		})
	})
	t.Run("builtin", func(t *testing.T) {
		Run(t, func(t *testing.T, dir string) skillbundle.Source {
			return source(t, bundletest.Builtin(t, dir, skillbundle.Name, func(f fs.FS) any { return bundletest.Folder{Files: f} }))
		})
	})
}
