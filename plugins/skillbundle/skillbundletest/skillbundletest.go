// Package skillbundletest is the conformance kit of the "skills"
// extension kind (plugins/skillbundle), in the spirit of testing/fstest:
// Run lays out bundles of skills in temporary folders, has the runtime
// under test hand out the kind's client for each (a skillbundle.Source),
// and checks that the kind, attached the way the registry attaches it,
// lists the skills and serves their files as the package says, and
// refuses what is malformed.
//
// # Runtimes
//
// A bundle of skills is data: nothing in it runs, and its client is the
// folder itself. Two runtimes hand out a folder and so carry the kind:
// "data", which opens an installed bundle's folder through an os.Root
// (plugins.RuntimeData), and "builtin", for skills compiled into kiln (an
// embed.FS or fstest.MapFS behind plugins.Clients). The "wasm" and
// "process" runtimes run a plugin's code and hand out what that code
// serves; a skill is not served by code, so they do not carry the kind
// (their Dispense refuses it) and the kit is not run over them. Kiln's
// own tests run it over both runtimes that do (conformance_test.go).
package skillbundletest

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/skillbundle"
	"github.com/kilnhq/kiln/skills"
)

// Open returns the client of the "skills" kind for the bundle in dir, as
// the runtime under test hands it out. dir holds the bundle's manifest
// (plugins.ManifestFile: a data-only bundle with ID PluginID providing
// "skills") and its files. Run calls Open once per bundle with that
// case's t, which Open may use to fail and to release what it opened
// (t.Cleanup).
type Open func(t *testing.T, dir string) skillbundle.Source

// PluginID is the ID of the bundles the kit lays out.
const PluginID = "kit.skills"

// Manifest is the manifest the kit writes into every bundle.
const Manifest = `{"apiVersion":"kiln.dev/v1","id":"` + PluginID + `","version":"1.0.0","description":"Skills for the conformance kit.","provides":["skills"]}`

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, open Open) {
	t.Helper()
	t.Run("Kind", testKind)
	t.Run("List", func(t *testing.T) { testList(t, open) })
	t.Run("Files", func(t *testing.T) { testFiles(t, open) })
	t.Run("SymlinkOut", func(t *testing.T) { testSymlinkOut(t, open) })
	t.Run("Malformed", func(t *testing.T) { testMalformed(t, open) })
	t.Run("Host", func(t *testing.T) { testHost(t, open) })
	t.Run("HostFails", func(t *testing.T) { testHostFails(t, open) })
	t.Run("NoHost", func(t *testing.T) { testNoHost(t, open) })
}

// skill returns a SKILL.md for name.
func skill(name string) string {
	return "---\nname: " + name + "\ndescription: The " + name + " skill.\n---\nDo the " + name + " thing.\n"
}

// long is a valid name of the greatest length, 64.
var long = strings.Repeat("abcdefg-", 7) + "abcdefgh"

// good is a well-formed bundle: three skills, listed in name order, with
// files beside a SKILL.md, and entries of skills/ that are not skills.
func good() map[string]string {
	return map[string]string{
		"skills/review/SKILL.md":            skill("review"),
		"skills/review/references/style.md": "Be kind.\n",
		"skills/a1/SKILL.md":                skill("a1"),
		"skills/b-two/SKILL.md":             skill("b-two"),
		"skills/" + long + "/SKILL.md":      skill(long),
		"skills/README.md":                  "Not a skill: a file.\n",
		"README.md":                         "The bundle.\n",
	}
}

var goodNames = []string{"a1", long, "b-two", "review"} // byte order

// lay writes the manifest and files (slash-separated paths) into a new
// temporary folder and returns it.
func lay(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	write(t, dir, plugins.ManifestFile, Manifest)
	for p, body := range files {
		write(t, dir, p, body)
	}
	return dir
}

