package marketplace

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/integrity"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// fakeInstaller is the registry as the client sees it: it checks the
// folder it is given and records what was installed from it.
type fakeInstaller struct {
	mu        sync.Mutex
	installed map[string]pluginapi.Info
	requests  []pluginapi.InstallRequest
}

func newFakeInstaller() *fakeInstaller {
	return &fakeInstaller{installed: map[string]pluginapi.Info{}}
}

func (f *fakeInstaller) Preview(_ context.Context, path string) (pluginapi.Preview, error) {
	m, err := plugins.LoadManifest(path)
	if err != nil {
		return pluginapi.Preview{}, err
	}
	sum, err := integrity.Sum(path, m)
	if err != nil {
		return pluginapi.Preview{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return pluginapi.Preview{ID: m.ID, Version: m.Version, Permissions: m.ConsentSummary(), SHA256: sum, NeedsConsent: true,
		Installed: f.installed[m.ID].Version}, nil
}

func (f *fakeInstaller) Install(ctx context.Context, req pluginapi.InstallRequest) (pluginapi.Info, error) {
	pv, err := f.Preview(ctx, req.Path)
	if err != nil {
		return pluginapi.Info{}, err
	}
	if !req.Consent {
		return pluginapi.Info{}, core.Errorf(core.EINVALID, "installing %s needs consent", pv.ID)
	}
	t, err := integrity.Tree(req.Path)
	if err != nil {
		return pluginapi.Info{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, req)
	in := pluginapi.Info{ID: pv.ID, Version: pv.Version, SHA256: pv.SHA256, Digest: t.Digest, Source: req.Source, Permissions: pv.Permissions}
	f.installed[pv.ID] = in
	return in, nil
}

func (f *fakeInstaller) List(context.Context) []pluginapi.Info {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []pluginapi.Info
	for _, in := range f.installed {
		out = append(out, in)
	}
	return out
}

func (f *fakeInstaller) Pin(_ context.Context, id, version string) (pluginapi.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := f.installed[id]
	in.Pinned = version
	f.installed[id] = in
	return in, nil
}

// lock is the lock file of what f installed.
func (f *fakeInstaller) lock() *pluginapi.Lock {
	l := &pluginapi.Lock{Version: pluginapi.LockVersion}
	for _, in := range f.List(context.Background()) {
		lp := pluginapi.LockedPlugin{ID: in.ID, Version: in.Version, Runtime: "data", SHA256: in.SHA256, Digest: in.Digest, Pinned: in.Pinned != ""}
		if in.Source != nil {
			lp.Source = &pluginapi.LockSource{Marketplace: in.Source.Marketplace, ArchiveSHA256: in.Source.ArchiveSHA256, IndexVersion: in.Source.IndexVersion, Commit: in.Source.Commit}
		}
		l.Plugins = append(l.Plugins, lp)
	}
	slices.SortFunc(l.Plugins, func(a, b pluginapi.LockedPlugin) int { return strings.Compare(a.ID, b.ID) })
	return l
}

// testClient is a client of m, served over HTTP, at the clock *now.
type testClient struct {
	*Client
	inst *fakeInstaller
	dir  string
	url  string
}

func newTestClient(t *testing.T, m *market, now *time.Time) *testClient {
	t.Helper()
	srvURL := serve(t, m)
	dir := t.TempDir()
	inst := newFakeInstaller()
	c, err := Open(Config{Dir: dir, Plugins: inst, Protocol: 3, Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	return &testClient{Client: c, inst: inst, dir: dir, url: srvURL}
}

func (tc *testClient) add(t *testing.T, m *market, quarantine string) pluginapi.Marketplace {
	t.Helper()
	mp, err := tc.Add(context.Background(), pluginapi.AddMarketplaceRequest{Name: "acme", URL: tc.url, Keys: []string{m.verifier}, Quarantine: quarantine})
	if err != nil {
		t.Fatal(err)
	}
	return mp
}

// staging lists what is left in the client's staging folder.
func (tc *testClient) staging(t *testing.T) []string {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(tc.dir, stagingDir))
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestClientAddSearchInstall(t *testing.T) {
	m := newMarket(t)
	now := t0.Add(time.Hour)
	tc := newTestClient(t, m, &now)
	ctx := context.Background()

	_, other := testKey(t, "acme")
	if _, err := tc.Add(ctx, pluginapi.AddMarketplaceRequest{Name: "acme", URL: tc.url, Keys: []string{other}}); err == nil {
		t.Fatal("a marketplace added with a key that did not sign it")
	}
	signer, _ := testKey(t, "acme")
	if _, err := tc.Add(ctx, pluginapi.AddMarketplaceRequest{Name: "acme", URL: tc.url, Keys: []string{signer}}); err == nil || strings.Contains(err.Error(), signer) {
		t.Fatalf("a signer key given as the key to trust: %v", err)
	}
	if len(tc.List()) != 0 {
		t.Fatal("a refused marketplace was added")
	}
	mp := tc.add(t, m, "")
	if mp.Version != 1 || mp.TreeSize != 1 || mp.Plugins != 2 || mp.Owner != "Acme Plugins" {
		t.Fatalf("added: %+v", mp)
	}

	res := tc.Search(ctx, "review")
	if len(res) == 0 || res[0].Name != "review" || res[0].Marketplace != "acme" || res[0].Latest != "1.0.0" || !slices.Contains(res[0].Kinds, "skills") {
		t.Fatalf("search review: %+v", res)
	}
	if all := tc.Search(ctx, ""); len(all) != 2 {
		t.Fatalf("search all: %+v", all)
	}
	if none := tc.Search(ctx, "review nothing-like-this"); len(none) != 0 {
		t.Fatalf("every term must match: %+v", none)
	}

	pv, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "review"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pv.ID != "review" || pv.Version != "1.0.0" || pv.Marketplace != "acme" || len(pv.Verified) != 5 || pv.Digest == "" {
		t.Fatalf("preview: %+v", pv)
	}
	if _, err := tc.Install(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Digest: strings.Repeat("0", 64), Consent: true}); core.ErrorCode(err) != core.ECONFLICT {
		t.Fatalf("install with another digest than previewed: %v", err)
	}
	in, err := tc.Install(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Digest: pv.Digest, Consent: true})
	if err != nil {
		t.Fatal(err)
	}
	if in.Source == nil || in.Source.Marketplace != "acme" || in.Source.Digest != pv.Digest || in.Source.IndexVersion != 1 || in.Digest != pv.Digest {
		t.Fatalf("installed: %+v", in)
	}
	if left := tc.staging(t); len(left) != 0 {
		t.Fatalf("staging keeps %v after the install", left)
	}

	// Search and details work from the kept index after a restart.
	c2, err := Open(Config{Dir: tc.dir, Plugins: tc.inst, Protocol: 3, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c2.Plugin(ctx, "review", "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Installed != "1.0.0" || len(p.Versions) != 1 || !p.Versions[0].Signed || !p.Versions[0].Offered || p.Versions[0].Digest != pv.Digest {
		t.Fatalf("details: %+v", p)
	}
}

// TestClientRefusesTamperedArchives: an archive whose bytes, or length,
// are not the signed index's is refused before it is unpacked, saying so
// in the message the API sends, and nothing is installed or left behind.
func TestClientRefusesTamperedArchives(t *testing.T) {
	for _, c := range []struct {
		name, want string
		tamper     func([]byte) []byte
	}{
		{"same size, other bytes", "tampered archive", func(b []byte) []byte { b[len(b)/2] ^= 0xff; return b }},
		{"larger than declared", "larger than", func(b []byte) []byte { return append(b, 0) }},
		{"shorter than declared", "smaller than declared", func(b []byte) []byte { return b[:len(b)-1] }},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newMarket(t)
			now := t0.Add(time.Hour)
			tc := newTestClient(t, m, &now)
			tc.add(t, m, "")
			p := filepath.Join(m.dir, filepath.FromSlash(ArchivePath("review", "1.0.0")))
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, c.tamper(data), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = tc.Install(context.Background(), pluginapi.MarketplaceInstallRequest{Name: "review", Consent: true})
			if err == nil || !strings.Contains(err.Error(), c.want) || core.ErrorCode(err) != core.EINVALID || RefusalReason(err) != ReasonArchive {
				t.Fatalf("install of a tampered archive: %v", err)
			}
			// The message the API sends (the *core.Error's) names the
			// marketplace and says nothing was installed.
			wantRefusal(t, err, ReasonArchive, "marketplace acme: plugin review 1.0.0: ", c.want, "; nothing was installed: ")
			if len(tc.inst.requests) != 0 {
				t.Fatal("the registry was asked to install it")
			}
			if left := tc.staging(t); len(left) != 0 {
				t.Fatalf("staging keeps %v", left)
			}
		})
	}
}

func TestClientQuarantineAndVersions(t *testing.T) {
	m := newMarket(t)
	now := t0.Add(time.Hour)
	tc := newTestClient(t, m, &now)
	ctx := context.Background()
	tc.add(t, m, "72h")

	if res := tc.Search(ctx, "review"); len(res) != 1 || res[0].Latest != "" {
		t.Fatalf("a version in quarantine is offered: %+v", res)
	}
	_, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "review"}, nil)
	if core.ErrorCode(err) != core.ENOTFOUND || !strings.Contains(err.Error(), "quarantine") || !strings.Contains(err.Error(), "exact version") {
		t.Fatalf("latest in quarantine: %v", err)
	}
	if _, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Version: "1.0.0"}, nil); err != nil {
		t.Fatalf("an exact version in quarantine: %v", err)
	}
	p, err := tc.Plugin(ctx, "review", "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Versions[0].Offered || !strings.Contains(p.Versions[0].Reason, "quarantine") {
		t.Fatalf("details of a version in quarantine: %+v", p.Versions[0])
	}
	now = t0.Add(73 * time.Hour)
	if res := tc.Search(ctx, "review"); res[0].Latest != "1.0.0" {
		t.Fatalf("after the quarantine: %+v", res)
	}
	for _, c := range []struct{ constraint, want string }{
		{"^1", "1.0.0"}, {"~1.0", "1.0.0"}, {">=1.0.0 <2", "1.0.0"}, {"latest", "1.0.0"},
	} {
		pv, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Version: c.constraint}, nil)
		if err != nil || pv.Version != c.want {
			t.Errorf("version %q: %v %v", c.constraint, pv.Version, err)
		}
	}
	if _, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Version: "^2"}, nil); core.ErrorCode(err) != core.ENOTFOUND {
		t.Errorf("no version matches ^2: %v", err)
	}
	if _, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Version: "not a version!"}, nil); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("a bad range: %v", err)
	}
	if _, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "nope"}, nil); core.ErrorCode(err) != core.ENOTFOUND {
		t.Errorf("an unknown plugin: %v", err)
	}
}

