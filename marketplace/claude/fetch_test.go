package claude_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/marketplace/claude"
)

// gitRepo makes a bare repository in base/owner/name.git with two
// commits of a plugin (at the root and in sub/), and returns it with the
// first commit's id, the second's, and the id of an annotated tag of the
// second.
func gitRepo(t *testing.T, base, owner, name string) (bare, first, second, tagObject string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	work := t.TempDir()
	run := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(p, body string) {
		full := filepath.Join(work, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(work, "init", "-q", "-b", "main")
	for _, d := range []string{"", "sub/"} {
		write(d+".claude-plugin/plugin.json", `{"name": "`+name+`", "version": "1.0.0", "description": "From git."}`)
		write(d+"skills/first/SKILL.md", "---\nname: first\ndescription: The first version.\n---\nOne.\n")
	}
	run(work, "add", "-A")
	run(work, "commit", "-q", "-m", "first")
	first = run(work, "rev-parse", "HEAD")
	for _, d := range []string{"", "sub/"} {
		write(d+".claude-plugin/plugin.json", `{"name": "`+name+`", "version": "2.0.0", "description": "From git."}`)
		write(d+"skills/second/SKILL.md", "---\nname: second\ndescription: The second version.\n---\nTwo.\n")
	}
	run(work, "add", "-A")
	run(work, "commit", "-q", "-m", "second")
	run(work, "tag", "v2")
	run(work, "tag", "-a", "-m", "annotated", "v2-annotated")
	second = run(work, "rev-parse", "HEAD")
	tagObject = run(work, "rev-parse", "v2-annotated")
	bare = filepath.Join(base, owner, name+".git")
	os.MkdirAll(filepath.Dir(bare), 0o755)
	run(work, "clone", "-q", "--bare", work, bare)
	return bare, first, second, tagObject
}

// gitMarketplace is a marketplace (parsed from bytes) of plugins at the
// given sources.
func gitMarketplace(t *testing.T, entries string) *claude.Marketplace {
	t.Helper()
	m, err := claude.ParseMarketplace([]byte(`{"name": "gitm", "owner": {"name": "T"}, "plugins": [` + entries + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFetchGit(t *testing.T) {
	base := t.TempDir()
	bare, first, second, tagObject := gitRepo(t, base, "acme", "tool")
	url := "file://" + bare
	m := gitMarketplace(t, `
		{"name": "by-github", "source": {"source": "github", "repo": "acme/tool", "ref": "main", "sha": "`+first+`"}},
		{"name": "by-url", "source": {"source": "url", "url": "`+url+`", "sha": "`+second+`"}},
		{"name": "by-subdir", "source": {"source": "git-subdir", "url": "`+url+`", "path": "sub", "sha": "`+first+`"}},
		{"name": "unpinned", "source": {"source": "url", "url": "`+url+`", "ref": "v2"}},
		{"name": "unpinned-head", "source": {"source": "github", "repo": "acme/tool"}},
		{"name": "missing", "source": {"source": "url", "url": "`+url+`", "sha": "`+strings.Repeat("ab", 20)+`"}},
		{"name": "no-subdir", "source": {"source": "git-subdir", "url": "`+url+`", "path": "nope", "sha": "`+first+`"}},
		{"name": "no-repo", "source": {"source": "url", "url": "file://`+base+`/none.git", "sha": "`+first+`"}},
		{"name": "tag-object", "source": {"source": "url", "url": "`+url+`", "sha": "`+tagObject+`"}},
		{"name": "npm", "source": {"source": "npm", "package": "@acme/tool", "version": "1.0.0"}}`)
	f := claude.Fetcher{GitHub: "file://" + base + "/", TempDir: t.TempDir()}
	ctx := context.Background()

	for _, c := range []struct {
		name, commit, version string
		skills                []string
	}{
		{"by-github", first, "1.0.0", []string{"first"}},
		{"by-url", second, "2.0.0", []string{"first", "second"}},
		{"by-subdir", first, "1.0.0", []string{"first"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "b")
			res, err := f.Convert(ctx, m, c.name, out, claude.Converter{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Origin.Commit != c.commit || res.Version != c.version || !reflect.DeepEqual(res.Skills, c.skills) || !res.Origin.Unsigned {
				t.Errorf("result %+v", res)
			}
			install(t, out)
		})
	}
	// Nothing of the clones is left behind.
	if ents, _ := os.ReadDir(f.TempDir); len(ents) != 0 {
		t.Errorf("clones left in TempDir: %v", ents)
	}

	t.Run("unpinned refused", func(t *testing.T) {
		for _, name := range []string{"unpinned", "unpinned-head"} {
			_, err := f.Convert(ctx, m, name, filepath.Join(t.TempDir(), "b"), claude.Converter{})
			if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "names no commit") || !strings.Contains(err.Error(), "reproducible") {
				t.Errorf("%s: %v", name, err)
			}
		}
	})
	t.Run("unpinned allowed", func(t *testing.T) {
		g := f
		g.AllowUnpinned = true
		for name, commit := range map[string]string{"unpinned": second, "unpinned-head": second} {
			fe, err := g.Fetch(ctx, m, mustPlugin(t, m, name))
			if err != nil {
				t.Fatal(err)
			}
			if fe.Commit != commit {
				t.Errorf("%s: commit %s, want %s (what its ref points at)", name, fe.Commit, commit)
			}
			fe.Close()
			if _, err := os.Stat(fe.Dir); err == nil {
				t.Errorf("%s: Close left the clone", name)
			}
		}
	})
	for _, c := range []struct{ name, code, want string }{
		{"missing", core.EINVALID, "is not in the repository"},
		{"tag-object", core.EINVALID, "not the pinned " + tagObject},
		{"no-subdir", core.ENOTFOUND, "folder nope does not exist"},
		{"no-repo", core.EINVALID, "git fetch"},
		{"npm", core.EINVALID, "not from package registries"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.Fetch(ctx, m, mustPlugin(t, m, c.name))
			if core.ErrorCode(err) != c.code || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v, want %s with %q", err, c.code, c.want)
			}
		})
	}
	if ents, _ := os.ReadDir(f.TempDir); len(ents) != 0 {
		t.Errorf("failed fetches left clones in TempDir: %v", ents)
	}
}

func mustPlugin(t *testing.T, m *claude.Marketplace, name string) claude.Plugin {
	t.Helper()
	p, err := m.Plugin(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFetchPath(t *testing.T) {
	ctx := context.Background()
	m, err := claude.LoadMarketplace("testdata/market")
	if err != nil {
		t.Fatal(err)
	}
	fe, err := claude.Fetcher{}.Fetch(ctx, m, mustPlugin(t, m, "review"))
	if err != nil || fe.Dir != filepath.Join(m.Root, "plugins", "review") || fe.Commit != "" {
		t.Fatalf("fetch review: %+v, %v", fe, err)
	}
	if err := fe.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fe.Dir); err != nil {
		t.Error("Close removed the marketplace's own folder")
	}

	// A marketplace read from bytes has no folder to take a path from.
	data, _ := os.ReadFile("testdata/market/.claude-plugin/marketplace.json")
	loose, _ := claude.ParseMarketplace(data)
	if _, err := (claude.Fetcher{}).Fetch(ctx, loose, mustPlugin(t, loose, "review")); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("a path source without the marketplace's folder: %v", err)
	}

	// A plugin folder that is a link out of the marketplace is refused.
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, ".claude-plugin"), 0o755)
	os.WriteFile(filepath.Join(root, claude.MarketplaceFile), []byte(`{"name": "m", "owner": {"name": "T"}, "plugins": [
		{"name": "out", "source": "./out"}, {"name": "gone", "source": "./gone"}, {"name": "file", "source": "./file"}]}`), 0o644)
	abs, _ := filepath.Abs("testdata/market/plugins/review")
	os.Symlink(abs, filepath.Join(root, "out"))
	os.WriteFile(filepath.Join(root, "file"), nil, 0o644)
	lm, err := claude.LoadMarketplace(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"out": "link out of the marketplace", "gone": "does not exist", "file": "not a folder"} {
		if _, err := (claude.Fetcher{}).Fetch(ctx, lm, mustPlugin(t, lm, name)); core.ErrorCode(err) != core.ENOTFOUND || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ENOTFOUND with %q", name, err, want)
		}
	}
}