func write(t *testing.T, dir, p, body string) {
	t.Helper()
	full := filepath.Join(dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// source opens dir through the runtime under test.
func openSource(t *testing.T, open Open, dir string) skillbundle.Source {
	t.Helper()
	src := open(t, dir)
	if src == nil {
		t.Fatal("Open returned a nil source")
	}
	if src.FS() == nil {
		t.Fatal("the source's FS is nil")
	}
	return src
}

// kind is the registered "skills" kind.
func kind(t *testing.T) plugins.Kind {
	t.Helper()
	k, ok := plugins.LookupKind(skillbundle.Name)
	if !ok {
		t.Fatalf("no kind %q is registered", skillbundle.Name)
	}
	return k
}

// attach is what the registry hands the kind for src.
func attach(t *testing.T, src skillbundle.Source, host any) plugins.Attach {
	t.Helper()
	m, err := plugins.ParseManifest([]byte(Manifest))
	if err != nil {
		t.Fatal(err)
	}
	return plugins.Attach{ID: PluginID, Manifest: m, Client: src, Host: host}
}

func testKind(t *testing.T) {
	k := kind(t)
	if k.Name() != skillbundle.Name {
		t.Errorf("the kind registered as %q calls itself %q", skillbundle.Name, k.Name())
	}
	v, ok := k.(plugins.Validator)
	if !ok {
		t.Fatalf("the %q kind cannot check a bundle at install (no Validate)", skillbundle.Name)
	}
	m, err := plugins.ParseManifest([]byte(Manifest))
	if err != nil {
		t.Fatal(err)
	}
	a := plugins.Attach{ID: PluginID, Manifest: m, Client: "not a folder"}
	if _, err := k.Attach(context.Background(), a); err == nil || !strings.Contains(err.Error(), string(skillbundle.Name)) {
		t.Errorf("Attach of a string as the client: %v; want an error naming the kind", err)
	}
	if err := v.Validate(context.Background(), a); err == nil {
		t.Error("Validate of a string as the client succeeded")
	}
}

func testList(t *testing.T, open Open) {
	src := openSource(t, open, lay(t, good()))
	names, err := skillbundle.List(src.FS())
	if err != nil || !slices.Equal(names, goodNames) {
		t.Errorf("List = %q, %v; want %q", names, err, goodNames)
	}
	att, err := kind(t).Attach(context.Background(), attach(t, src, nil))
	if err != nil || !slices.Equal(att.Items, goodNames) {
		t.Errorf("Attach lists %q, %v; want %q", att.Items, err, goodNames)
	}
	if err := kind(t).(plugins.Validator).Validate(context.Background(), attach(t, src, nil)); err != nil {
		t.Errorf("Validate of a good bundle: %v", err)
	}
}

// binary holds every byte value, twice, then a run that is not text.
var binary = func() string {
	var b []byte
	for i := range 512 {
		b = append(b, byte(i))
	}
	return string(append(b, 0xff, 0xfe, 0x00, 0x00, '\r', '\n'))
}()

func testFiles(t *testing.T, open Open) {
	files := good()
	files["skills/review/references/checklist é.md"] = "- tests\n- docs\n"
	files["skills/review/scripts/run.sh"] = "#!/bin/sh\necho review\n"
	files["skills/review/assets/logo.bin"] = binary
	files["skills/review/assets/empty.txt"] = ""
	files["skills/review/assets/deep/er/still/deeper.md"] = "deep\n"
	files["skills/review/assets/big.txt"] = strings.Repeat("0123456789abcdef", 1<<14) // 256 KiB
	src := openSource(t, open, lay(t, files))
	fsys := src.FS()
	var want []string
	for p, body := range files {
		want = append(want, p)
		got, err := fs.ReadFile(fsys, p)
		switch {
		case err != nil:
			t.Errorf("read %s: %v", p, err)
		case !bytes.Equal(got, []byte(body)):
			t.Errorf("read %s: %d bytes, not the %d written", p, len(got), len(body))
		}
		if fi, err := fs.Stat(fsys, p); err != nil || fi.Size() != int64(len(body)) || !fi.Mode().IsRegular() {
			t.Errorf("stat %s: %v, %v; want a regular file of %d bytes", p, fi, err, len(body))
		}
	}
	ents, err := fs.ReadDir(fsys, "skills/review/assets")
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if wantNames := []string{"big.txt", "deep", "empty.txt", "logo.bin"}; err != nil || !slices.Equal(names, wantNames) {
		t.Errorf("read dir skills/review/assets: %q, %v; want %q", names, err, wantNames)
	}
	// The fs.FS contract as a whole: Open, ReadDir, Stat, Seek, ReadFile
	// and what fs.ValidPath refuses.
	want = append(want, plugins.ManifestFile)
	slices.Sort(want)
	if err := fstest.TestFS(fsys, want...); err != nil {
		t.Errorf("the source's FS does not behave as an fs.FS: %v", err)
	}
	for _, bad := range []string{"../" + plugins.ManifestFile, "/etc/passwd", "skills/../../x", "skills/review/../../.."} {
		if _, err := fs.ReadFile(fsys, bad); err == nil {
			t.Errorf("read %q succeeded: a path out of the folder must be refused", bad)
		}
	}
}

// secret is the content of a file outside the bundle.
const secret = "the key to the house\n"

func testSymlinkOut(t *testing.T, open Open) {
	outside := t.TempDir()
	write(t, outside, "secret.txt", secret)
	write(t, outside, "skill/SKILL.md", skill("evil")+secret)
	dir := lay(t, good())
	refs := filepath.Join(dir, "skills", "review", "references")
	links := map[string]string{
		// relative, climbing out of the folder
		"skills/review/references/leak.md": relTo(t, refs, filepath.Join(outside, "secret.txt")),
		// absolute, to a file and to a folder
		"skills/review/references/abs.md": filepath.Join(outside, "secret.txt"),
		"skills/review/outside":           outside,
		// a skill's folder that is elsewhere
		"skills/evil": filepath.Join(outside, "skill"),
	}
	for p, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			t.Skipf("cannot make symlinks here: %v", err)
		}
	}
	src := openSource(t, open, dir)
	fsys := src.FS()
	for _, p := range []string{
		"skills/review/references/leak.md", "skills/review/references/abs.md",
		"skills/review/outside/secret.txt", "skills/evil/SKILL.md",
	} {
		got, err := fs.ReadFile(fsys, p)
		switch {
		case err == nil && strings.Contains(string(got), strings.TrimSpace(secret)):
			t.Errorf("read %s returned the file outside the bundle it links to", p)
		case err == nil:
			t.Errorf("read %s through a symlink out of the bundle succeeded (%d bytes)", p, len(got))
		}
	}
	if ents, err := fs.ReadDir(fsys, "skills/review/outside"); err == nil {
		t.Errorf("read dir through a symlink out of the bundle listed %d entries", len(ents))
	}
	// The rest of the bundle still reads, and the skill that is elsewhere
	// is not one of its skills.
	if got, err := fs.ReadFile(fsys, "skills/review/SKILL.md"); err != nil || string(got) != skill("review") {
		t.Errorf("read skills/review/SKILL.md beside the symlinks: %q, %v", got, err)
	}
	att, err := kind(t).Attach(context.Background(), attach(t, src, nil))
	if err == nil && slices.Contains(att.Items, "evil") {
		t.Errorf("Attach lists %q, a skill whose folder is a symlink out of the bundle", att.Items)
	}
}