func TestClientRefreshOutdatedUpgradeLocked(t *testing.T) {
	m := newMarket(t)
	now := t0.Add(time.Hour)
	tc := newTestClient(t, m, &now)
	ctx := context.Background()
	tc.add(t, m, "")
	if _, err := tc.Install(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Consent: true}); err != nil {
		t.Fatal(err)
	}
	if out := tc.Outdated(ctx); len(out) != 0 {
		t.Fatalf("outdated before a new version: %+v", out)
	}
	if _, err := tc.UpgradeRequest(ctx, "review"); core.ErrorCode(err) != core.ECONFLICT {
		t.Fatalf("upgrade of an up-to-date plugin: %v", err)
	}
	m.add(t, PublishPlugin{Path: bundle(t, m.dir, "src/review-1.1.0", "review", "1.1.0", "Look for bugs and typos.")}, t0.Add(2*time.Hour))
	now = t0.Add(3 * time.Hour)
	mp, err := tc.Refresh(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if mp.Version != 2 || mp.TreeSize != 2 {
		t.Fatalf("refreshed: %+v", mp)
	}
	if out := tc.Outdated(ctx); len(out) != 1 || out[0].Latest != "1.1.0" || out[0].Installed != "1.0.0" {
		t.Fatalf("outdated: %+v", out)
	}
	req, err := tc.UpgradeRequest(ctx, "review")
	if err != nil || req.Version != "1.1.0" || req.Marketplace != "acme" {
		t.Fatalf("upgrade request: %+v %v", req, err)
	}
	tc.inst.Pin(ctx, "review", "1.0.0")
	if _, err := tc.UpgradeRequest(ctx, "review"); core.ErrorCode(err) != core.ECONFLICT || !strings.Contains(err.Error(), "pinned") {
		t.Fatalf("upgrade of a pinned plugin: %v", err)
	}

	// A refused refresh keeps the last verified index.
	p := filepath.Join(m.dir, IndexFile)
	good, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(good), "Acme Plugins", "Acme Plugin$", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Refresh(ctx, "acme"); err == nil {
		t.Fatal("an index modified after signing was accepted")
	}
	if mp, _ := tc.Get("acme"); mp.Error == "" || mp.Version != 2 || mp.Owner != "Acme Plugins" {
		t.Fatalf("after a refused refresh: %+v", mp)
	}
	if res := tc.Search(ctx, "review"); len(res) != 1 || res[0].Latest != "1.1.0" {
		t.Fatalf("search after a refused refresh: %+v", res)
	}
	os.WriteFile(p, good, 0o644)

	// The lock reproduces the installation on another client.
	lock := tc.inst.lock()
	tc2 := newTestClient(t, m, &now)
	tc2.add(t, m, "")
	plan, err := tc2.InstallLocked(ctx, lock, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 1 || plan[0].Status != pluginapi.LockedWouldInstall || plan[0].Version != "1.0.0" || len(tc2.inst.requests) != 0 {
		t.Fatalf("dry run: %+v", plan)
	}
	done, err := tc2.InstallLocked(ctx, lock, true, false)
	if err != nil {
		t.Fatal(err)
	}
	got := tc2.inst.installed["review"]
	if len(done) != 1 || done[0].Status != pluginapi.LockedInstalled || got.Version != "1.0.0" || got.Digest != lock.Plugins[0].Digest || got.Pinned != "1.0.0" {
		t.Fatalf("locked install: %+v, installed %+v", done, got)
	}
	if again, err := tc2.InstallLocked(ctx, lock, true, false); err != nil || again[0].Status != pluginapi.LockedUnchanged {
		t.Fatalf("locked install again: %+v %v", again, err)
	}
	bad := *lock
	bad.Plugins = slices.Clone(lock.Plugins)
	bad.Plugins[0].Digest = strings.Repeat("a", 64)
	tc3 := newTestClient(t, m, &now)
	tc3.add(t, m, "")
	if _, err := tc3.InstallLocked(ctx, &bad, true, false); core.ErrorCode(err) != core.ECONFLICT || len(tc3.inst.requests) != 0 {
		t.Fatalf("a lock whose digest the marketplace no longer publishes: %v", err)
	}
}

// serve serves m over HTTP on a loopback address and returns its URL.
func serve(t *testing.T, m *market) string {
	t.Helper()
	srv := httptest.NewServer(Handler(m.dir))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestClientAddName: a marketplace is added under the name its signed
// index gives; another name is refused with the right one, not as a
// tampered index, and no name takes it.
func TestClientAddName(t *testing.T) {
	m := newMarket(t)
	now := t0.Add(time.Hour)
	tc := newTestClient(t, m, &now)
	ctx := context.Background()
	for _, c := range []struct{ name, want string }{
		{"other", "marketplace other: this marketplace is named acme; add it as acme"},
		{"1acme", `"1acme" must be lowercase letters and digits separated by single hyphens, starting with a letter`},
		{"a", `"a" must be 2 to 64 characters`},
		{"acme-", "must be lowercase letters"},
	} {
		_, err := tc.Add(ctx, pluginapi.AddMarketplaceRequest{Name: c.name, URL: tc.url, Keys: []string{m.verifier}})
		if core.ErrorCode(err) != core.EINVALID || RefusalReason(err) != "" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("add as %q: %v", c.name, err)
		}
	}
	if len(tc.List()) != 0 {
		t.Fatalf("a refused name was added: %+v", tc.List())
	}
	mp, err := tc.Add(ctx, pluginapi.AddMarketplaceRequest{URL: tc.url, Keys: []string{m.verifier}})
	if err != nil || mp.Name != "acme" || mp.Version != 1 {
		t.Fatalf("add without a name: %+v %v", mp, err)
	}
}

// TestNotInstalled: a download's failure reaches the API (the *core.Error
// in its chain) with the marketplace's name and "nothing was installed",
// keeping a refusal's reason and the code that picks the status.
func TestNotInstalled(t *testing.T) {
	for _, c := range []struct {
		err          error
		code, reason string
		msg          string
	}{
		{refuse(core.EINVALID, ReasonArchive, "plugin x 1.0.0: bad"), core.EINVALID, ReasonArchive, "marketplace acme: plugin x 1.0.0: bad; nothing was installed: refused (tampered archive)"},
		{core.Errorf(core.EINVALID, "unpack: a symlink"), core.EINVALID, "", "marketplace acme: unpack: a symlink; nothing was installed"},
		{core.Errorf(core.ENOTFOUND, "https://h/x.tar.gz: not found"), core.EUNAVAIL, "", "marketplace acme: download plugins/x.tar.gz: https://h/x.tar.gz: not found; nothing was installed"},
		{context.Canceled, core.EUNAVAIL, "", "marketplace acme: download plugins/x.tar.gz: context canceled; nothing was installed"},
	} {
		err := notInstalled("acme", "plugins/x.tar.gz", c.err)
		if core.ErrorCode(err) != c.code || RefusalReason(err) != c.reason || core.ErrorMessage(err) != c.msg {
			t.Errorf("%v: %s %q %q", c.err, core.ErrorCode(err), RefusalReason(err), core.ErrorMessage(err))
		}
	}
}

// TestKeyName: a preview names the trusted keys by name and hash, also
// when a key's base64 holds a "+" (about half of the keys do).
func TestKeyName(t *testing.T) {
	for _, tc := range []struct {
		keys []string
		want string
	}{
		{[]string{"acme+1a2b3c4d+AbC+dEf/gh="}, "acme+1a2b3c4d"},
		{[]string{"acme+1a2b3c4d+AbCdEf/gh=", "acme+5e6f7a8b+x+y+z"}, "acme+1a2b3c4d or acme+5e6f7a8b"},
	} {
		if got := keyName(tc.keys); got != tc.want {
			t.Errorf("keyName(%q) = %q, want %q", tc.keys, got, tc.want)
		}
	}
}

// TestClientRefusesExpiredIndex: an index past its expires time, which
// a refused refresh keeps, is still listed, but nothing is installed
// from it (freeze) until a refresh verifies a newer one.
func TestClientRefusesExpiredIndex(t *testing.T) {
	m := newMarket(t)
	now := t0.Add(time.Hour)
	tc := newTestClient(t, m, &now)
	ctx := context.Background()
	mp := tc.add(t, m, "")
	if mp.Expired {
		t.Fatalf("a new index is expired: %+v", mp)
	}
	if _, err := tc.Install(ctx, pluginapi.MarketplaceInstallRequest{Name: "calc", Consent: true}); err != nil {
		t.Fatal(err)
	}
	now = mp.Expires
	if _, err := tc.Refresh(ctx, "acme"); RefusalReason(err) != ReasonFreeze {
		t.Fatalf("refresh of an expired index: %v", err)
	}
	for _, version := range []string{"", "1.0.0", "^1"} {
		_, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Version: version}, nil)
		wantRefusal(t, err, ReasonFreeze, "marketplace acme: index version 1 expired on 2027-01-05", "kiln marketplace refresh acme")
		if core.ErrorCode(err) != core.ECONFLICT {
			t.Errorf("code %s", core.ErrorCode(err))
		}
	}
	_, err := tc.Install(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Consent: true})
	wantRefusal(t, err, ReasonFreeze)
	if len(tc.inst.requests) != 1 {
		t.Fatal("installed from an expired index")
	}
	if _, err := tc.UpgradeRequest(ctx, "calc"); RefusalReason(err) != ReasonFreeze {
		t.Fatalf("upgrade: %v", err)
	}
	if mp, _ := tc.Get("acme"); !mp.Expired || mp.Plugins != 2 {
		t.Fatalf("the marketplace does not say it needs a refresh: %+v", mp)
	}
	if res := tc.Search(ctx, "review"); len(res) != 1 || res[0].Latest != "" {
		t.Fatalf("search of an expired index: %+v", res)
	}
	p, err := tc.Plugin(ctx, "review", "")
	if err != nil || p.Versions[0].Offered || !strings.Contains(p.Versions[0].Reason, "expired on 2027-01-05; refresh it") {
		t.Fatalf("details of an expired index: %+v %v", p, err)
	}
	// The publisher builds again: the refresh verifies the new index.
	m.build(t, now)
	if _, err := tc.Refresh(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Install(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Consent: true}); err != nil {
		t.Fatal(err)
	}
}

