package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/integrity"
	"github.com/kilnhq/kiln/plugins/pluginapi"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/registry"
)

// calcVersion lays out calc for rt at version v with perms.
func calcVersion(t *testing.T, id string, rt plugins.Runtime, v, perms string) (string, *plugins.Manifest) {
	t.Helper()
	dir, _ := plugintest.CalcPlugin(t, id, rt, perms)
	setVersion(t, dir, v)
	m, err := plugins.LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// runsFrom checks that plugin id is enabled, loaded from its folder of
// version v, that its add tool answers, and for a process plugin that the
// process runs that version's executable.
func runsFrom(t *testing.T, e *env, r *registry.Registry, id, v string) registry.Info {
	t.Helper()
	in, err := r.Get(context.Background(), id)
	want := filepath.Join(e.data, "plugins", id, v)
	if err != nil || in.Status != registry.StatusEnabled || in.Version != v || in.Dir != want {
		t.Fatalf("%s: %+v, %v; want %s enabled from %s", id, in, err, v, want)
	}
	if out, err := e.host.call(t, id, "add", `{"a":2,"b":3}`); err != nil || out != "5" {
		t.Fatalf("%s.add on %s = %q, %v", id, v, out, err)
	}
	if in.Runtime == string(plugins.RuntimeProcess) {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", in.PID))
		if err != nil || exe != filepath.Join(want, "calc") {
			t.Fatalf("%s's process (pid %d) runs %q, %v; want %s", id, in.PID, exe, err, filepath.Join(want, "calc"))
		}
	}
	return in
}

// TestRollback: an upgrade keeps the version it replaces; a rollback runs
// it again, with its own consent, and a second rollback rolls forward.
// The choice survives a restart.
func TestRollback(t *testing.T) {
	for _, rt := range []plugins.Runtime{plugins.RuntimeProcess, plugins.RuntimeWASM} {
		t.Run(string(rt), func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t)
			r := e.open(t)
			v1, m1 := calcVersion(t, "calc", rt, "1.0.0", `{"timeout_ms":1000}`)
			v2, m2 := calcVersion(t, "calc", rt, "1.1.0", `{"timeout_ms":2000}`)
			install(t, r, v1)
			in := install(t, r, v2)
			if in.Previous != "1.0.0" || in.Pinned != "" {
				t.Errorf("after the upgrade: %+v", in)
			}
			runsFrom(t, e, r, "calc", "1.1.0")

			in, err := r.Rollback(ctx, "calc")
			if err != nil {
				t.Fatal(err)
			}
			in = runsFrom(t, e, r, "calc", "1.0.0")
			if in.Previous != "1.1.0" || !slices.Equal(in.Permissions, m1.ConsentSummary()) || in.SHA256 != m1.SHA256 {
				t.Errorf("rolled back: %+v; want 1.0.0's consent %q and sha256", in, m1.ConsentSummary())
			}
			r = e.reopen(t, r)
			runsFrom(t, e, r, "calc", "1.0.0")

			if _, err := r.Rollback(ctx, "calc"); err != nil {
				t.Fatal(err)
			}
			in = runsFrom(t, e, r, "calc", "1.1.0")
			if in.Previous != "1.0.0" || !slices.Equal(in.Permissions, m2.ConsentSummary()) {
				t.Errorf("rolled forward: %+v", in)
			}

			// A disabled plugin rolls back disabled.
			if _, err := r.Disable(ctx, "calc"); err != nil {
				t.Fatal(err)
			}
			if in, err = r.Rollback(ctx, "calc"); err != nil || in.Version != "1.0.0" || in.Status != registry.StatusDisabled || e.host.has("calc") {
				t.Errorf("rollback of a disabled plugin: %+v, %v", in, err)
			}

			// rm deletes every version kept.
			if err := r.Remove(ctx, "calc"); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(e.data, "plugins", "calc")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("after rm: %v", err)
			}
		})
	}
}

