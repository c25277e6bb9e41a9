package wasm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
)

// userGrants is a user's folder grants as a plugins.GrantResolver sees
// them, changeable while a plugin runs.
type userGrants struct {
	mu sync.Mutex
	by map[string]core.Grant
}

func (u *userGrants) set(g core.Grant) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.by[g.Name] = g
}

func (u *userGrants) revoke(name string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.by, name)
}

func (u *userGrants) resolve(_ context.Context, name string) (*core.Grant, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	g, ok := u.by[name]
	return &g, ok
}

// TestGrantFiles runs a plugin whose manifest may read and write
// grant:projects against the user's grant "projects", checked live: it
// reads and writes while the grant is writable, is refused writing once
// the grant is read-only, is refused a planted hard link and a symlink
// out, never reaches a grant its manifest does not name, and fails once
// the grant is revoked.
func TestGrantFiles(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	projects := filepath.Join(base, "projects")
	other := filepath.Join(base, "other")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{projects, other, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "secret")
	os.WriteFile(secret, []byte("secret"), 0o644)
	os.WriteFile(filepath.Join(other, "x"), []byte("other"), 0o644)

	grants := &userGrants{by: map[string]core.Grant{}}
	grants.set(core.Grant{Name: "projects", Path: projects, Writable: true})
	grants.set(core.Grant{Name: "other", Path: other, Writable: true})
	code := plugintest.Build(t, "./testdata/fsguest", plugins.RuntimeWASM)
	dir, m := plugintest.WritePlugin(t, "fsguest", plugins.RuntimeWASM, "fsguest.wasm", code,
		`{"filesystem":[{"path":"grant:projects","read":true,"write":true}]}`)
	ts, err := newHost(t, "").Load(context.Background(), dir, m, LoadOptions{Grants: grants.resolve})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()

	refused := func(tool, args, want string) {
		t.Helper()
		got, err := call(t, ts, tool, args)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s %s = %q, %v; want an error containing %q", tool, args, got, err, want)
		} else if strings.Contains(err.Error(), base) {
			t.Errorf("%s %s: the error names a host path: %v", tool, args, err)
		}
	}

	// Writable: write (parent folders are created) and read back.
	if got, err := call(t, ts, "write", `{"path":"grant:projects/sub/a.txt","text":"hello"}`); err != nil || got != "ok" {
		t.Fatalf("write = %q, %v", got, err)
	}
	if b, _ := os.ReadFile(filepath.Join(projects, "sub", "a.txt")); string(b) != "hello" {
		t.Errorf("sub/a.txt = %q", b)
	}
	if got, err := call(t, ts, "read", `{"path":"grant:projects/sub/a.txt"}`); err != nil || got != "hello" {
		t.Errorf("read = %q, %v", got, err)
	}

	// The user makes the grant read-only: reads go on, writes are refused.
	grants.set(core.Grant{Name: "projects", Path: projects})
	refused("write", `{"path":"grant:projects/sub/a.txt","text":"changed"}`, `the user granted folder "projects" read-only`)
	if b, _ := os.ReadFile(filepath.Join(projects, "sub", "a.txt")); string(b) != "hello" {
		t.Errorf("sub/a.txt = %q after a refused write", b)
	}
	if got, err := call(t, ts, "read", `{"path":"grant:projects/sub/a.txt"}`); err != nil || got != "hello" {
		t.Errorf("read of a read-only grant = %q, %v", got, err)
	}

	// Links planted inside the folder that lead out of it.
	linked := os.Link(secret, filepath.Join(projects, "linked")) == nil
	if linked {
		refused("read", `{"path":"grant:projects/linked"}`, "has 2 hard links; Kiln refuses files linked from elsewhere")
	}
	if err := os.Symlink(outside, filepath.Join(projects, "out")); err == nil {
		refused("read", `{"path":"grant:projects/out/secret"}`, "leads out of the granted folder")
	}

	// The user has a grant "other", but the manifest does not name it.
	refused("read", `{"path":"grant:other/x"}`, "reading is not permitted by permissions.filesystem")
	refused("read", `{"path":"grant:projects/../other/x"}`, "must be clean")

	// Revoked: the next access fails.
	grants.revoke("projects")
	refused("read", `{"path":"grant:projects/sub/a.txt"}`, `the user has no folder grant "projects"`)
	grants.set(core.Grant{Name: "projects", Path: projects, Writable: true})
	if linked {
		refused("write", `{"path":"grant:projects/linked","text":"x"}`, "hard links")
	}
	if b, _ := os.ReadFile(secret); string(b) != "secret" {
		t.Errorf("the outside file = %q", b)
	}

	// Without a resolver the plugin has no grants at all.
	ts2, err := newHost(t, "").Load(context.Background(), dir, m, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ts2.Close()
	if _, err := call(t, ts2, "read", `{"path":"grant:projects/sub/a.txt"}`); err == nil || !strings.Contains(err.Error(), "no folder grant") {
		t.Errorf("read without a resolver: %v", err)
	}
}
