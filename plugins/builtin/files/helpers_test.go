package files

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/core"
)

// memFS is an in-memory core.VirtualFS.
type memFS struct {
	mu    sync.Mutex
	files map[string][]byte
}

func newMemFS(files map[string]string) *memFS {
	m := &memFS{files: map[string][]byte{}}
	for p, s := range files {
		m.files[p] = []byte(s)
	}
	return m
}

func (m *memFS) Read(p string) (*core.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.files[p]
	if !ok {
		return nil, core.Errorf(core.ENOTFOUND, "no file %s", p)
	}
	return &core.File{Path: p, Data: slices.Clone(b), Size: len(b)}, nil
}

func (m *memFS) List() ([]*core.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*core.File
	for p, b := range m.files {
		out = append(out, &core.File{Path: p, Size: len(b)})
	}
	slices.SortFunc(out, func(a, b *core.File) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

func (m *memFS) Write(p string, data []byte) error {
	if len(data) > core.MaxFileSize {
		return core.Errorf(core.EINVALID, "over %d bytes", core.MaxFileSize)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[p] = slices.Clone(data)
	return nil
}

func (m *memFS) Delete(p string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.files[p]; !ok {
		return core.Errorf(core.ENOTFOUND, "no file %s", p)
	}
	delete(m.files, p)
	return nil
}

func (m *memFS) get(p string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.files[p]
	return string(b), ok
}

// fixture is a run's environment over real folders in a temp dir:
// the grants "proj" (writable, the working folder unless cleared) and
// "docs" (read-only), a folder "outside" that no grant covers, a memory
// folder, two attachments and some virtual files.
type fixture struct {
	env      *core.CallEnv
	vfs      *memFS
	base     string
	proj     string
	docs     string
	outside  string
	attBytes map[string][]byte
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{
		base:    base,
		proj:    filepath.Join(base, "proj"),
		docs:    filepath.Join(base, "docs"),
		outside: filepath.Join(base, "outside"),
		vfs: newMemFS(map[string]string{
			"/notes/plan.md": "step one\nstep two\n",
			"/todo.txt":      "buy milk\n",
		}),
		attBytes: map[string][]byte{
			"att_text": []byte("attached line one\nattached TODO two\n"),
			"att_png":  append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 64)...),
		},
	}
	put(t, filepath.Join(f.proj, "main.go"), "package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n")
	put(t, filepath.Join(f.proj, "src", "a.go"), "package src\n\n// TODO: tidy\nfunc A() {}\n")
	put(t, filepath.Join(f.proj, "src", "deep", "b.go"), "package deep\n\nfunc B() {} // todo later\n")
	put(t, filepath.Join(f.proj, "README.md"), "# Proj\n")
	put(t, filepath.Join(f.docs, "guide.md"), "# Guide\nread me\n")
	put(t, filepath.Join(f.outside, "secret.txt"), "TOP SECRET TODO\n")
	proj := &core.Grant{ID: "g1", Name: "proj", Path: f.proj, Writable: true}
	docs := &core.Grant{ID: "g2", Name: "docs", Path: f.docs}
	atts := []*core.Attachment{
		{ID: "att_text", Name: "notes.txt", MIME: "text/plain", Size: int64(len(f.attBytes["att_text"]))},
		{ID: "att_png", Name: "pic.png", MIME: "image/png", Size: int64(len(f.attBytes["att_png"]))},
	}
	f.env = &core.CallEnv{
		RunID: "run_1", ThreadID: "thr_1", OwnerID: "own_1",
		Grants:        []*core.Grant{proj, docs},
		WorkingFolder: proj,
		Memory:        true,
		MemoryDir:     filepath.Join(base, "data", "memories"),
		Attachments:   atts,
		OpenAttachment: func(a *core.Attachment) (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(f.attBytes[a.ID])), nil
		},
		Files: f.vfs,
	}
	return f
}

func put(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readHost(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// byName returns the tool of Tools named name.
func byName(t *testing.T, name string) core.Tool { return toolIn(t, Tools(), name) }

// toolIn returns the tool of tools named name.
func toolIn(t *testing.T, tools []core.Tool, name string) core.Tool {
	t.Helper()
	for _, tl := range tools {
		if tl.Spec().Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

// call runs a tool of Tools with env and returns its text and whether it
// failed.
func call(t *testing.T, env *core.CallEnv, name string, args any) (string, bool) {
	t.Helper()
	return callIn(t, Tools(), env, name, args)
}

// callIn is call with the tool of tools named name.
func callIn(t *testing.T, tools []core.Tool, env *core.CallEnv, name string, args any) (string, bool) {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := toolIn(t, tools, name).Call(core.WithCallEnv(context.Background(), env), raw)
	if err != nil {
		t.Fatalf("%s(%s): failure to run: %v", name, raw, err)
	}
	return res.Text(), res.IsError
}

// ok runs a tool of Tools that must succeed and returns its text.
func ok(t *testing.T, env *core.CallEnv, name string, args any) string {
	t.Helper()
	return okIn(t, Tools(), env, name, args)
}

// okIn is ok with the tool of tools named name.
func okIn(t *testing.T, tools []core.Tool, env *core.CallEnv, name string, args any) string {
	t.Helper()
	out, failed := callIn(t, tools, env, name, args)
	if failed {
		t.Fatalf("%s(%v) failed: %s", name, args, out)
	}
	return out
}

// fails runs a tool of Tools that must fail with a text containing each
// of want.
func fails(t *testing.T, env *core.CallEnv, name string, args any, want ...string) string {
	t.Helper()
	return failsIn(t, Tools(), env, name, args, want...)
}

// failsIn is fails with the tool of tools named name.
func failsIn(t *testing.T, tools []core.Tool, env *core.CallEnv, name string, args any, want ...string) string {
	t.Helper()
	out, failed := callIn(t, tools, env, name, args)
	if !failed {
		t.Errorf("%s(%v) succeeded: %s", name, args, out)
		return out
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s(%v) = %q; want it to contain %q", name, args, out, w)
		}
	}
	return out
}

// has fails the test unless s contains each of want.
func has(t *testing.T, what, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("%s = %q; want it to contain %q", what, s, w)
		}
	}
}

// hasNot fails the test if s contains any of bad.
func hasNot(t *testing.T, what, s string, bad ...string) {
	t.Helper()
	for _, b := range bad {
		if strings.Contains(s, b) {
			t.Errorf("%s = %q; want it not to contain %q", what, s, b)
		}
	}
}

type obj = map[string]any
