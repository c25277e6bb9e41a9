// Package bundletest opens a folder laid out by a data kind's
// conformance kit (skillbundletest, mcpserverstest) through each runtime
// that carries data kinds, the way the registry would, for the kits' own
// tests.
package bundletest

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/kilnhq/kiln/plugins"
)

// Data loads the bundle in dir as the registry loads an installed one,
// on the registered "data" runtime, and returns its client of kind.
func Data(t *testing.T, dir string, kind plugins.Capability) any {
	t.Helper()
	m, err := plugins.LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return Dispense(t, plugins.RuntimeData, plugins.LoadRequest{ID: m.ID, Dir: dir, Manifest: m}, kind)
}

// Builtin serves the bundle in dir as a built-in plugin would: its files
// compiled in (Embedded), the client of kind made from them by client,
// handed out through plugins.Clients by the registered "builtin" runtime.
func Builtin(t *testing.T, dir string, kind plugins.Capability, client func(fs.FS) any) any {
	t.Helper()
	m, err := plugins.LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	bm := *m
	bm.Runtime = plugins.RuntimeBuiltin
	fsys := Embedded(t, dir)
	b := &plugins.Builtin{Manifest: &bm, Load: func(context.Context, plugins.LoadRequest) (plugins.Instance, error) {
		return plugins.Clients{ByKind: map[plugins.Capability]any{kind: client(fsys)}}, nil
	}}
	return Dispense(t, plugins.RuntimeBuiltin, plugins.LoadRequest{ID: bm.ID, Manifest: &bm, Builtin: b}, kind)
}

// Dispense loads req on the registered runtime rt and returns its client
// of kind; the instance is closed when t ends.
func Dispense(t *testing.T, rt plugins.Runtime, req plugins.LoadRequest, kind plugins.Capability) any {
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
	c, err := inst.Dispense(ctx, kind)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Embedded copies dir's folders and regular files into a MapFS, leaving
// out symlinks, as go:embed does.
func Embedded(t *testing.T, dir string) fstest.MapFS {
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

// Folder is a folder of files: the client of a data kind (a
// skillbundle.Source, an mcpservers.Source).
type Folder struct{ Files fs.FS }

// FS returns the files.
func (f Folder) FS() fs.FS { return f.Files }