// TestFetchURLChecked: a source built by hand, or a GitHub base, is held
// to the URL rules of ParseMarketplace: never a remote helper that runs a
// program.
func TestFetchURLChecked(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	ext := "ext::sh -c touch% " + marker
	sha := strings.Repeat("ab", 20)
	for _, c := range []struct {
		f    claude.Fetcher
		s    claude.Source
		want string
	}{
		{claude.Fetcher{}, claude.Source{Kind: claude.SourceURL, URL: ext, SHA: sha}, "is not a git URL"},
		{claude.Fetcher{GitHub: ext + "/"}, claude.Source{Kind: claude.SourceGitHub, Repo: "a/b", SHA: sha}, "is not a git URL"},
		{claude.Fetcher{}, claude.Source{Kind: claude.SourceURL, URL: "file:///x", SHA: "HEAD"}, "40 hex digits"},
	} {
		_, err := c.f.Fetch(context.Background(), &claude.Marketplace{Name: "m"}, claude.Plugin{Name: "p", Source: c.s})
		if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want EINVALID with %q", c.s, err, c.want)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the ext:: helper ran")
	}
}

// TestLoadGit reads a marketplace from a git repository: its plugins in
// its own folders are pinned by the commit read.
func TestLoadGit(t *testing.T) {
	base := t.TempDir()
	bare, first, _, _ := gitRepo(t, base, "acme", "tool")
	ctx := context.Background()
	f := claude.Fetcher{TempDir: t.TempDir()}
	// The repository is a plugin; make it a marketplace too.
	market := filepath.Join(t.TempDir(), "market")
	bareMarket := filepath.Join(base, "acme", "market.git")
	for _, args := range [][]string{
		{"clone", "-q", bare, market},
		{"-C", market, "checkout", "-q", "-b", "pub"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	os.WriteFile(filepath.Join(market, claude.MarketplaceFile), []byte(`{"name": "acme", "owner": {"name": "A"}, "plugins": [
		{"name": "tool", "source": "./"}, {"name": "sub", "source": "./sub"}]}`), 0o644)
	env := append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	for _, args := range [][]string{
		{"-C", market, "add", "-A"},
		{"-C", market, "commit", "-q", "-m", "marketplace"},
		{"clone", "-q", "--bare", market, bareMarket},
	} {
		cmd := exec.Command("git", args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	out, _ := exec.Command("git", "-C", market, "rev-parse", "HEAD").Output()
	head := strings.TrimSpace(string(out))

	m, fe, err := f.LoadGit(ctx, "file://"+bareMarket, "pub")
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "acme" || m.Commit != head || fe.Commit != head || m.Root != fe.Dir {
		t.Errorf("marketplace %+v, fetched %+v", m, fe)
	}
	res, err := f.Convert(ctx, m, "sub", filepath.Join(t.TempDir(), "b"), claude.Converter{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Origin.Commit != head || res.Version != "2.0.0" {
		t.Errorf("a plugin of the marketplace's folder: %+v", res)
	}
	fe.Close()
	if _, err := os.Stat(fe.Dir); err == nil {
		t.Error("Close left the clone")
	}

	// At a commit: one without a marketplace is ENOTFOUND.
	if _, _, err := f.LoadGit(ctx, "file://"+bareMarket, first); core.ErrorCode(err) != core.ENOTFOUND {
		t.Errorf("a commit without a marketplace: %v", err)
	}
	if _, _, err := f.LoadGit(ctx, "ext::sh -c x", ""); core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "not a git URL") {
		t.Errorf("an ext:: URL: %v", err)
	}
	if _, _, err := f.LoadGit(ctx, "file://"+bareMarket, "--upload-pack=x"); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("an option as ref: %v", err)
	}
	if ents, _ := os.ReadDir(f.TempDir); len(ents) != 0 {
		t.Errorf("clones left: %v", ents)
	}
}
