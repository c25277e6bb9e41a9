package skills_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/kilnhq/kiln/plugins/skillbundle"
	"github.com/kilnhq/kiln/skills"
)

// Interface guard: the catalog is the server's skills host.
var _ skillbundle.Host = (*skills.Catalog)(nil)

func skillMD(name, desc string, extra ...string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\n" + strings.Join(extra, "\n") + "---\n# " + name + "\n\nDo it.\n"
}

func writeSkill(t testing.TB, dir, name, src string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name, skills.File), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

func bundle(skillsByName map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for name, src := range skillsByName {
		m["skills/"+name+"/SKILL.md"] = &fstest.MapFile{Data: []byte(src)}
	}
	return m
}

func TestCatalogPrecedence(t *testing.T) {
	dir := t.TempDir()
	builtin := fstest.MapFS{
		"shared/SKILL.md":       {Data: []byte(skillMD("shared", "builtin shared"))},
		"only-builtin/SKILL.md": {Data: []byte(skillMD("only-builtin", "builtin only"))},
		"plugged/SKILL.md":      {Data: []byte(skillMD("plugged", "builtin plugged"))},
	}
	writeSkill(t, dir, "shared", skillMD("shared", "custom shared"))
	c, err := skills.NewCatalog(dir, builtin)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddSkills("acme", bundle(map[string]string{
		"shared":  skillMD("shared", "acme shared"),
		"plugged": skillMD("plugged", "acme plugged"),
	}), []string{"shared", "plugged"}); err != nil {
		t.Fatal(err)
	}
	if err := c.AddSkills("zeta", bundle(map[string]string{"plugged": skillMD("plugged", "zeta plugged")}), []string{"plugged"}); err != nil {
		t.Fatal(err)
	}
	custom := skills.Layer{Origin: skills.OriginCustom}
	builtinL := skills.Layer{Origin: skills.OriginBuiltin}
	acme := skills.Layer{Origin: skills.OriginPlugin, Source: "acme"}
	zeta := skills.Layer{Origin: skills.OriginPlugin, Source: "zeta"}

	type want struct {
		desc    string
		layer   skills.Layer
		shadows []skills.Layer
	}
	check := func(t *testing.T, wants map[string]want) {
		t.Helper()
		got := c.List()
		if len(got) != len(wants) {
			t.Fatalf("List has %d entries; want %d", len(got), len(wants))
		}
		for _, e := range got {
			w, ok := wants[e.Name]
			if !ok {
				t.Errorf("unexpected entry %q", e.Name)
				continue
			}
			if e.Description != w.desc || e.Layer != w.layer || !slices.Equal(e.Shadows, w.shadows) {
				t.Errorf("%s: got %q from %v shadowing %v; want %q from %v shadowing %v", e.Name, e.Description, e.Layer, e.Shadows, w.desc, w.layer, w.shadows)
			}
		}
	}
	steps := []struct {
		name   string
		change func(t *testing.T)
		want   map[string]want
	}{
		{"custom over plugin over builtin", func(*testing.T) {}, map[string]want{
			"shared":       {"custom shared", custom, []skills.Layer{acme, builtinL}},
			"plugged":      {"acme plugged", acme, []skills.Layer{zeta, builtinL}},
			"only-builtin": {"builtin only", builtinL, nil},
		}},
		{"removing the custom skill reveals the plugin's", func(t *testing.T) {
			if err := os.RemoveAll(filepath.Join(dir, "shared")); err != nil {
				t.Fatal(err)
			}
			if err := c.Reload(); err != nil {
				t.Fatal(err)
			}
		}, map[string]want{
			"shared":       {"acme shared", acme, []skills.Layer{builtinL}},
			"plugged":      {"acme plugged", acme, []skills.Layer{zeta, builtinL}},
			"only-builtin": {"builtin only", builtinL, nil},
		}},
		{"removing a plugin reveals the next one and the built-in", func(*testing.T) { c.RemoveSkills("acme") }, map[string]want{
			"shared":       {"builtin shared", builtinL, nil},
			"plugged":      {"zeta plugged", zeta, []skills.Layer{builtinL}},
			"only-builtin": {"builtin only", builtinL, nil},
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.change(t)
			check(t, st.want)
		})
	}
}