// TestClientQuarantineCountsFromFirstSeen: a version published with a
// backdated time is in quarantine from when the client first saw it; the
// catalogue a marketplace has when it is added counts from its published
// times.
func TestClientQuarantineCountsFromFirstSeen(t *testing.T) {
	m := newMarket(t)
	now := t0.Add(100 * time.Hour)
	tc := newTestClient(t, m, &now)
	ctx := context.Background()
	tc.add(t, m, "72h")
	if res := tc.Search(ctx, "review"); len(res) != 1 || res[0].Latest != "1.0.0" {
		t.Fatalf("a catalogue published 100 hours ago, added now: %+v", res)
	}
	m.add(t, PublishPlugin{Path: bundle(t, m.dir, "src/review-1.1.0", "review", "1.1.0", "Look for bugs and typos.")}, now)
	editIndex(t, m, func(ix *Index) {
		for i := range ix.Plugins {
			if ix.Plugins[i].Name == "review" {
				ix.Plugins[i].Versions[0].Published = t0 // backdated
			}
		}
	})
	now = now.Add(time.Hour)
	seen := now
	if _, err := tc.Refresh(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	check := func(c *Client, when string, latest string) {
		t.Helper()
		if res := c.Search(ctx, "review"); len(res) != 1 || res[0].Latest != latest {
			t.Fatalf("%s: %+v", when, res)
		}
	}
	check(tc.Client, "a backdated version just seen", "1.0.0")
	p, err := tc.Plugin(ctx, "review", "")
	if err != nil || p.Versions[0].Version != "1.1.0" || p.Versions[0].Offered ||
		!strings.Contains(p.Versions[0].Reason, "in quarantine until "+seen.Add(72*time.Hour).Format(time.RFC3339)+" (first seen here "+seen.Format(time.RFC3339)+", published "+t0.Format(time.RFC3339)) {
		t.Fatalf("details: %+v %v", p.Versions, err)
	}
	if _, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Version: "^1.1"}, nil); core.ErrorCode(err) != core.ENOTFOUND || !strings.Contains(err.Error(), "quarantine") {
		t.Fatalf("a range reaching only the backdated version: %v", err)
	}
	c2, err := Open(Config{Dir: tc.dir, Plugins: tc.inst, Protocol: 3, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	check(c2, "after a restart", "1.0.0")
	now = seen.Add(72 * time.Hour)
	check(tc.Client, "72 hours after it was first seen", "1.1.0")
}

// TestClientPrereleases: "latest" leaves prereleases out, unless the
// installed version is one; an exact version or a range naming one
// reaches them.
func TestClientPrereleases(t *testing.T) {
	m := newMarket(t)
	for i, v := range []string{"2.0.0-rc.1", "2.0.0-rc.2"} {
		m.add(t, PublishPlugin{Path: bundle(t, m.dir, "src/review-"+v, "review", v, "Release candidate "+v+".")}, t0.Add(time.Duration(i+1)*time.Minute))
	}
	now := t0.Add(time.Hour)
	tc := newTestClient(t, m, &now)
	ctx := context.Background()
	tc.add(t, m, "")
	latest := func(when, want string) {
		t.Helper()
		if res := tc.Search(ctx, "review"); len(res) != 1 || res[0].Latest != want {
			t.Fatalf("%s: search says %+v, want %s", when, res, want)
		}
		pv, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "review"}, nil)
		if err != nil || pv.Version != want {
			t.Fatalf("%s: latest is %s %v, want %s", when, pv.Version, err, want)
		}
	}
	latest("nothing installed", "1.0.0")
	for c, want := range map[string]string{"^1": "1.0.0", ">=1": "1.0.0", "^2.0.0-rc.1": "2.0.0-rc.2", "2.0.0-rc.1": "2.0.0-rc.1"} {
		if pv, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Version: c}, nil); err != nil || pv.Version != want {
			t.Errorf("%q: %s %v, want %s", c, pv.Version, err, want)
		}
	}
	if _, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Version: "^2"}, nil); core.ErrorCode(err) != core.ENOTFOUND {
		t.Errorf("^2 reaches a prerelease: %v", err)
	}
	if _, err := tc.Install(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Consent: true}); err != nil {
		t.Fatal(err)
	}
	if out := tc.Outdated(ctx); len(out) != 0 {
		t.Fatalf("a prerelease makes 1.0.0 outdated: %+v", out)
	}
	if _, err := tc.UpgradeRequest(ctx, "review"); core.ErrorCode(err) != core.ECONFLICT {
		t.Fatalf("upgrade of 1.0.0 to a prerelease: %v", err)
	}
	if _, err := tc.Install(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Version: "2.0.0-rc.1", Consent: true}); err != nil {
		t.Fatal(err)
	}
	latest("a prerelease installed", "2.0.0-rc.2")
	if out := tc.Outdated(ctx); len(out) != 1 || out[0].Latest != "2.0.0-rc.2" {
		t.Fatalf("outdated: %+v", out)
	}
	if req, err := tc.UpgradeRequest(ctx, "review"); err != nil || req.Version != "2.0.0-rc.2" {
		t.Fatalf("upgrade of a prerelease: %+v %v", req, err)
	}
}