// TestRollbackRefusals: nothing to roll back to, an unknown plugin, a
// built-in, and a previous version whose folder changed since it was
// installed are refused, and the current version keeps running with its
// record untouched.
func TestRollbackRefusals(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.bi = []plugins.Builtin{calcBuiltin(t, "util")}
	r := e.open(t)
	v1, _ := calcVersion(t, "calc", plugins.RuntimeProcess, "1.0.0", "")
	install(t, r, v1)
	_, err := r.Rollback(ctx, "calc")
	wantCode(t, "rollback after one install", err, core.ECONFLICT, "calc 1.0.0 has no previous version to roll back to")
	_, err = r.Rollback(ctx, "nope")
	wantCode(t, "rollback of an unknown plugin", err, core.ENOTFOUND, `plugin "nope" is not installed`)
	_, err = r.Rollback(ctx, "util")
	wantCode(t, "rollback of a built-in", err, core.EINVALID, "built in")

	v2, _ := calcVersion(t, "calc", plugins.RuntimeProcess, "1.1.0", "")
	install(t, r, v2)
	prev := filepath.Join(e.data, "plugins", "calc", "1.0.0")
	record := filepath.Join(e.data, "plugins", "registry.json")
	for _, c := range []struct {
		name   string
		tamper func() (undo func())
		text   string
	}{
		{"a file added", func() func() {
			p := filepath.Join(prev, "extra.sh")
			os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755)
			return func() { os.Remove(p) }
		}, "its folder changed since it was installed"},
		{"the binary changed", func() func() {
			p := filepath.Join(prev, "calc")
			data, _ := os.ReadFile(p)
			os.WriteFile(p, append(slices.Clone(data), 0), 0o755)
			return func() { os.WriteFile(p, data, 0o755) }
		}, "its folder changed since it was installed"},
		{"the folder is gone", func() func() {
			os.Rename(prev, prev+".away")
			return func() { os.Rename(prev+".away", prev) }
		}, "no such file or directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, _ := os.ReadFile(record)
			undo := c.tamper()
			defer undo()
			_, err := r.Rollback(ctx, "calc")
			wantCode(t, "rollback to a tampered version", err, core.ECONFLICT, c.text)
			if err != nil && !strings.Contains(err.Error(), "calc cannot roll back to 1.0.0") || err != nil && !strings.Contains(err.Error(), "1.1.0 stays installed") {
				t.Errorf("refusal %q does not say what was refused and what stays", err)
			}
			in := runsFrom(t, e, r, "calc", "1.1.0")
			if in.Previous != "1.0.0" {
				t.Errorf("after the refusal: %+v", in)
			}
			if after, _ := os.ReadFile(record); !bytes.Equal(before, after) {
				t.Errorf("the refused rollback changed registry.json:\n%s\nto\n%s", before, after)
			}
		})
	}
	// Undone, the rollback goes through.
	if _, err := r.Rollback(ctx, "calc"); err != nil {
		t.Fatal(err)
	}
	runsFrom(t, e, r, "calc", "1.0.0")
}

// TestRollbackOfABundleNamesTheFileChanged: a data-only bundle's
// previous version whose file changed is refused with the file named.
func TestRollbackOfABundleNamesTheFileChanged(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r := e.open(t)
	install(t, r, writeBundle(t, "team.review"))
	install(t, r, setVersion(t, writeBundle(t, "team.review"), "1.1.0"))
	os.WriteFile(filepath.Join(e.data, "plugins", "team.review", "1.0.0", "skills", "triage", "SKILL.md"), []byte("---\nname: triage\ndescription: x\n---\n"), 0o644)
	_, err := r.Rollback(ctx, "team.review")
	wantCode(t, "rollback to a changed bundle", err, core.ECONFLICT, "skills/triage/SKILL.md changed")
	if in, _ := r.Get(ctx, "team.review"); in.Version != "1.1.0" || in.Status != registry.StatusEnabled {
		t.Errorf("after the refusal: %+v", in)
	}
}

// brokenVersion is a process plugin calc at version v whose program
// exits at once: it installs, and fails to start.
func brokenVersion(t *testing.T, v string) string {
	dir, _ := plugintest.WritePlugin(t, "calc", plugins.RuntimeProcess, "calc", []byte("#!/bin/sh\nexit 1\n"), "")
	return setVersion(t, dir, v)
}