// relTo returns target relative to base.
func relTo(t *testing.T, base, target string) string {
	t.Helper()
	rel, err := filepath.Rel(base, target)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// malformed are bundles the kind refuses, each with what the error must
// say: the path at fault. Those with a bad skill have a good one beside
// it, so that the bad one is the one named.
var malformed = []struct {
	name   string
	files  map[string]string
	reason string
}{
	{"no skills folder", map[string]string{"README.md": "x"}, "no skills/ folder"},
	{"skills is a file", map[string]string{"skills": "x"}, "skills/"},
	{"no skill in skills", map[string]string{"skills/README.md": "x"}, "skills/ holds none"},
	{"folder without SKILL.md", withGood("skills/empty/README.md", "x"), "skills/empty has no SKILL.md"},
	{"SKILL.md is a folder", withGood("skills/x/SKILL.md/inner.md", "x"), "skills/x has no SKILL.md"},
	{"lowercase skill.md", withGood("skills/x/skill.md", skill("x")), "skills/x has no SKILL.md"},
	{"uppercase", withGood("skills/Review/SKILL.md", skill("Review")), "skills/Review:"},
	{"leading hyphen", withGood("skills/-review/SKILL.md", skill("-review")), "skills/-review:"},
	{"trailing hyphen", withGood("skills/review-/SKILL.md", skill("review-")), "skills/review-:"},
	{"double hyphen", withGood("skills/re--view/SKILL.md", skill("re--view")), "skills/re--view:"},
	{"underscore", withGood("skills/re_view/SKILL.md", skill("re_view")), "skills/re_view:"},
	{"dot", withGood("skills/re.view/SKILL.md", skill("re.view")), "skills/re.view:"},
	{"65 characters", withGood("skills/"+long+"x/SKILL.md", skill(long+"x")), "skills/" + long + "x:"},
}

// withGood is a bundle of one good skill and the file p.
func withGood(p, body string) map[string]string {
	return map[string]string{"skills/fine/SKILL.md": skill("fine"), p: body}
}

func testMalformed(t *testing.T, open Open) {
	k := kind(t)
	v := k.(plugins.Validator)
	for _, c := range malformed {
		t.Run(c.name, func(t *testing.T) {
			src := openSource(t, open, lay(t, c.files))
			h := &Host{}
			att, err := k.Attach(context.Background(), attach(t, src, h))
			if err == nil || !strings.Contains(err.Error(), c.reason) {
				t.Errorf("Attach = %q, %v; want an error saying %q", att.Items, err, c.reason)
			}
			if att.Detach != nil || len(att.Items) > 0 {
				t.Errorf("a failed Attach returned %q and a Detach: it must leave nothing attached", att.Items)
			}
			if calls := h.Calls(); len(calls) != 0 {
				t.Errorf("a refused bundle reached the host: %q", calls)
			}
			verr := v.Validate(context.Background(), attach(t, src, nil))
			switch {
			case verr == nil:
				t.Errorf("Validate accepted a bundle Attach refuses (%v)", err)
			case err != nil && verr.Error() != err.Error():
				t.Errorf("Validate says %q, Attach %q: they must agree", verr, err)
			}
		})
	}
}

func testHost(t *testing.T, open Open) {
	src := openSource(t, open, lay(t, good()))
	h := &Host{}
	att, err := kind(t).Attach(context.Background(), attach(t, src, h))
	if err != nil {
		t.Fatalf("Attach with a host: %v", err)
	}
	if !slices.Equal(att.Items, goodNames) {
		t.Errorf("Attach lists %q; want %q", att.Items, goodNames)
	}
	added := h.Added(PluginID)
	if added == nil {
		t.Fatalf("Attach did not add the skills to the host (calls %q)", h.Calls())
	}
	if !slices.Equal(added.Names, goodNames) {
		t.Errorf("the host got the names %q; want %q", added.Names, goodNames)
	}
	// The folder the host got reads the skills' files.
	for _, name := range goodNames {
		p := path.Join(skills.BundleDir, name, skills.File)
		if got, err := fs.ReadFile(added.FS, p); err != nil || string(got) != skill(name) {
			t.Errorf("the host reads %s as %q, %v", p, got, err)
		}
	}
	if got, err := fs.ReadFile(added.FS, "skills/review/references/style.md"); err != nil || string(got) != "Be kind.\n" {
		t.Errorf("the host reads skills/review/references/style.md as %q, %v", got, err)
	}
	if att.Detach == nil {
		t.Fatal("Attach with a host returned no Detach: the skills could never be withdrawn")
	}
	att.Detach()
	if calls := h.Calls(); !slices.Equal(calls, []string{"add " + PluginID, "remove " + PluginID}) {
		t.Errorf("host calls %q; want one add then one remove of %s", calls, PluginID)
	}
	if h.Added(PluginID) != nil {
		t.Error("the skills are still on the host after Detach")
	}
}

func testHostFails(t *testing.T, open Open) {
	src := openSource(t, open, lay(t, good()))
	h := &Host{Fail: errors.New("the skills host is full")}
	att, err := kind(t).Attach(context.Background(), attach(t, src, h))
	if err == nil || !strings.Contains(err.Error(), "the skills host is full") {
		t.Errorf("Attach with a failing host: %v; want the host's error", err)
	}
	if att.Detach != nil {
		t.Error("a failed Attach returned a Detach")
	}
}

func testNoHost(t *testing.T, open Open) {
	src := openSource(t, open, lay(t, good()))
	att, err := kind(t).Attach(context.Background(), attach(t, src, nil))
	if err != nil || !slices.Equal(att.Items, goodNames) {
		t.Errorf("Attach without a host = %q, %v; want the skills listed", att.Items, err)
	}
	if att.Detach != nil {
		att.Detach() // harmless: there is nothing to take back
	}
}

// Host is a skillbundle.Host that records what it is given. Fail, when
// set, is AddSkills' error. It is safe for concurrent use.
type Host struct {
	Fail error

	mu    sync.Mutex
	calls []string
	added map[string]*Added
}

// Added is what one source added.
type Added struct {
	FS    fs.FS
	Names []string
}

// AddSkills records the skills, or returns Fail.
func (h *Host) AddSkills(source string, fsys fs.FS, names []string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, "add "+source)
	if h.Fail != nil {
		return h.Fail
	}
	if h.added == nil {
		h.added = map[string]*Added{}
	}
	h.added[source] = &Added{FS: fsys, Names: slices.Clone(names)}
	return nil
}

// RemoveSkills forgets source's skills.
func (h *Host) RemoveSkills(source string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, "remove "+source)
	delete(h.added, source)
}

// Calls lists the calls so far: "add <source>", "remove <source>".
func (h *Host) Calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// Added returns what source added and has not removed, or nil.
func (h *Host) Added(source string) *Added {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.added[source]
}

// Interface guards.
var _ skillbundle.Host = (*Host)(nil)
