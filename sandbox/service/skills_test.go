package service_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/sandboxtest"
	"github.com/kilnhq/kiln/sandbox/service"
)

// mounting is a runtime that reports Capabilities.Mounts and keeps the
// specs it starts; the docker end-to-end test (cmd/kiln) shows the
// mounts in a real sandbox.
type mounting struct {
	sandbox.Runtime
	mu    sync.Mutex
	specs []sandbox.Spec
}

func (m *mounting) Capabilities() sandbox.Capabilities {
	c := m.Runtime.Capabilities()
	c.Mounts = true
	return c
}

func (m *mounting) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Handle, error) {
	m.mu.Lock()
	m.specs = append(m.specs, spec)
	m.mu.Unlock()
	mounts := spec.Mounts
	spec.Mounts = nil // the memory runtime has none
	h, err := m.Runtime.Start(ctx, spec)
	spec.Mounts = mounts
	return h, err
}

func TestStageSkill(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(t.TempDir(), "sandbox-skills")
	// What a stage cut short by a crash left goes when the service starts.
	if err := os.MkdirAll(filepath.Join(dir, ".stage-123", "scripts"), 0o700); err != nil {
		t.Fatal(err)
	}
	s := e.service(func(c *service.Config) { c.SkillsDir = dir })
	if _, err := os.Stat(filepath.Join(dir, ".stage-123")); !os.IsNotExist(err) {
		t.Errorf("a crashed stage's folder: %v", err)
	}
	rt := &mounting{Runtime: e.m.Runtime(sandboxtest.Options{Name: "mnt"})}
	if err := s.AddRuntime("mnt", rt); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e.putThread("thr_a")
	rec, _, _, err := s.ForThread(ctx, alice, "thr_a", "mnt")
	if err != nil {
		t.Fatal(err)
	}
	box := filepath.Join(dir, rec.ID)
	if len(rt.specs) != 1 || !slices.Equal(rt.specs[0].Mounts, []sandbox.Mount{{HostPath: box, Path: service.SkillsPath, ReadOnly: true}}) {
		t.Fatalf("thread sandbox specs %+v", rt.specs)
	}
	// A sandbox of the API gets no skills folder.
	api, err := s.Create(ctx, alice, service.CreateRequest{Extensions: map[string]string{service.ExtRuntime: "mnt"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.specs) != 2 || len(rt.specs[1].Mounts) != 0 {
		t.Fatalf("API sandbox spec %+v", rt.specs[1])
	}
	if err := s.StageSkill(api, "tally", os.DirFS(t.TempDir())); core.ErrorCode(err) != core.EUNAVAIL || !strings.Contains(err.Error(), "made without a skills folder") {
		t.Errorf("staging into an API sandbox: %v", err)
	}

	src := t.TempDir()
	write := func(rel, text string, perm fs.FileMode) {
		t.Helper()
		p := filepath.Join(src, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), perm); err != nil {
			t.Fatal(err)
		}
	}
	write("SKILL.md", "---\nname: tally\n---\n", 0o600)
	write("scripts/count.sh", "echo one\n", 0o700)
	write("linked.txt", "linked\n", 0o644)
	if err := os.Link(filepath.Join(src, "linked.txt"), filepath.Join(t.TempDir(), "elsewhere")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(src, "host-link")); err != nil {
		t.Fatal(err)
	}
	if err := s.StageSkill(rec, "tally", os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	staged := filepath.Join(box, "tally")
	got := map[string]fs.FileMode{}
	filepath.WalkDir(staged, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != staged {
			fi, _ := d.Info()
			rel, _ := filepath.Rel(staged, p)
			got[rel] = fi.Mode()
		}
		return nil
	})
	want := map[string]fs.FileMode{"SKILL.md": 0o644, "scripts": fs.ModeDir | 0o755, "scripts/count.sh": 0o755}
	if len(got) != len(want) {
		t.Fatalf("staged %v, want %v (no link, no file linked from elsewhere)", got, want)
	}
	for k, m := range want {
		if got[k] != m {
			t.Errorf("staged %s: mode %v, want %v", k, got[k], m)
		}
	}
	if fi, err := os.Stat(box); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the sandbox's skills folder: %v %v", fi, err)
	}

	// An unchanged skill is kept; a changed one replaced whole.
	before, _ := os.Stat(staged)
	if err := s.StageSkill(rec, "tally", os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(staged); !os.SameFile(before, after) {
		t.Error("an unchanged skill was copied again")
	}
	// While it copies, the sandbox's folder holds only the staged skill
	// (never a half-copied one); the copy is made beside it.
	write("scripts/count.sh", "echo two, changed\n", 0o700)
	var seen []string
	spy := spyFS{FS: os.DirFS(src), open: func() {
		ents, _ := os.ReadDir(box)
		for _, e := range ents {
			if e.Name() != "tally" {
				seen = append(seen, e.Name())
			}
		}
	}}
	if err := s.StageSkill(rec, "tally", spy); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 0 {
		t.Errorf("while staging, the sandbox saw %v", seen)
	}
	if b, _ := os.ReadFile(filepath.Join(staged, "scripts/count.sh")); string(b) != "echo two, changed\n" {
		t.Errorf("after a change: %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*", ".stage-*")); len(left) != 0 {
		t.Errorf("staging left %v", left)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".stage-*")); len(left) != 0 {
		t.Errorf("staging left %v", left)
	}

	big := fstest.MapFS{}
	for i := range service.MaxSkillFiles + 1 {
		big["f"+strconv.Itoa(i)] = &fstest.MapFile{Data: []byte("x")}
	}
	if err := s.StageSkill(rec, "big", big); core.ErrorCode(err) != core.ELIMIT {
		t.Errorf("a skill of too many files: %v", err)
	}
	for _, name := range []string{"", "../x", ".stage-x", "a/b"} {
		if err := s.StageSkill(rec, name, os.DirFS(src)); core.ErrorCode(err) != core.EINVALID {
			t.Errorf("StageSkill(%q): %v, want EINVALID", name, err)
		}
	}

	// A runtime without mounts says so.
	mem, _, _, err := s.ForThread(ctx, alice, "thr_a", "memory")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StageSkill(mem, "tally", os.DirFS(src)); core.ErrorCode(err) != core.EUNAVAIL || !strings.Contains(err.Error(), "the memory sandbox runtime mounts no host folders") {
		t.Errorf("staging on a runtime without mounts: %v", err)
	}

	// The folder goes with the sandbox.
	if err := s.Delete(ctx, alice, rec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(box); !os.IsNotExist(err) {
		t.Errorf("the ended sandbox's skills folder: %v", err)
	}
}

// spyFS is an fs.FS that calls open before each Open.
type spyFS struct {
	fs.FS
	open func()
}

func (f spyFS) Open(name string) (fs.File, error) {
	f.open()
	return f.FS.Open(name)
}