func TestCatalogReload(t *testing.T) {
	dir := t.TempDir()
	c, err := skills.NewCatalog(filepath.Join(dir, "skills"), nil)
	if err != nil {
		t.Fatalf("a missing folder holds no skills: %v", err)
	}
	dir = filepath.Join(dir, "skills")
	names := func() []string {
		var out []string
		for _, e := range c.List() {
			out = append(out, e.Name+"="+e.Description)
		}
		return out
	}
	// bump gives each write its own modification time, so the test does
	// not depend on the filesystem's timestamp resolution.
	stamp := time.Now().Add(-time.Hour)
	bump := func(t *testing.T, name string) {
		stamp = stamp.Add(time.Second)
		if err := os.Chtimes(filepath.Join(dir, name, skills.File), stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name string
		do   func(t *testing.T)
		want []string
	}{
		{"add", func(t *testing.T) {
			writeSkill(t, dir, "alpha", skillMD("alpha", "one"))
			bump(t, "alpha")
			writeSkill(t, dir, "beta", skillMD("beta", "two"))
			bump(t, "beta")
		}, []string{"alpha=one", "beta=two"}},
		{"edit", func(t *testing.T) {
			writeSkill(t, dir, "alpha", skillMD("alpha", "uno"))
			bump(t, "alpha")
		}, []string{"alpha=uno", "beta=two"}},
		{"unchanged file is not reparsed", func(t *testing.T) {
			// Same size and time, different content: Reload keeps the old parse.
			f := filepath.Join(dir, "beta", skills.File)
			fi, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			writeSkill(t, dir, "beta", skillMD("beta", "TWO"))
			if err := os.Chtimes(f, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		}, []string{"alpha=uno", "beta=two"}},
		{"delete", func(t *testing.T) {
			if err := os.RemoveAll(filepath.Join(dir, "alpha")); err != nil {
				t.Fatal(err)
			}
		}, []string{"beta=two"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.do(t)
			if err := c.Reload(); err != nil {
				t.Fatal(err)
			}
			if got := names(); !slices.Equal(got, st.want) {
				t.Errorf("got %v; want %v", got, st.want)
			}
		})
	}
}

func TestCatalogWatch(t *testing.T) {
	dir := t.TempDir()
	c, err := skills.NewCatalog(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Watch(ctx, 5*time.Millisecond, nil) }()
	writeSkill(t, dir, "late", skillMD("late", "arrives later"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := c.Get("late"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Watch did not pick up the new skill")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Watch returned %v; want context.Canceled", err)
	}
}

func TestCatalogSkipsMalformed(t *testing.T) {
	dir := t.TempDir()
	writeSkill(t, dir, "good", skillMD("good", "fine"))
	writeSkill(t, dir, "broken", "---\nname: broken\ndescription: d\ntools: [mcp:x]\n---\nBody.\n")
	builtin := fstest.MapFS{"broken/SKILL.md": {Data: []byte(skillMD("broken", "the built-in one"))}}
	c, err := skills.NewCatalog(dir, builtin)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddSkills("acme", bundle(map[string]string{"bad-plug": "no frontmatter\n"}), []string{"bad-plug"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range c.List() {
		got = append(got, fmt.Sprintf("%s/%s", e.Name, e.Origin))
	}
	if want := []string{"broken/builtin", "good/custom"}; !slices.Equal(got, want) {
		t.Errorf("List = %v; want %v", got, want)
	}
	probs := c.Problems()
	if len(probs) != 2 {
		t.Fatalf("Problems = %+v; want 2", probs)
	}
	p := probs[1]
	if p.Name != "broken" || p.Origin != skills.OriginCustom || p.Err.Line != 4 || p.Err.File != filepath.Join(dir, "broken", "SKILL.md") || !strings.Contains(p.Err.Reason, "tool reference") {
		t.Errorf("custom problem = %+v %+v", p, p.Err)
	}
	p = probs[0]
	if p.Name != "bad-plug" || p.Source != "acme" || p.Err.Line != 1 || p.Err.File != "skills/bad-plug/SKILL.md" {
		t.Errorf("plugin problem = %+v %+v", p, p.Err)
	}
	if err := c.AddSkills("acme", bundle(nil), []string{"Bad"}); err == nil {
		t.Error("AddSkills took a bad name")
	}
}

func TestEntryFiles(t *testing.T) {
	c, err := skills.NewCatalog("testdata/parse", nil)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := c.Get("pdf-processing")
	if !ok {
		t.Fatalf("no pdf-processing; problems %+v", c.Problems())
	}
	files, err := e.Files()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"references/FORMS.md", "scripts/extract.py", "scripts/fill_form.py"}
	if !slices.Equal(files, want) {
		t.Errorf("Files = %v; want %v", files, want)
	}
	if b, err := fs.ReadFile(e.FS(), "scripts/extract.py"); err != nil || !strings.Contains(string(b), "extract") {
		t.Errorf("read through FS: %q, %v", b, err)
	}
	if len(c.Problems()) == 0 {
		t.Error("the broken inputs should be problems")
	}
}

func TestReady(t *testing.T) {
	s := &skills.Skill{Name: "r", Description: "d", Tools: []string{"echo", "mcp.orders.*", "calc.add"}}
	tests := []struct {
		name   string
		tools  []string
		ready  bool
		reason string
	}{
		{"all there", []string{"echo", "calc.add", "mcp.orders.place_order"}, true, ""},
		{"explicit missing", []string{"echo", "mcp.orders.place_order"}, false, "missing tools: calc.add"},
		{"wildcard unmatched", []string{"echo", "calc.add", "mcp.other.x"}, false, "no tool matches: mcp.orders.*"},
		{"both", nil, false, "missing tools: echo, calc.add; no tool matches: mcp.orders.*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready, reason := s.Ready(tt.tools)
			if ready != tt.ready || reason != tt.reason {
				t.Errorf("Ready = %v, %q; want %v, %q", ready, reason, tt.ready, tt.reason)
			}
		})
	}
	if ok, _ := (&skills.Skill{Name: "none"}).Ready(nil); !ok {
		t.Error("a skill without tools is ready")
	}
}

// BenchmarkCatalogLoad500 loads 500 custom skills from a folder.
func BenchmarkCatalogLoad500(b *testing.B) {
	dir := b.TempDir()
	for i := range 500 {
		name := fmt.Sprintf("skill-%03d", i)
		writeSkill(b, dir, name, skillMD(name, "Benchmark skill number "+name+". Use it when benchmarking.",
			"tools: [echo, \"mcp:orders:*\"]", "metadata:\n  author: bench\n"))
	}
	b.ResetTimer()
	for b.Loop() {
		c, err := skills.NewCatalog(dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		if n := len(c.List()); n != 500 {
			b.Fatalf("loaded %d skills", n)
		}
	}
}