// TestFailedStartSwitchesBack: when the version switched to does not
// start, the version that was running runs again and the record is as it
// was, after a rollback and after an upgrade.
func TestFailedStartSwitchesBack(t *testing.T) {
	ctx := context.Background()
	t.Run("rollback", func(t *testing.T) {
		e := newEnv(t)
		r := e.open(t)
		if _, err := r.Install(ctx, registry.InstallRequest{Path: brokenVersion(t, "1.0.0"), Consent: true}); core.ErrorCode(err) != core.EUNAVAIL {
			t.Fatalf("install of a broken plugin: %v", err)
		}
		v2, _ := calcVersion(t, "calc", plugins.RuntimeProcess, "1.1.0", "")
		install(t, r, v2)
		runsFrom(t, e, r, "calc", "1.1.0")
		in, err := r.Rollback(ctx, "calc")
		wantCode(t, "rollback to a version that does not start", err, core.EUNAVAIL, "calc 1.0.0 failed to start")
		wantCode(t, "rollback to a version that does not start", err, core.EUNAVAIL, "1.1.0 is running again")
		if in.Version != "1.1.0" || in.Status != registry.StatusEnabled {
			t.Errorf("rollback answered %+v", in)
		}
		in = runsFrom(t, e, r, "calc", "1.1.0")
		if in.Previous != "1.0.0" {
			t.Errorf("after the failed rollback: %+v", in)
		}
		r = e.reopen(t, r)
		runsFrom(t, e, r, "calc", "1.1.0")
	})
	t.Run("upgrade", func(t *testing.T) {
		e := newEnv(t)
		r := e.open(t)
		v1, _ := calcVersion(t, "calc", plugins.RuntimeProcess, "1.0.0", "")
		install(t, r, v1)
		in, err := r.Install(ctx, registry.InstallRequest{Path: brokenVersion(t, "1.1.0"), Consent: true})
		wantCode(t, "upgrade to a version that does not start", err, core.EUNAVAIL, "calc 1.1.0 failed to start")
		wantCode(t, "upgrade to a version that does not start", err, core.EUNAVAIL, "1.0.0 is running again")
		if in.Version != "1.0.0" {
			t.Errorf("upgrade answered %+v", in)
		}
		in = runsFrom(t, e, r, "calc", "1.0.0")
		if in.Previous != "" {
			t.Errorf("after the failed upgrade: %+v", in)
		}
		if _, err := os.Stat(filepath.Join(e.data, "plugins", "calc", "1.1.0")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the version that did not start is left behind: %v", err)
		}
	})
}

// TestDowngrade: an older version is refused without AllowDowngrade, and
// the preview says it is one.
func TestDowngrade(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r := e.open(t)
	v12, _ := calcVersion(t, "calc", plugins.RuntimeWASM, "1.2.0", "")
	install(t, r, v12)
	for _, v := range []string{"1.1.9", "1.2.0-rc.1", "0.9.0"} {
		dir, _ := calcVersion(t, "calc", plugins.RuntimeWASM, v, "")
		p, err := r.Preview(ctx, dir)
		if err != nil || !p.Downgrade || p.Installed != "1.2.0" {
			t.Errorf("preview of %s: %+v, %v", v, p, err)
		}
		_, err = r.Install(ctx, registry.InstallRequest{Path: dir, Consent: true})
		wantCode(t, "downgrade to "+v, err, core.ECONFLICT, "plugin calc "+v+" is older than the installed 1.2.0; use --allow-downgrade")
		if _, err := os.Stat(filepath.Join(e.data, "plugins", "calc", v)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the refused downgrade to %s left its folder: %v", v, err)
		}
	}
	runsFrom(t, e, r, "calc", "1.2.0")
	newer, _ := calcVersion(t, "calc", plugins.RuntimeWASM, "1.10.0", "")
	if p, _ := r.Preview(ctx, newer); p.Downgrade {
		t.Errorf("1.10.0 previews as a downgrade from 1.2.0")
	}

	dir, _ := calcVersion(t, "calc", plugins.RuntimeWASM, "1.1.9", "")
	in, err := r.Install(ctx, registry.InstallRequest{Path: dir, Consent: true, AllowDowngrade: true})
	if err != nil || in.Version != "1.1.9" || in.Previous != "1.2.0" {
		t.Fatalf("downgrade allowed: %+v, %v", in, err)
	}
	runsFrom(t, e, r, "calc", "1.1.9")
}

