package skillbundletest

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/skillbundle"
)

// openData loads the bundle in dir as the registry loads an installed
// one: the registered "data" runtime, then Dispense of "skills".
func openData(t *testing.T, dir string) skillbundle.Source {
	t.Helper()
	m, err := plugins.LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dispense(t, plugins.RuntimeData, plugins.LoadRequest{ID: m.ID, Dir: dir, Manifest: m})
}

// openBuiltin serves the bundle in dir as a built-in would: its files
// compiled in (an fstest.MapFS of dir's folders and regular files,
// without the symlinks, as go:embed has them), handed out by the
// registered "builtin" runtime through plugins.Clients.
func openBuiltin(t *testing.T, dir string) skillbundle.Source {
	t.Helper()
	fsys := embedded(t, dir)
	m, err := plugins.ParseBuiltinManifest([]byte(strings.Replace(Manifest, `"provides"`, `"runtime":"builtin","provides"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	b := &plugins.Builtin{Manifest: m, Load: func(context.Context, plugins.LoadRequest) (plugins.Instance, error) {
		return plugins.Clients{ByKind: map[plugins.Capability]any{plugins.CapSkills: folder{fsys}}}, nil
	}}
	return dispense(t, plugins.RuntimeBuiltin, plugins.LoadRequest{ID: m.ID, Manifest: m, Builtin: b})
}

// dispense loads req on the registered runtime rt and returns its client
// of "skills"; the instance is closed when t ends.
func dispense(t *testing.T, rt plugins.Runtime, req plugins.LoadRequest) skillbundle.Source {
	t.Helper()
	ctx := context.Background()
	f, ok := plugins.LookupRuntime(rt)
	if !ok {
		t.Fatalf("no %q runtime is registered", rt)
	}
	l, err := f(plugins.RuntimeEnv{})
	if err != nil {
		t.Fatal(err)
	}
	inst, err := l.Load(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Close() })
	c, err := inst.Dispense(ctx, plugins.CapSkills)
	if err != nil {
		t.Fatal(err)
	}
	src, ok := c.(skillbundle.Source)
	if !ok {
		t.Fatalf("the %s runtime handed out %T for %q, not a skillbundle.Source", rt, c, plugins.CapSkills)
	}
	return src
}

// folder is a built-in's skills.
type folder struct{ fsys fs.FS }

func (f folder) FS() fs.FS { return f.fsys }

// embedded copies dir's folders and regular files into a MapFS.
func embedded(t *testing.T, dir string) fstest.MapFS {
	t.Helper()
	out := fstest.MapFS{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			out[name] = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[name] = &fstest.MapFile{Data: data, Mode: 0o644}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSkillsConformance(t *testing.T) {
	t.Run("data", func(t *testing.T) { Run(t, openData) })
	t.Run("builtin", func(t *testing.T) { Run(t, openBuiltin) })
}
