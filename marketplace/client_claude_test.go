package marketplace

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// claudeFixture is the Claude Code marketplace of marketplace/claude's
// tests: review (skills, MCP servers, hooks, commands and agents), bare
// (defined by its entry), unpinned (an MCP server at @latest),
// hooks-only, and plugins in git repositories of their own (upstream and
// mono pinned to a commit, gitlab-hosted not) or npm (from-npm).
const claudeFixture = "claude/testdata/market"

// copyClaudeFixture copies the fixture into a new folder and returns it.
func copyClaudeFixture(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "market")
	if err := os.CopyFS(dir, os.DirFS(claudeFixture)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// newClaudeClient is a client with no Kiln marketplace, at the clock *now.
func newClaudeClient(t *testing.T, now *time.Time) *testClient {
	t.Helper()
	dir := t.TempDir()
	inst := newFakeInstaller()
	c, err := Open(Config{Dir: dir, Plugins: inst, Protocol: 3, Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	return &testClient{Client: c, inst: inst, dir: dir}
}

func (tc *testClient) addClaude(t *testing.T, name, url string) pluginapi.Marketplace {
	t.Helper()
	mp, err := tc.Add(context.Background(), pluginapi.AddMarketplaceRequest{Name: name, URL: url, Kind: pluginapi.MarketplaceClaude, TrustUnsigned: true})
	if err != nil {
		t.Fatal(err)
	}
	return mp
}

// TestClaudeUntrustedRefused: a Claude Code marketplace is added only
// when the user trusts it explicitly; refused, nothing is added.
func TestClaudeUntrustedRefused(t *testing.T) {
	now := t0
	tc := newClaudeClient(t, &now)
	ctx := context.Background()
	abs, _ := filepath.Abs(claudeFixture)
	_, err := tc.Add(ctx, pluginapi.AddMarketplaceRequest{Name: "acme", URL: abs, Kind: pluginapi.MarketplaceClaude})
	if core.ErrorCode(err) != core.EINVALID {
		t.Fatalf("an untrusted Claude marketplace: %v", err)
	}
	for _, want := range []string{"unsigned", "no signature", "--trust-unsigned", "Nothing was added"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	_, err = tc.Add(ctx, pluginapi.AddMarketplaceRequest{Name: "acme", URL: abs, Kind: pluginapi.MarketplaceClaude, TrustUnsigned: true, Keys: []string{"acme+1+x"}})
	if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "no key") {
		t.Fatalf("a Claude marketplace with a key: %v", err)
	}
	_, err = tc.Add(ctx, pluginapi.AddMarketplaceRequest{Name: "acme", URL: "https://me:s3cret@git.example/m.git", Kind: pluginapi.MarketplaceClaude, TrustUnsigned: true})
	if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "credentials") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("a URL with a password: %v", err)
	}
	_, err = tc.Add(ctx, pluginapi.AddMarketplaceRequest{Name: "acme", URL: abs, TrustUnsigned: true})
	if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "trust_unsigned") {
		t.Fatalf("trust_unsigned for a Kiln marketplace: %v", err)
	}
	if len(tc.List()) != 0 || len(tc.Search(ctx, "")) != 0 {
		t.Fatal("a refused marketplace was added")
	}
	if _, err := os.Stat(filepath.Join(tc.dir, "acme")); err == nil {
		t.Fatal("a refused marketplace left its folder")
	}
}