// TestReinstallThePreviousVersion: installing again the version kept as
// the previous one replaces its folder; a failure on the way puts the
// kept folder back.
func TestReinstallThePreviousVersion(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r := e.open(t)
	v1, _ := calcVersion(t, "calc", plugins.RuntimeWASM, "1.0.0", "")
	v2, _ := calcVersion(t, "calc", plugins.RuntimeWASM, "1.1.0", "")
	install(t, r, v1)
	install(t, r, v2)
	kept := filepath.Join(e.data, "plugins", "calc", "1.0.0")
	t1, _ := integrity.Tree(kept)

	// The same version with other bytes, from a marketplace whose digest
	// does not match: refused, and the kept folder is as it was.
	again, _ := calcVersion(t, "calc", plugins.RuntimeWASM, "1.0.0", `{"timeout_ms":1500}`)
	src := &pluginapi.Source{Marketplace: "example", Version: "1.0.0", ArchiveSHA256: strings.Repeat("a", 64), Digest: strings.Repeat("b", 64)}
	_, err := r.Install(ctx, registry.InstallRequest{Path: again, Consent: true, AllowDowngrade: true, Source: src})
	wantCode(t, "a folder that is not the marketplace's", err, core.ECONFLICT, "but marketplace example published "+strings.Repeat("b", 64)+"; refused")
	if t2, err := integrity.Tree(kept); err != nil || t2.Digest != t1.Digest {
		t.Fatalf("the kept version after a refused reinstall: %v", err)
	}
	if in, err := r.Rollback(ctx, "calc"); err != nil || in.Version != "1.0.0" {
		t.Fatalf("rollback after the refusal: %+v, %v", in, err)
	}
	if _, err := r.Rollback(ctx, "calc"); err != nil {
		t.Fatal(err)
	}

	t2, _ := integrity.Tree(again)
	src.Digest = t2.Digest
	in, err := r.Install(ctx, registry.InstallRequest{Path: again, Consent: true, AllowDowngrade: true, Source: src})
	if err != nil || in.Version != "1.0.0" || in.Previous != "1.1.0" || in.Digest != t2.Digest || in.Source == nil || *in.Source != *src {
		t.Fatalf("reinstall of the previous version: %+v, %v", in, err)
	}
	runsFrom(t, e, r, "calc", "1.0.0")
	if left, _ := filepath.Glob(filepath.Join(e.data, "plugins", "calc", ".install-*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestUpgradeChanges: the preview of another version lists the files
// that differ from the installed one.
func TestUpgradeChanges(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r := e.open(t)
	src := writeBundle(t, "team.review")
	if p, _ := r.Preview(ctx, src); p.Changes != nil {
		t.Errorf("the preview of a new plugin has changes %+v", p.Changes)
	}
	install(t, r, src)
	next := setVersion(t, writeBundle(t, "team.review"), "1.1.0")
	os.WriteFile(filepath.Join(next, "skills", "review", "SKILL.md"), []byte("---\nname: review\ndescription: Reviews a change well.\n---\nRead the diff.\n"), 0o644)
	os.MkdirAll(filepath.Join(next, "skills", "plan"), 0o755)
	os.WriteFile(filepath.Join(next, "skills", "plan", "SKILL.md"), []byte("---\nname: plan\ndescription: Plans.\n---\nPlan.\n"), 0o644)
	os.WriteFile(filepath.Join(next, "skills", "a.md"), []byte("a"), 0o644)
	os.Remove(filepath.Join(next, "skills", "review", "references", "style.md"))
	p, err := r.Preview(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	want := &pluginapi.Changes{
		Added:   []string{"skills/a.md", "skills/plan/SKILL.md"},
		Removed: []string{"skills/review/references/style.md"},
		Changed: []string{plugins.ManifestFile, "skills/review/SKILL.md"},
		Summary: "2 files changed, 2 added, 1 removed",
	}
	if p.Installed != "1.0.0" || p.Downgrade || fmt.Sprint(p.Changes) != fmt.Sprint(want) {
		t.Errorf("changes %+v, want %+v", p.Changes, want)
	}

	// A plugin that runs code: only its manifest differs here.
	v1, _ := calcVersion(t, "calc", plugins.RuntimeWASM, "1.0.0", "")
	install(t, r, v1)
	v2, _ := calcVersion(t, "calc", plugins.RuntimeWASM, "1.1.0", "")
	p, err = r.Preview(ctx, v2)
	if err != nil || p.Changes == nil || p.Changes.Summary != "1 file changed" || !slices.Equal(p.Changes.Changed, []string{plugins.ManifestFile}) ||
		len(p.Changes.Added) != 0 || len(p.Changes.Removed) != 0 {
		t.Errorf("changes of calc: %+v, %v", p.Changes, err)
	}
	data, _ := json.Marshal(p.Changes)
	if !strings.Contains(string(data), `"added":[]`) {
		t.Errorf("empty lists are not empty arrays in JSON: %s", data)
	}
}

// TestPin: a pinned plugin is held at its version: another version and a
// rollback are refused until it is unpinned.
func TestPin(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.bi = []plugins.Builtin{calcBuiltin(t, "util")}
	r := e.open(t)
	v1, _ := calcVersion(t, "calc", plugins.RuntimeWASM, "1.0.0", "")
	v2, _ := calcVersion(t, "calc", plugins.RuntimeWASM, "1.1.0", "")
	v3, _ := calcVersion(t, "calc", plugins.RuntimeWASM, "1.2.0", "")
	install(t, r, v1)
	install(t, r, v2)
	for _, c := range []struct {
		id, version, code, text string
	}{
		{"calc", "1.0.0", core.ECONFLICT, "plugin calc is at 1.1.0, not 1.0.0: install 1.0.0 first, then pin it"},
		{"calc", "v1.1.0", core.EINVALID, `version "v1.1.0" is not a semantic version`},
		{"calc", "1.1", core.EINVALID, "not a semantic version"},
		{"nope", "1.0.0", core.ENOTFOUND, "not installed"},
		{"util", "1.0.0", core.EINVALID, "built in"},
	} {
		_, err := r.Pin(ctx, c.id, c.version)
		wantCode(t, "pin "+c.id+"@"+c.version, err, c.code, c.text)
	}
	in, err := r.Pin(ctx, "calc", "1.1.0")
	if err != nil || in.Pinned != "1.1.0" {
		t.Fatalf("pin: %+v, %v", in, err)
	}
	if p, err := r.Preview(ctx, v3); err != nil || p.Pinned != "1.1.0" {
		t.Errorf("preview of another version of a pinned plugin: %+v, %v", p, err)
	}
	_, err = r.Install(ctx, registry.InstallRequest{Path: v3, Consent: true})
	wantCode(t, "upgrade of a pinned plugin", err, core.ECONFLICT, "plugin calc is pinned at 1.1.0, so installing 1.2.0 is refused; unpin it first (kiln plugin unpin calc)")
	_, err = r.Rollback(ctx, "calc")
	wantCode(t, "rollback of a pinned plugin", err, core.ECONFLICT, "so rolling back to 1.0.0 is refused")
	r = e.reopen(t, r)
	runsFrom(t, e, r, "calc", "1.1.0")
	if in, _ := r.Get(ctx, "calc"); in.Pinned != "1.1.0" {
		t.Errorf("after a restart: %+v", in)
	}
	if in, err = r.Pin(ctx, "calc", ""); err != nil || in.Pinned != "" {
		t.Fatalf("unpin: %+v, %v", in, err)
	}
	if in, err = r.Pin(ctx, "calc", ""); err != nil || in.Pinned != "" {
		t.Fatalf("unpin twice: %+v, %v", in, err)
	}
	if in := install(t, r, v3); in.Version != "1.2.0" {
		t.Errorf("upgrade after unpin: %+v", in)
	}
}

// TestSource: what a marketplace says about a folder is checked and
// recorded.
func TestSource(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r := e.open(t)
	dir, _ := calcVersion(t, "calc", plugins.RuntimeWASM, "1.0.0", "")
	tree, _ := integrity.Tree(dir)
	good := pluginapi.Source{Marketplace: "example", Version: "1.0.0", ArchiveSHA256: strings.Repeat("a", 64), Digest: tree.Digest, IndexVersion: 7}
	for _, c := range []struct {
		name string
		edit func(*pluginapi.Source)
		code string
		text string
	}{
		{"no marketplace", func(s *pluginapi.Source) { s.Marketplace = "" }, core.EINVALID, "source: the marketplace's name is missing"},
		{"another version", func(s *pluginapi.Source) { s.Version = "1.0.1" }, core.EINVALID, `the marketplace published version "1.0.1", the folder holds 1.0.0`},
		{"bad archive sum", func(s *pluginapi.Source) { s.ArchiveSHA256 = "AB" }, core.EINVALID, "archive_sha256 must be 64 lowercase hex digits"},
		{"bad digest", func(s *pluginapi.Source) { s.Digest = "" }, core.EINVALID, "digest must be 64 lowercase hex digits"},
		{"bad commit", func(s *pluginapi.Source) { s.Commit = "main" }, core.EINVALID, "commit must be a git commit id"},
		{"another digest", func(s *pluginapi.Source) { s.Digest = strings.Repeat("0", 64) }, core.ECONFLICT, "its folder's digest is " + tree.Digest},
	} {
		s := good
		c.edit(&s)
		_, err := r.Install(ctx, registry.InstallRequest{Path: dir, Consent: true, Source: &s})
		wantCode(t, c.name, err, c.code, c.text)
	}
	if list := r.List(ctx); len(list) != 0 {
		t.Fatalf("refused installs left %+v", list)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.data, "plugins")); slices.ContainsFunc(ents, func(d os.DirEntry) bool { return d.IsDir() }) {
		t.Errorf("refused installs left %v", ents)
	}
	in, err := r.Install(ctx, registry.InstallRequest{Path: dir, Consent: true, Source: &good})
	if err != nil || in.Source == nil || *in.Source != good || in.Digest != tree.Digest {
		t.Fatalf("install from a marketplace: %+v, %v", in, err)
	}
	r = e.reopen(t, r)
	if in, _ := r.Get(ctx, "calc"); in.Source == nil || *in.Source != good {
		t.Errorf("source after a restart: %+v", in.Source)
	}
}

// TestLockFile: the lock file lists every installed plugin, sorted, with
// its sums, pin and source, in the same bytes for the same installation,
// and follows every change.
func TestLockFile(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.bi = []plugins.Builtin{calcBuiltin(t, "util")}
	lockPath := filepath.Join(e.data, "plugins.lock")
	open := func() *registry.Registry {
		cfg := e.config()
		cfg.LockFile = lockPath
		r, err := registry.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	r := open()
	lock := func() string {
		t.Helper()
		data, err := os.ReadFile(lockPath)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pluginapi.ParseLock(data); err != nil {
			t.Errorf("the lock file written does not parse: %v", err)
		}
		return string(data)
	}
	if got := lock(); got != "{\n  \"version\": 1,\n  \"plugins\": []\n}\n" {
		t.Errorf("lock file of no plugins:\n%s", got)
	}

	calc, cm := calcVersion(t, "calc", plugins.RuntimeProcess, "1.0.0", "")
	ct, _ := integrity.Tree(calc)
	bundle := writeBundle(t, "team.review")
	bt, _ := integrity.Tree(bundle)
	install(t, r, calc)
	if _, err := r.Install(ctx, registry.InstallRequest{Path: bundle, Consent: true, Source: &pluginapi.Source{
		Marketplace: "example", Version: "1.0.0", ArchiveSHA256: strings.Repeat("e", 64), Digest: bt.Digest, IndexVersion: 12,
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Pin(ctx, "calc", "1.0.0"); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`{
  "version": 1,
  "plugins": [
    {
      "id": "calc",
      "version": "1.0.0",
      "runtime": "process",
      "sha256": "%s",
      "digest": "%s",
      "pinned": true
    },
    {
      "id": "team.review",
      "version": "1.0.0",
      "runtime": "data",
      "sha256": "%s",
      "digest": "%s",
      "pinned": false,
      "source": {
        "marketplace": "example",
        "archive_sha256": "%s",
        "index_version": 12
      }
    }
  ]
}
`, cm.SHA256, ct.Digest, bt.Digest, bt.Digest, strings.Repeat("e", 64))
	if got := lock(); got != want {
		t.Errorf("lock file:\n%s\nwant\n%s", got, want)
	}
	// Disabling changes nothing the lock file says; a restart neither.
	fi, _ := os.Stat(lockPath)
	if _, err := r.Disable(ctx, "calc"); err != nil {
		t.Fatal(err)
	}
	r.Close()
	r = open()
	if got := lock(); got != want {
		t.Errorf("lock file after disable and restart:\n%s", got)
	}
	if fi2, _ := os.Stat(lockPath); !os.SameFile(fi, fi2) {
		t.Error("the lock file was rewritten though it said the same")
	}
	// A lock file that is out of step with the record (say, edited by
	// hand) is written again at start.
	os.WriteFile(lockPath, []byte("{}"), 0o644)
	r.Close()
	r = open()
	if got := lock(); got != want {
		t.Errorf("lock file after it was edited and the server restarted:\n%s", got)
	}
	if err := r.Remove(ctx, "calc"); err != nil {
		t.Fatal(err)
	}
	if got := lock(); strings.Contains(got, `"calc"`) || !strings.Contains(got, `"team.review"`) {
		t.Errorf("lock file after rm calc:\n%s", got)
	}
}

// TestMigrateV2 opens a registry.json of version 2, which had no folder
// digests: each installed plugin gets its folder's digest, the plugins
// keep working, and the old file is kept.
func TestMigrateV2(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r := e.open(t)
	a, am := calcVersion(t, "alpha", plugins.RuntimeWASM, "1.0.0", `{"network":["api.example.com"]}`)
	ina := install(t, r, a)
	inb := install(t, r, writeBundle(t, "team.review"))
	r.Close()
	consent, _ := json.Marshal(plugins.ConsentOf(am))
	bundleManifest, _ := plugins.LoadManifest(inb.Dir)
	bconsent, _ := json.Marshal(plugins.ConsentOf(bundleManifest))
	msum, _ := integrity.FileSum(ina.Dir, plugins.ManifestFile)
	// What a Kiln of state version 2 wrote.
	v2 := fmt.Sprintf(`{
  "version": 2,
  "plugins": {
    "alpha": {"version": "1.0.0", "enabled": true, "sha256": %q, "manifest_sha256": %q, "consent": %s, "installed_at": "2026-01-02T03:04:05Z"},
    "team.review": {"version": "1.0.0", "enabled": false, "sha256": %q, "consent": %s, "installed_at": "2026-01-02T03:04:06Z"},
    "util": {"enabled": false}
  }
}
`, am.SHA256, msum, consent, inb.SHA256, bconsent)
	path := filepath.Join(e.data, "plugins", "registry.json")
	if err := os.WriteFile(path, []byte(v2), 0o600); err != nil {
		t.Fatal(err)
	}
	e.bi = []plugins.Builtin{calcBuiltin(t, "util")}
	e.host = &toolHost{tools: map[string][]core.Tool{}, defaults: map[string]core.Policy{}}
	r = e.open(t)
	at, _ := integrity.Tree(ina.Dir)
	in, _ := r.Get(ctx, "alpha")
	if in.Status != registry.StatusEnabled || in.Digest != at.Digest || in.SHA256 != am.SHA256 || in.Previous != "" || in.Pinned != "" || in.Source != nil ||
		!slices.Equal(in.Permissions, am.ConsentSummary()) {
		t.Errorf("migrated alpha: %+v", in)
	}
	if out, err := e.host.call(t, "alpha", "add", `{"a":1,"b":2}`); err != nil || out != "3" {
		t.Errorf("alpha.add after migration = %q, %v", out, err)
	}
	if in, _ := r.Get(ctx, "team.review"); in.Status != registry.StatusDisabled || in.Digest != inb.SHA256 {
		t.Errorf("migrated bundle: %+v", in)
	}
	if in, _ := r.Get(ctx, "util"); in.Status != registry.StatusDisabled {
		t.Errorf("migrated built-in: %+v", in)
	}
	var now struct {
		Version int                        `json:"version"`
		Plugins map[string]json.RawMessage `json:"plugins"`
	}
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &now); err != nil || now.Version != 3 || !strings.Contains(string(now.Plugins["alpha"]), `"digest": "`+at.Digest+`"`) {
		t.Errorf("registry.json after migration: %s", data)
	}
	if old, err := os.ReadFile(path + ".v2"); err != nil || string(old) != v2 {
		t.Errorf("the version-2 file was not kept as it was: %v", err)
	}
	// An upgrade after the migration keeps 1.0.0 to roll back to, checked
	// against the digest the migration recorded.
	b, _ := calcVersion(t, "alpha", plugins.RuntimeWASM, "1.1.0", `{"network":["api.example.com"]}`)
	install(t, r, b)
	if in, err := r.Rollback(ctx, "alpha"); err != nil || in.Version != "1.0.0" || in.Status != registry.StatusEnabled {
		t.Errorf("rollback to the migrated version: %+v, %v", in, err)
	}
}

// TestFailedSaveChangesNothing: when the record cannot be saved (here the
// lock file cannot be written), an upgrade, a rollback and a pin change
// nothing: the current version keeps running, the versions kept stay.
func TestFailedSaveChangesNothing(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	cfg := e.config()
	cfg.LockFile = filepath.Join(e.data, "plugins.lock")
	r, err := registry.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	v1, _ := calcVersion(t, "calc", plugins.RuntimeProcess, "1.0.0", "")
	v2, _ := calcVersion(t, "calc", plugins.RuntimeProcess, "1.1.0", "")
	v3, _ := calcVersion(t, "calc", plugins.RuntimeProcess, "1.2.0", "")
	install(t, r, v1)
	install(t, r, v2)
	record := filepath.Join(e.data, "plugins", "registry.json")
	before, _ := os.ReadFile(record)
	lock, _ := os.ReadFile(cfg.LockFile)
	// A folder where the lock file goes: it cannot be replaced.
	os.Remove(cfg.LockFile)
	os.Mkdir(cfg.LockFile, 0o700)

	_, err = r.Install(ctx, registry.InstallRequest{Path: v3, Consent: true})
	if err == nil || !strings.Contains(err.Error(), "write the plugin lock file") {
		t.Errorf("upgrade that cannot be saved: %v", err)
	}
	_, err = r.Rollback(ctx, "calc")
	if err == nil || !strings.Contains(err.Error(), "write the plugin lock file") {
		t.Errorf("rollback that cannot be saved: %v", err)
	}
	if _, err = r.Pin(ctx, "calc", "1.1.0"); err == nil {
		t.Error("a pin that cannot be saved succeeded")
	}
	in := runsFrom(t, e, r, "calc", "1.1.0")
	if in.Previous != "1.0.0" || in.Pinned != "" {
		t.Errorf("after the failures: %+v", in)
	}
	if after, _ := os.ReadFile(record); !bytes.Equal(before, after) {
		t.Errorf("registry.json changed:\n%s\nto\n%s", before, after)
	}
	for v, want := range map[string]bool{"1.0.0": true, "1.1.0": true, "1.2.0": false} {
		if _, err := os.Stat(filepath.Join(e.data, "plugins", "calc", v)); (err == nil) != want {
			t.Errorf("folder of %s: %v, want it there: %v", v, err, want)
		}
	}

	os.Remove(cfg.LockFile)
	if in, err := r.Rollback(ctx, "calc"); err != nil || in.Version != "1.0.0" {
		t.Fatalf("rollback once the lock file can be written: %+v, %v", in, err)
	}
	if now, _ := os.ReadFile(cfg.LockFile); bytes.Equal(now, lock) || !strings.Contains(string(now), `"version": "1.0.0"`) {
		t.Errorf("lock file after the rollback:\n%s", now)
	}
}