// TestClientUpgradeNeverDowngrades: a plugin installed by exact version
// ahead of what is offered (in quarantine) is up to date, not upgraded
// to the older version offered.
func TestClientUpgradeNeverDowngrades(t *testing.T) {
	m := newMarket(t)
	now := t0.Add(100 * time.Hour)
	tc := newTestClient(t, m, &now)
	ctx := context.Background()
	tc.add(t, m, "72h")
	m.add(t, PublishPlugin{Path: bundle(t, m.dir, "src/review-1.1.0", "review", "1.1.0", "Look for bugs and typos.")}, now)
	if _, err := tc.Refresh(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Install(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Version: "1.1.0", Consent: true}); err != nil {
		t.Fatal(err)
	}
	_, err := tc.UpgradeRequest(ctx, "review")
	if core.ErrorCode(err) != core.ECONFLICT || !strings.Contains(err.Error(), "review 1.1.0 is up to date: the newest version marketplace acme offers is 1.0.0") {
		t.Fatalf("upgrade: %v", err)
	}
	if out := tc.Outdated(ctx); len(out) != 0 {
		t.Fatalf("outdated: %+v", out)
	}
}

// TestClientLockWithFolderPlugins: a lock that also records a plugin
// installed from a folder installs the rest and says why it skipped that
// one; where that plugin is installed already, it is unchanged.
func TestClientLockWithFolderPlugins(t *testing.T) {
	m := newMarket(t)
	now := t0.Add(time.Hour)
	tc := newTestClient(t, m, &now)
	ctx := context.Background()
	tc.add(t, m, "")
	if _, err := tc.Install(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Consent: true}); err != nil {
		t.Fatal(err)
	}
	local := pluginapi.Info{ID: "local", Version: "0.1.0", SHA256: strings.Repeat("b", 64), Digest: strings.Repeat("c", 64)}
	tc.inst.installed["local"] = local
	lock := tc.inst.lock()
	if len(lock.Plugins) != 2 || lock.Plugins[0].ID != "local" || lock.Plugins[0].Source != nil {
		t.Fatalf("lock: %+v", lock)
	}
	done, err := tc.InstallLocked(ctx, lock, true, false)
	if err != nil || len(done) != 2 || done[0].Status != pluginapi.LockedUnchanged || done[1].Status != pluginapi.LockedUnchanged {
		t.Fatalf("the lock on the machine it was made on: %+v %v", done, err)
	}

	tc2 := newTestClient(t, m, &now)
	tc2.add(t, m, "")
	for _, dry := range []bool{true, false} {
		done, err := tc2.InstallLocked(ctx, lock, true, dry)
		if err != nil || len(done) != 2 {
			t.Fatalf("dry run %v: %+v %v", dry, done, err)
		}
		if done[0].Status != pluginapi.LockedSkipped || !strings.Contains(done[0].Reason, "installed from a folder") || !strings.Contains(done[0].Reason, "kiln plugin install ./local") {
			t.Errorf("dry run %v: the folder plugin: %+v", dry, done[0])
		}
		if want := map[bool]string{true: pluginapi.LockedWouldInstall, false: pluginapi.LockedInstalled}[dry]; done[1].Status != want {
			t.Errorf("dry run %v: review: %+v", dry, done[1])
		}
	}
	if _, ok := tc2.inst.installed["review"]; !ok || len(tc2.inst.installed) != 1 {
		t.Fatalf("installed: %+v", tc2.inst.installed)
	}
}