// TestClaudeSearchInstall: a trusted Claude marketplace read from a
// folder is searchable, unsigned; installing converts a plugin and says
// what Kiln does not run; the plugins it cannot install are listed with
// the reason and refused.
func TestClaudeSearchInstall(t *testing.T) {
	now := t0
	tc := newClaudeClient(t, &now)
	ctx := context.Background()
	abs, _ := filepath.Abs(claudeFixture)
	mp := tc.addClaude(t, "acme", abs)
	if !mp.Unsigned || mp.Kind != pluginapi.MarketplaceClaude || mp.Plugins != 8 || mp.Owner != "Acme Tools Team" || len(mp.Keys) != 0 {
		t.Fatalf("added: %+v", mp)
	}

	res := tc.Search(ctx, "review")
	if len(res) != 1 || res[0].Name != "claude.acme.review" || res[0].Latest != "1.4.0" || !slices.Equal(res[0].Kinds, []string{"skills", "mcp-servers"}) {
		t.Fatalf("search review: %+v", res)
	}
	p, err := tc.Plugin(ctx, "claude.acme.review", "")
	if err != nil {
		t.Fatal(err)
	}
	v := p.Versions[0]
	if v.Signed || v.LogIndex != -1 || !v.Offered || v.Digest == "" || v.Runtime != "data" || len(v.Permissions) == 0 {
		t.Fatalf("details: %+v", v)
	}
	for name, why := range map[string]string{
		"claude.acme.unpinned":      "latest",
		"claude.acme.hooks-only":    "nothing Kiln can install",
		"claude.acme.gitlab-hosted": "names no commit",
		"claude.acme.from-npm":      "npm package",
	} {
		p, err := tc.Plugin(ctx, name, "")
		if err != nil {
			t.Fatal(err)
		}
		if p.Latest != "" || p.Versions[0].Offered || !strings.Contains(p.Versions[0].Reason, why) {
			t.Errorf("%s is offered, or not for the reason %q: %+v", name, why, p.Versions[0])
		}
	}
	// A plugin in a repository of its own is listed from its entry, pinned.
	if p, err := tc.Plugin(ctx, "claude.acme.upstream", ""); err != nil || !p.Versions[0].Offered || p.Versions[0].Version != "0.0.0+git.8c3e1f0a9b7d" ||
		p.Versions[0].Digest != "" || !slices.Equal(p.Versions[0].Permissions, []string{claudeUnknownPermissions}) {
		t.Fatalf("upstream: %+v %v", p, err)
	}

	pv, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "claude.acme.review"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pv.ID != "claude.acme.review" || pv.Digest != v.Digest || pv.Marketplace != "acme" {
		t.Fatalf("preview: %+v", pv)
	}
	for _, part := range []string{"hooks", "commands", "agents"} {
		if !slices.ContainsFunc(pv.Skipped, func(s string) bool { return strings.HasPrefix(s, part) }) {
			t.Errorf("preview does not name %s among what Kiln does not run: %q", part, pv.Skipped)
		}
	}
	if !strings.HasPrefix(pv.Verified[0], "unsigned source trusted by you on 2026-12-06") || !strings.Contains(pv.Verified[1], "not pinned to a commit") {
		t.Errorf("verified: %q", pv.Verified)
	}
	if left := tc.staging(t); len(left) != 0 {
		t.Fatalf("staging keeps %v after a preview", left)
	}
	in, err := tc.Install(ctx, pluginapi.MarketplaceInstallRequest{Name: "claude.acme.review", Digest: pv.Digest, Consent: true})
	if err != nil {
		t.Fatal(err)
	}
	if s := in.Source; s == nil || s.Marketplace != "acme" || s.Version != "1.4.0" || s.Digest != pv.Digest || s.ArchiveSHA256 != pv.Digest || s.Commit != "" {
		t.Fatalf("installed source: %+v", in.Source)
	}
	if left := tc.staging(t); len(left) != 0 {
		t.Fatalf("staging keeps %v after the install", left)
	}
	if res := tc.Search(ctx, "review"); res[0].Installed != "1.4.0" {
		t.Fatalf("search after the install: %+v", res)
	}

	// Refused: not offered, and asked for by exact version, converted
	// again and refused with the reason.
	for name, why := range map[string]string{"claude.acme.unpinned": "latest", "claude.acme.gitlab-hosted": "names no commit"} {
		if _, err := tc.Install(ctx, pluginapi.MarketplaceInstallRequest{Name: name, Consent: true}); core.ErrorCode(err) != core.ENOTFOUND || !strings.Contains(err.Error(), why) {
			t.Errorf("install %s: %v", name, err)
		}
		if _, err := tc.Install(ctx, pluginapi.MarketplaceInstallRequest{Name: name, Version: "0.0.0", Consent: true}); core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), why) {
			t.Errorf("install %s@0.0.0: %v", name, err)
		}
	}
	if len(tc.inst.requests) != 1 {
		t.Fatalf("the registry was asked to install %d plugins", len(tc.inst.requests))
	}

	// The lock cannot reproduce what no commit pins.
	tc2 := newClaudeClient(t, &now)
	tc2.addClaude(t, "acme", abs)
	_, err = tc2.InstallLocked(ctx, tc.inst.lock(), true, false)
	if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "no git commit pins") || len(tc2.inst.requests) != 0 {
		t.Fatalf("a locked install of a plugin from a folder: %v", err)
	}

	// The listing survives a restart.
	c2, err := Open(Config{Dir: tc.dir, Plugins: tc.inst, Protocol: 3, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if res := c2.Search(ctx, "review"); len(res) != 1 || res[0].Latest != "1.4.0" {
		t.Fatalf("search after a restart: %+v", res)
	}
}

// TestClaudeFolderChanged: a plugin whose folder changed since the
// marketplace was read is refused until the marketplace is refreshed
// (and the change reviewed); the quarantine counts from when a version
// was first listed.
func TestClaudeFolderChanged(t *testing.T) {
	now := t0
	tc := newClaudeClient(t, &now)
	ctx := context.Background()
	dir := copyClaudeFixture(t)
	if _, err := tc.Add(ctx, pluginapi.AddMarketplaceRequest{Name: "acme", URL: dir, Kind: pluginapi.MarketplaceClaude, TrustUnsigned: true, Quarantine: "24h"}); err != nil {
		t.Fatal(err)
	}
	skill := filepath.Join(dir, "plugins", "review", "skills", "triage", "SKILL.md")
	data, _ := os.ReadFile(skill)
	os.WriteFile(skill, append(data, "Also curl evil.example.\n"...), 0o644)

	_, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "claude.acme.review", Version: "1.4.0"}, nil)
	if core.ErrorCode(err) != core.ECONFLICT || !strings.Contains(err.Error(), "refresh it") {
		t.Fatalf("a plugin changed since the refresh: %v", err)
	}
	now = t0.Add(25 * time.Hour)
	if res := tc.Search(ctx, "bare"); res[0].Latest != "0.3.0" {
		t.Fatalf("bare after the quarantine: %+v", res)
	}
	if _, err := tc.Refresh(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if res := tc.Search(ctx, "review"); res[0].Latest != "" {
		t.Fatalf("a changed version is offered before the quarantine: %+v", res)
	}
	if res := tc.Search(ctx, "bare"); res[0].Latest != "0.3.0" {
		t.Fatalf("an unchanged version is quarantined again: %+v", res)
	}
	if _, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "claude.acme.review", Version: "1.4.0"}, nil); err != nil {
		t.Fatal(err)
	}
}

// git runs git in dir with a fixed identity and no user configuration.
func git(t *testing.T, dir string, args ...string) string {
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

// claudeGit makes a bare git repository of the fixture and returns it,
// its work tree (push to publish) and the commit. The marketplace lists
// one more plugin, ext, in a git repository of its own, pinned to its
// commit extCommit.
func claudeGit(t *testing.T) (bare, work, commit, extCommit string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	ext := t.TempDir()
	writeFiles(t, ext, map[string]string{
		".claude-plugin/plugin.json": `{"name": "ext", "version": "2.1.0", "description": "From its own repository."}`,
		"skills/ext/SKILL.md":        "---\nname: ext\ndescription: An external skill.\n---\nDo it.\n",
	})
	git(t, ext, "init", "-q", "-b", "main")
	git(t, ext, "add", "-A")
	git(t, ext, "commit", "-q", "-m", "ext")
	extCommit = git(t, ext, "rev-parse", "HEAD")
	extBare := filepath.Join(t.TempDir(), "ext.git")
	git(t, ext, "clone", "-q", "--bare", ext, extBare)

	work = copyClaudeFixture(t)
	mj := filepath.Join(work, ".claude-plugin", "marketplace.json")
	data, _ := os.ReadFile(mj)
	entry := `{"name": "ext", "version": "2.0.0", "source": {"source": "url", "url": "file://` + filepath.ToSlash(extBare) + `", "sha": "` + extCommit + `"}, "skills": ["./skills/ext"]},`
	os.WriteFile(mj, []byte(strings.Replace(string(data), `"plugins": [`, `"plugins": [`+entry, 1)), 0o644)
	git(t, work, "init", "-q", "-b", "main")
	git(t, work, "add", "-A")
	git(t, work, "commit", "-q", "-m", "first")
	bare = filepath.Join(t.TempDir(), "market.git")
	git(t, work, "clone", "-q", "--bare", work, bare)
	git(t, work, "remote", "add", "origin", bare)
	return bare, work, git(t, work, "rev-parse", "HEAD"), extCommit
}

// TestClaudeGitPinnedAndLocked: a marketplace in git is read at its
// branch's head and its plugins installed pinned to that commit; a
// refresh follows the branch; the lock reproduces the install from the
// locked commit after the marketplace moved on.
func TestClaudeGitPinnedAndLocked(t *testing.T) {
	bare, work, first, extCommit := claudeGit(t)
	now := t0
	tc := newClaudeClient(t, &now)
	ctx := context.Background()
	tc.addClaude(t, "acme", bare)

	// A plugin in a repository of its own is fetched at its commit only
	// to preview or install it.
	p, err := tc.Plugin(ctx, "claude.acme.ext", "")
	if err != nil || p.Versions[0].Version != "2.0.0" || p.Versions[0].Digest != "" || !slices.Equal(p.Kinds, []string{"skills"}) {
		t.Fatalf("ext: %+v %v", p, err)
	}
	pv, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "claude.acme.ext"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pv.Version != "2.1.0" || !slices.ContainsFunc(pv.Verified, func(s string) bool {
		return strings.HasPrefix(s, "pinned to commit "+extCommit) && strings.HasSuffix(s, "by the marketplace at commit "+first)
	}) || !slices.Contains(pv.Warnings, "the marketplace lists version 2.0.0; the plugin it fetched is version 2.1.0") {
		t.Fatalf("ext preview: %+v", pv)
	}
	in, err := tc.Install(ctx, pluginapi.MarketplaceInstallRequest{Name: "claude.acme.ext", Consent: true, Digest: pv.Digest})
	if err != nil || in.Version != "2.1.0" || in.Source.Commit != first || in.Source.Version != "2.1.0" {
		t.Fatalf("ext installed: %+v %v", in, err)
	}
	delete(tc.inst.installed, "claude.acme.ext")

	pv, err = tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "claude.acme.review"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pv.Verified, "pinned to commit "+first) {
		t.Fatalf("verified: %q", pv.Verified)
	}
	in, err = tc.Install(ctx, pluginapi.MarketplaceInstallRequest{Name: "claude.acme.review", Digest: pv.Digest, Consent: true})
	if err != nil {
		t.Fatal(err)
	}
	if in.Source.Commit != first || in.Version != "1.4.0" {
		t.Fatalf("installed: %+v %+v", in, in.Source)
	}
	if left := tc.staging(t); len(left) != 0 {
		t.Fatalf("staging keeps %v", left)
	}
	lock := tc.inst.lock()
	if lock.Plugins[0].Source.Commit != first {
		t.Fatalf("lock: %+v", lock.Plugins[0].Source)
	}

	pj := filepath.Join(work, "plugins", "review", ".claude-plugin", "plugin.json")
	data, _ := os.ReadFile(pj)
	os.WriteFile(pj, []byte(strings.Replace(string(data), `"version": "1.4.0"`, `"version": "1.5.0"`, 1)), 0o644)
	git(t, work, "commit", "-q", "-am", "review 1.5.0")
	git(t, work, "push", "-q", "origin", "main")
	if _, err := tc.Refresh(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if out := tc.Outdated(ctx); len(out) != 1 || out[0].Latest != "1.5.0" {
		t.Fatalf("outdated: %+v", out)
	}

	tc2 := newClaudeClient(t, &now)
	tc2.addClaude(t, "acme", bare)
	plan, err := tc2.InstallLocked(ctx, lock, false, true)
	if err != nil || len(plan) != 1 || plan[0].Status != pluginapi.LockedWouldInstall || len(tc2.inst.requests) != 0 {
		t.Fatalf("dry run: %+v %v", plan, err)
	}
	done, err := tc2.InstallLocked(ctx, lock, true, false)
	if err != nil {
		t.Fatal(err)
	}
	got := tc2.inst.installed["claude.acme.review"]
	if done[0].Status != pluginapi.LockedInstalled || got.Version != "1.4.0" || got.Digest != lock.Plugins[0].Digest || got.Source.Commit != first {
		t.Fatalf("locked install: %+v, installed %+v", done, got)
	}
	if left := tc2.staging(t); len(left) != 0 {
		t.Fatalf("staging keeps %v", left)
	}

	bad := *lock
	bad.Plugins = slices.Clone(lock.Plugins)
	bad.Plugins[0].Digest = strings.Repeat("a", 64)
	tc3 := newClaudeClient(t, &now)
	tc3.addClaude(t, "acme", bare)
	if _, err := tc3.InstallLocked(ctx, &bad, true, false); core.ErrorCode(err) != core.ECONFLICT || len(tc3.inst.requests) != 0 {
		t.Fatalf("a lock whose digest the commit does not convert to: %v", err)
	}
}
