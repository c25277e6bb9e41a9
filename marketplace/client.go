package marketplace

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/integrity"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// Installer is what the client installs into: the plugin registry
// (plugins/registry), an interface so that this package does not load
// plugins itself and tests can use a fake.
type Installer interface {
	// Preview describes installing the plugin folder at path.
	Preview(ctx context.Context, path string) (pluginapi.Preview, error)
	// Install installs the plugin folder at req.Path; see
	// registry.Registry.Install.
	Install(ctx context.Context, req pluginapi.InstallRequest) (pluginapi.Info, error)
	// List returns every plugin, built-ins included.
	List(ctx context.Context) []pluginapi.Info
	// Pin holds an installed plugin at its version.
	Pin(ctx context.Context, id, version string) (pluginapi.Info, error)
}

// StagedPreviewer is an Installer that previews a folder its caller
// hashed as it wrote it without hashing it again (registry.Registry):
// listing is the folder's integrity listing, whose digest is src.Digest.
// The client uses it, when its Installer has it, for the downloads it
// verified.
type StagedPreviewer interface {
	PreviewStaged(ctx context.Context, path string, src *pluginapi.Source, listing []byte) (pluginapi.Preview, error)
}

// Config configures a Client.
type Config struct {
	// Dir holds the client's state: <data root>/marketplaces.
	Dir string
	// Plugins is where plugins are installed.
	Plugins Installer
	// HTTP fetches https:// marketplaces; nil is NewHTTPClient().
	HTTP *http.Client
	// KilnVersion is this Kiln's version ("dev" satisfies every
	// min_kiln); Protocol the newest plugin protocol it speaks.
	KilnVersion string
	Protocol    int
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// Client is the marketplace client a Kiln server runs: the marketplaces
// the user added, the last index verified for each, and installs from
// them. It is safe for concurrent use.
//
// Its state is Dir/marketplaces.json (the trust kept per marketplace:
// keys, last index version and tree head) and, per marketplace,
// Dir/<name>/marketplace.json, the last verified index, so that search
// works offline. Downloads are unpacked into Dir/.staging/<digest>: an
// install moves the folder into place; a preview leaves it for the
// install that follows, and only the newest few previews are kept
// (evictStaged).
//
// No lock is held across the network for longer than one marketplace or
// one download needs: adding, refreshing or removing a marketplace locks
// its name, staging a download its digest, and writing the state file
// takes c.op only for the write.
type Client struct {
	cfg Config
	op  sync.Mutex // serialises writes of the state file
	// names locks a marketplace's name while it is added, refreshed or
	// removed; staging locks a download's digest while it is staged,
	// previewed or installed.
	names, staging keyLocks
	mu             sync.RWMutex
	st             clientState
	// loaded are the verified indexes by marketplace name, with their
	// search documents.
	loaded map[string]*loadedIndex
}

type loadedIndex struct {
	ix   *Index
	docs []searchDoc
	// claude is the listing of a Claude Code marketplace, whose ix it
	// holds; nil for a Kiln marketplace.
	claude *claudeListing
}

// clientState is marketplaces.json.
type clientState struct {
	Version      int                     `json:"version"`
	Marketplaces map[string]*marketplace `json:"marketplaces"`
}

// marketplace is what the client keeps about one marketplace.
type marketplace struct {
	URL        string        `json:"url"`
	Kind       string        `json:"kind"`
	Unsigned   bool          `json:"unsigned,omitempty"`
	Quarantine time.Duration `json:"quarantine"`
	Trust      Trust         `json:"trust"`
	Added      time.Time     `json:"added"`
	Refreshed  time.Time     `json:"refreshed,omitzero"`
	Error      string        `json:"error,omitempty"`
	// FirstSeen is when this client first saw a version (by plugin,
	// version and digest, seenKey) that is still in quarantine, when
	// that is later than the version's published time: the quarantine
	// counts from the later of the two, so a publisher (or a stolen key)
	// cannot shorten it by backdating "published".
	FirstSeen map[string]time.Time `json:"first_seen,omitempty"`
}

const (
	stateFile    = "marketplaces.json"
	stateVersion = 1
)

// Open reads the client's state in cfg.Dir (creating it when missing)
// and the last verified index of each marketplace; leftovers of an
// interrupted download are removed.
func Open(cfg Config) (*Client, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTP == nil {
		cfg.HTTP = NewHTTPClient()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("marketplaces: %w", err)
	}
	os.RemoveAll(filepath.Join(cfg.Dir, stagingDir))
	c := &Client{cfg: cfg, st: clientState{Version: stateVersion, Marketplaces: map[string]*marketplace{}}, loaded: map[string]*loadedIndex{}}
	data, err := os.ReadFile(filepath.Join(cfg.Dir, stateFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("marketplaces: %w", err)
	default:
		if err := json.Unmarshal(data, &c.st); err != nil {
			return nil, fmt.Errorf("marketplaces: %s: %w", stateFile, err)
		}
		if c.st.Version != stateVersion {
			return nil, fmt.Errorf("marketplaces: %s has version %d; this Kiln reads version %d", stateFile, c.st.Version, stateVersion)
		}
	}
	if c.st.Marketplaces == nil {
		c.st.Marketplaces = map[string]*marketplace{}
	}
	for name, m := range c.st.Marketplaces {
		l, err := c.readLoaded(name, m)
		if err != nil {
			m.Error = err.Error()
			cfg.Log.Warn("marketplace index not loaded", "marketplace", name, "error", err)
			continue
		}
		c.loaded[name] = l
	}
	return c, nil
}

func newLoaded(ix *Index) *loadedIndex {
	l := &loadedIndex{ix: ix}
	for i := range ix.Plugins {
		l.docs = append(l.docs, newSearchDoc(&ix.Plugins[i]))
	}
	return l
}

// readLoaded reads what was kept of a marketplace: its last verified
// index, or a Claude Code marketplace's listing.
func (c *Client) readLoaded(name string, m *marketplace) (*loadedIndex, error) {
	if m.Kind == pluginapi.MarketplaceClaude {
		return c.readClaude(name, m)
	}
	ix, err := c.readCached(name, m)
	if err != nil {
		return nil, err
	}
	return newLoaded(ix), nil
}

// readCached reads the last verified index of a marketplace, checking
// that its bytes are still those verified.
func (c *Client) readCached(name string, m *marketplace) (*Index, error) {
	raw, err := os.ReadFile(filepath.Join(c.cfg.Dir, name, IndexFile))
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != m.Trust.IndexSHA256 {
		return nil, core.Errorf(core.ECONFLICT, "marketplace %s: the index kept on disk is not the one verified; refresh it", name)
	}
	return ParseIndex(raw)
}

// saveState writes marketplaces.json atomically, as the state is now.
func (c *Client) saveState() error {
	c.op.Lock()
	defer c.op.Unlock()
	c.mu.RLock()
	data, err := json.MarshalIndent(c.st, "", "  ")
	c.mu.RUnlock()
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(c.cfg.Dir, stateFile), data)
}

// writeFileAtomic writes data to path through a temporary file, fsynced,
// then renamed.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// Add adds a marketplace and verifies its index: a marketplace whose
// index does not verify is not added. A Kiln marketplace needs at least
// one key; the keys given are the only ones ever trusted for it (until a
// rotation signed by one of them). The marketplace is added under the
// name its signed index gives: req.Name empty takes it (read from the
// index before verifying it), and another name is refused (EINVALID,
// naming the right one). A Claude Code marketplace (kind "claude") is
// unsigned: it is added only with req.TrustUnsigned, and refused
// (EINVALID, saying what trusting it means) without it.
func (c *Client) Add(ctx context.Context, req pluginapi.AddMarketplaceRequest) (pluginapi.Marketplace, error) {
	kind := cmp.Or(req.Kind, pluginapi.MarketplaceKiln)
	var quarantine time.Duration
	if req.Quarantine != "" {
		d, err := time.ParseDuration(req.Quarantine)
		if err != nil || d < 0 {
			return pluginapi.Marketplace{}, core.Errorf(core.EINVALID, "quarantine %q: not a duration such as 72h", req.Quarantine)
		}
		quarantine = d
	}
	unsigned := false
	switch kind {
	case pluginapi.MarketplaceClaude:
		if err := checkAddClaude(req); err != nil {
			return pluginapi.Marketplace{}, err
		}
		unsigned = true
	case pluginapi.MarketplaceKiln:
		if req.TrustUnsigned {
			return pluginapi.Marketplace{}, core.Errorf(core.EINVALID, "marketplace %s: trust_unsigned is for unsigned (Claude Code) marketplaces; a Kiln marketplace is verified with the key you give", req.Name)
		}
		if len(req.Keys) == 0 {
			return pluginapi.Marketplace{}, core.Errorf(core.EINVALID, "give the marketplace's key to trust (--key); Kiln never trusts a key a marketplace names for itself")
		}
		if err := CheckVerifierKeys(req.Keys); err != nil {
			return pluginapi.Marketplace{}, err
		}
	default:
		return pluginapi.Marketplace{}, core.Errorf(core.EINVALID, "marketplace kind %q: use %q or %q", kind, pluginapi.MarketplaceKiln, pluginapi.MarketplaceClaude)
	}
	if req.Name == "" && kind == pluginapi.MarketplaceKiln {
		f, err := NewFetcher(req.URL, c.cfg.HTTP)
		if err != nil {
			return pluginapi.Marketplace{}, err
		}
		if req.Name, err = PeekName(ctx, f); err != nil {
			return pluginapi.Marketplace{}, err
		}
	}
	if reason := checkName(req.Name); reason != "" {
		return pluginapi.Marketplace{}, core.Errorf(core.EINVALID, "marketplace name %s", reason)
	}
	defer c.names.lock(req.Name)()
	c.mu.RLock()
	_, exists := c.st.Marketplaces[req.Name]
	c.mu.RUnlock()
	if exists {
		return pluginapi.Marketplace{}, core.Errorf(core.ECONFLICT, "marketplace %s is already added; remove it first (kiln marketplace rm %s)", req.Name, req.Name)
	}
	m := &marketplace{URL: req.URL, Kind: kind, Unsigned: unsigned, Quarantine: quarantine, Trust: Trust{Keys: slices.Clone(req.Keys)}, Added: c.cfg.Now().UTC()}
	if err := c.refresh(ctx, req.Name, m); err != nil {
		return pluginapi.Marketplace{}, err
	}
	c.mu.Lock()
	c.st.Marketplaces[req.Name] = m
	c.mu.Unlock()
	if err := c.saveState(); err != nil {
		return pluginapi.Marketplace{}, err
	}
	c.cfg.Log.Info("marketplace added", "marketplace", req.Name, "kind", kind, "unsigned", unsigned, "url", redactURL(req.URL), "version", m.Trust.Version)
	return c.info(req.Name, m), nil
}

// refresh fetches and verifies m's index and, when it verifies, keeps it
// (on disk and loaded) and updates m.Trust. A refusal is returned and
// recorded in m.Error; the last verified index stays. A Claude Code
// marketplace is read and listed again (refreshClaude).
func (c *Client) refresh(ctx context.Context, name string, m *marketplace) error {
	if m.Kind == pluginapi.MarketplaceClaude {
		return c.refreshClaude(ctx, name, m)
	}
	f, err := NewFetcher(m.URL, c.cfg.HTTP)
	if err != nil {
		return err
	}
	v, err := Refresh(ctx, f, name, m.Trust, c.cfg.Now())
	if err != nil {
		c.mu.Lock()
		m.Error = err.Error()
		c.mu.Unlock()
		return err
	}
	dir := filepath.Join(c.cfg.Dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, IndexFile), v.Raw); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, SignatureFile), v.Sig); err != nil {
		return err
	}
	for _, r := range v.Rotated {
		c.cfg.Log.Warn("marketplace key rotated", "marketplace", name, "key", r)
	}
	now := c.cfg.Now().UTC()
	c.mu.Lock()
	var prev *Index
	if l := c.loaded[name]; l != nil {
		prev = l.ix
	}
	m.FirstSeen = firstSeen(m, prev, v.Index, now, m.Trust.Version == 0)
	m.Trust, m.Refreshed, m.Error = v.Trust, now, ""
	c.loaded[name] = newLoaded(v.Index)
	c.mu.Unlock()
	return nil
}

// Refresh fetches and verifies a marketplace's index again. A refusal
// (rollback, freeze, a log inconsistent with the last tree head, ...)
// keeps the last verified index and is returned.
func (c *Client) Refresh(ctx context.Context, name string) (pluginapi.Marketplace, error) {
	defer c.names.lock(name)()
	m, err := c.get(name)
	if err != nil {
		return pluginapi.Marketplace{}, err
	}
	rerr := c.refresh(ctx, name, m)
	if err := c.saveState(); err != nil {
		return pluginapi.Marketplace{}, err
	}
	if rerr != nil {
		c.cfg.Log.Warn("marketplace refresh refused", "marketplace", name, "error", rerr)
		return c.info(name, m), rerr
	}
	return c.info(name, m), nil
}

// Remove forgets a marketplace and its kept index; installed plugins
// stay installed.
func (c *Client) Remove(_ context.Context, name string) error {
	defer c.names.lock(name)()
	if _, err := c.get(name); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.st.Marketplaces, name)
	delete(c.loaded, name)
	c.mu.Unlock()
	if err := c.saveState(); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(c.cfg.Dir, name))
}

func (c *Client) get(name string) (*marketplace, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	m, ok := c.st.Marketplaces[name]
	if !ok {
		return nil, core.Errorf(core.ENOTFOUND, "marketplace %s is not added (kiln marketplace ls)", name)
	}
	return m, nil
}

// List returns the marketplaces, sorted by name.
func (c *Client) List() []pluginapi.Marketplace {
	c.mu.RLock()
	names := make([]string, 0, len(c.st.Marketplaces))
	for n := range c.st.Marketplaces {
		names = append(names, n)
	}
	c.mu.RUnlock()
	slices.Sort(names)
	out := make([]pluginapi.Marketplace, 0, len(names))
	for _, n := range names {
		if m, err := c.get(n); err == nil {
			out = append(out, c.info(n, m))
		}
	}
	return out
}

// Get returns one marketplace.
func (c *Client) Get(name string) (pluginapi.Marketplace, error) {
	m, err := c.get(name)
	if err != nil {
		return pluginapi.Marketplace{}, err
	}
	return c.info(name, m), nil
}

func (c *Client) info(name string, m *marketplace) pluginapi.Marketplace {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := pluginapi.Marketplace{
		Name: name, URL: m.URL, Kind: m.Kind, Keys: slices.Clone(m.Trust.Keys), Unsigned: m.Unsigned,
		Quarantine: m.Quarantine.String(), Version: m.Trust.Version, TreeSize: m.Trust.Tree.Size, TreeHash: m.Trust.Tree.Hash,
		Added: m.Added, Refreshed: m.Refreshed, Error: m.Error,
	}
	if out.Keys == nil {
		out.Keys = []string{}
	}
	if l := c.loaded[name]; l != nil {
		out.Owner, out.Expires, out.Plugins = l.ix.Owner.Name, l.ix.Expires, len(l.ix.Plugins)
		out.Expired = expired(l.ix, c.cfg.Now()) != ""
	}
	return out
}

// installed maps installed plugin ids to their versions.
func (c *Client) installed(ctx context.Context) map[string]pluginapi.Info {
	out := map[string]pluginapi.Info{}
	for _, in := range c.cfg.Plugins.List(ctx) {
		if !in.Builtin {
			out[in.ID] = in
		}
	}
	return out
}

// Search ranks the plugins of every marketplace for the text q (all
// plugins for ""), best first, then by name and marketplace.
func (c *Client) Search(ctx context.Context, q string) []pluginapi.MarketplacePlugin {
	terms := queryTerms(q)
	installed := c.installed(ctx)
	now := c.cfg.Now()
	c.mu.RLock()
	out := []pluginapi.MarketplacePlugin{}
	for name, l := range c.loaded {
		m := c.st.Marketplaces[name]
		for i, d := range l.docs {
			s := d.score(terms)
			if s == 0 {
				continue
			}
			p := c.summary(name, m, l.ix, &l.ix.Plugins[i], now, installed)
			p.Score = s
			out = append(out, p)
		}
	}
	c.mu.RUnlock()
	slices.SortFunc(out, func(a, b pluginapi.MarketplacePlugin) int {
		return cmp.Or(b.Score-a.Score, strings.Compare(a.Name, b.Name), strings.Compare(a.Marketplace, b.Marketplace))
	})
	return out
}

// summary describes p, a plugin of ix; c.mu is held.
func (c *Client) summary(mp string, m *marketplace, ix *Index, p *Plugin, now time.Time, installed map[string]pluginapi.Info) pluginapi.MarketplacePlugin {
	out := pluginapi.MarketplacePlugin{
		Name: p.Name, Marketplace: mp, Description: p.Description, Author: p.Author, Homepage: p.Homepage,
		License: p.License, Tags: slices.Clone(p.Tags), Kinds: slices.Clone(p.Kinds),
	}
	if out.Tags == nil {
		out.Tags = []string{}
	}
	if in, ok := installed[p.Name]; ok {
		out.Installed = in.Version
	}
	pre := isPrerelease(out.Installed)
	for i := range p.Versions {
		v := &p.Versions[i]
		if expired(ix, now) == "" && (pre || !isPrerelease(v.Version)) && c.offer(m, p.Name, v, now) == "" {
			out.Latest = v.Version
			break
		}
	}
	return out
}

// expired says why nothing is installed from ix at now: it is past its
// expires time (a Claude Code listing has none). "" when it is not.
func expired(ix *Index, now time.Time) string {
	if ix.Expires.IsZero() || now.Before(ix.Expires) {
		return ""
	}
	return fmt.Sprintf("index version %d expired on %s", ix.Version, day(ix.Expires))
}

// offer says why v is not offered by default ("" when it is): it is
// yanked (for a Claude Code marketplace: not installable), still in the
// marketplace's quarantine, or needs a newer Kiln or protocol.
func (c *Client) offer(m *marketplace, name string, v *Version, now time.Time) string {
	if r := c.unsupported(v); r != "" {
		return r
	}
	if v.Yanked != "" && m.Kind == pluginapi.MarketplaceClaude {
		return v.Yanked
	}
	if v.Yanked != "" {
		return "yanked: " + v.Yanked
	}
	since, seen := v.Published, m.FirstSeen[seenKey(name, v)]
	if seen.After(since) {
		since = seen
	}
	if now.Sub(since) >= m.Quarantine {
		return ""
	}
	published := "published " + v.Published.UTC().Format(time.RFC3339)
	if since.Equal(seen) {
		published = "first seen here " + seen.UTC().Format(time.RFC3339) + ", " + published
	}
	return fmt.Sprintf("in quarantine until %s (%s; this marketplace offers versions after %s)",
		since.Add(m.Quarantine).UTC().Format(time.RFC3339), published, m.Quarantine)
}

// seenKey names version v of plugin name in marketplace.FirstSeen.
func seenKey(name string, v *Version) string {
	return name + "@" + v.Version + " " + v.Digest
}

// firstSeen returns what m.FirstSeen becomes once ix, verified at now,
// replaces prev (nil when none was loaded): a version ix is the first to
// show (by name, version and digest) is first seen now, unless its
// published time is later. An entry is kept only while it can still
// hold a version in quarantine, and none while the marketplace has no
// quarantine. When a marketplace is added (first), nothing is recorded:
// its catalogue counts from the published times.
func firstSeen(m *marketplace, prev, ix *Index, now time.Time, first bool) map[string]time.Time {
	if m.Quarantine <= 0 || first {
		return nil
	}
	known := map[string]bool{}
	if prev != nil {
		for i := range prev.Plugins {
			for j := range prev.Plugins[i].Versions {
				known[seenKey(prev.Plugins[i].Name, &prev.Plugins[i].Versions[j])] = true
			}
		}
	}
	out := map[string]time.Time{}
	for i := range ix.Plugins {
		for j := range ix.Plugins[i].Versions {
			v := &ix.Plugins[i].Versions[j]
			k := seenKey(ix.Plugins[i].Name, v)
			seen, ok := m.FirstSeen[k]
			switch {
			case !ok && !known[k]:
				seen = now
			case !ok:
				continue
			}
			if seen.After(v.Published) && now.Sub(seen) < m.Quarantine {
				out[k] = seen
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// unsupported says why this Kiln cannot run v, or "".
func (c *Client) unsupported(v *Version) string {
	if v.Protocol > c.cfg.Protocol && c.cfg.Protocol > 0 {
		return fmt.Sprintf("speaks plugin protocol %d; this Kiln speaks up to %d", v.Protocol, c.cfg.Protocol)
	}
	if v.MinKiln == "" || c.cfg.KilnVersion == "" || c.cfg.KilnVersion == "dev" {
		return ""
	}
	want, err1 := semver.NewVersion(v.MinKiln)
	have, err2 := semver.NewVersion(c.cfg.KilnVersion)
	if err1 == nil && err2 == nil && have.LessThan(want) {
		return fmt.Sprintf("needs Kiln %s or newer; this is %s", v.MinKiln, c.cfg.KilnVersion)
	}
	return ""
}

// Plugin describes one plugin of a marketplace (any marketplace offering
// it when mp is "") with every version.
func (c *Client) Plugin(ctx context.Context, name, mp string) (pluginapi.MarketplacePlugin, error) {
	installed := c.installed(ctx)
	now := c.cfg.Now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	mpName, p, err := c.find(name, mp)
	if err != nil {
		return pluginapi.MarketplacePlugin{}, err
	}
	m := c.st.Marketplaces[mpName]
	l := c.loaded[mpName]
	out := c.summary(mpName, m, l.ix, p, now, installed)
	for i := range p.Versions {
		v := &p.Versions[i]
		reason := c.offer(m, p.Name, v, now)
		if r := expired(l.ix, now); r != "" {
			reason = "the marketplace's " + r + "; refresh it"
		}
		perms := v.Manifest.Consent().Lines()
		if m.Kind == pluginapi.MarketplaceClaude && v.Digest == "" {
			perms = []string{claudeUnknownPermissions}
		}
		out.Versions = append(out.Versions, pluginapi.MarketplaceVersion{
			Version: v.Version, Published: v.Published, Digest: v.Digest, ArchiveSHA256: v.Artifact.SHA256,
			Size: v.Artifact.Size, Runtime: string(v.Manifest.Runtime), Provides: slices.Clone(v.Manifest.Provides),
			Permissions: perms, MinKiln: v.MinKiln, Protocol: v.Protocol,
			Offered: reason == "", Reason: reason, Signed: !m.Unsigned, LogIndex: l.ix.Log.Index,
		})
	}
	return out, nil
}

// find returns the marketplace and plugin named; c.mu is held. With mp
// "" the name must be offered by exactly one marketplace.
func (c *Client) find(name, mp string) (string, *Plugin, error) {
	var found []string
	var plugin *Plugin
	for n, l := range c.loaded {
		if mp != "" && n != mp {
			continue
		}
		if i, ok := slices.BinarySearchFunc(l.ix.Plugins, name, func(p Plugin, name string) int { return strings.Compare(p.Name, name) }); ok {
			found = append(found, n)
			plugin = &l.ix.Plugins[i]
		}
	}
	switch {
	case len(found) == 1:
		return found[0], plugin, nil
	case len(found) > 1:
		slices.Sort(found)
		return "", nil, core.Errorf(core.ECONFLICT, "plugin %s is offered by %s; choose one (--marketplace)", name, strings.Join(found, " and "))
	case mp != "":
		if _, ok := c.st.Marketplaces[mp]; !ok {
			return "", nil, core.Errorf(core.ENOTFOUND, "marketplace %s is not added (kiln marketplace ls)", mp)
		}
		return "", nil, core.Errorf(core.ENOTFOUND, "marketplace %s offers no plugin %s", mp, name)
	}
	return "", nil, core.Errorf(core.ENOTFOUND, "no marketplace offers a plugin %s (kiln plugin search %s)", name, name)
}

// resolve picks the version of plugin name that constraint asks for: the
// newest offered one for "" or "latest", a prerelease only when the
// installed version (installed, "" for none) is one; the newest offered
// one a range ("^1.2", "~1.2", ">=1 <2", "1.x") allows, which leaves
// prereleases out unless it names one itself ("^2.0.0-rc.1"); or an
// exact version, which is the only way to a quarantined or yanked one.
// Nothing is picked from an index past its expires time (ReasonFreeze):
// a refresh that was refused, or never made, keeps it, and it may offer
// what its publisher has since yanked.
func (c *Client) resolve(name, constraint, mp, installed string) (string, *marketplace, *Index, *Version, error) {
	now := c.cfg.Now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	mpName, p, err := c.find(name, mp)
	if err != nil {
		return "", nil, nil, nil, err
	}
	// A copy: a refresh may change the marketplace's trust meanwhile.
	mc := *c.st.Marketplaces[mpName]
	m, ix := &mc, c.loaded[mpName].ix
	if r := expired(ix, now); r != "" {
		return "", nil, nil, nil, refuse(core.ECONFLICT, ReasonFreeze, "marketplace %s: %s; nothing is installed from it until a refresh verifies a newer one (kiln marketplace refresh %s)", mpName, r, mpName)
	}
	if exact, err := semver.StrictNewVersion(strings.TrimPrefix(constraint, "v")); err == nil {
		for i := range p.Versions {
			v := &p.Versions[i]
			if sv, err := semver.StrictNewVersion(v.Version); err == nil && sv.Equal(exact) {
				if r := c.unsupported(v); r != "" {
					return "", nil, nil, nil, core.Errorf(core.EINVALID, "%s %s %s", name, v.Version, r)
				}
				return mpName, m, ix, v, nil
			}
		}
		return "", nil, nil, nil, core.Errorf(core.ENOTFOUND, "marketplace %s has no version %s of %s (versions: %s)", mpName, constraint, name, versionList(p))
	}
	var want *semver.Constraints
	if constraint != "" && constraint != "latest" {
		if want, err = semver.NewConstraint(constraint); err != nil {
			return "", nil, nil, nil, core.Errorf(core.EINVALID, "version %q: not a version or a range such as ^1.2: %v", constraint, err)
		}
	}
	var skipped, prereleases []string
	pre := want == nil && isPrerelease(installed)
	for i := range p.Versions {
		v := &p.Versions[i]
		sv, err := semver.StrictNewVersion(v.Version)
		if err != nil || (want != nil && !want.Check(sv)) {
			continue
		}
		if want == nil && !pre && sv.Prerelease() != "" {
			prereleases = append(prereleases, v.Version)
			continue
		}
		if r := c.offer(m, p.Name, v, now); r != "" {
			skipped = append(skipped, v.Version+" "+r)
			continue
		}
		return mpName, m, ix, v, nil
	}
	msg := fmt.Sprintf("no version of %s in marketplace %s matches %q", name, mpName, cmp.Or(constraint, "latest"))
	if len(skipped) > 0 {
		msg += " and is offered: " + strings.Join(skipped, "; ") + "; ask for an exact version to install one anyway"
	}
	if len(prereleases) > 0 {
		msg += "; prereleases (" + strings.Join(prereleases, ", ") + ") are installed only when asked for, by exact version or a range that names one"
	}
	return "", nil, nil, nil, core.Errorf(core.ENOTFOUND, "%s", msg)
}

func versionList(p *Plugin) string {
	var vs []string
	for _, v := range p.Versions {
		vs = append(vs, v.Version)
	}
	return strings.Join(vs, ", ")
}

// staged is a downloaded, verified and unpacked (or converted) plugin
// version.
type staged struct {
	mp      string
	version *Version
	dir     string
	listing []byte // the folder's integrity listing
	preview pluginapi.MarketplacePreview
	// source is what the registry records of where it came from; nil for
	// a server.json, which no marketplace published.
	source *pluginapi.Source
	// keep is true for a download kept in Dir/.staging/<digest> for the
	// install that follows its preview; a conversion is made anew.
	keep bool
	// unlock releases the download's digest (nil for a conversion).
	unlock func()
}

// release ends the use of a staged folder: a download's digest is
// unlocked; a conversion, which nothing else uses, is removed unless
// installed (moved away) already.
func (s *staged) release() {
	if !s.keep {
		os.RemoveAll(s.dir)
	}
	if s.unlock != nil {
		s.unlock()
	}
}

// Progress hears of a download: done of total bytes.
type Progress = func(done, total int64)

// Preview resolves req, downloads the version's archive (reporting
// progress), verifies it against the signed index (size, archive sha256,
// folder digest) and says what installing it would do, with the
// registry's preview of the verified folder. Nothing is installed.
func (c *Client) Preview(ctx context.Context, req pluginapi.MarketplaceInstallRequest, progress Progress) (pluginapi.MarketplacePreview, error) {
	s, err := c.stage(ctx, req, progress, true)
	if err != nil {
		return pluginapi.MarketplacePreview{}, err
	}
	s.release()
	return s.preview, nil
}

// stage resolves, downloads, verifies and unpacks a version into
// Dir/.staging/<digest>, reusing a staged copy whose digest still holds
// and whose manifest asks for what this index shows (CheckManifest: the
// copy may be another marketplace's, or an earlier index's), and evicts
// old previews (evictStaged). The digest stays locked until the caller
// releases the staged folder. A plugin of a Claude Code marketplace is
// converted instead (stageClaude), as is an MCP Registry server.json
// (stageMCP); both are always previewed, a conversion's preview being
// how it is checked.
func (c *Client) stage(ctx context.Context, req pluginapi.MarketplaceInstallRequest, progress Progress, preview bool) (_ *staged, err error) {
	if req.MCPRegistry != nil {
		return c.stageMCP(ctx, req)
	}
	mpName, m, ix, v, err := c.resolve(req.Name, req.Version, req.Marketplace, c.installed(ctx)[req.Name].Version)
	if err != nil {
		return nil, err
	}
	if m.Kind == pluginapi.MarketplaceClaude {
		return c.stageClaude(ctx, req.Name, mpName, m, v)
	}
	unlock := c.staging.lock(v.Digest)
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	c.evictStaged(v.Digest)
	dir := filepath.Join(c.cfg.Dir, stagingDir, v.Digest)
	t, err := integrity.Tree(dir)
	listing := t.Listing
	switch {
	case err != nil || t.Digest != v.Digest:
		os.RemoveAll(dir)
		if listing, err = c.download(ctx, mpName, m, v, req.Name, dir, progress); err != nil {
			return nil, err
		}
	default:
		if err := checkStaged(dir, req.Name, v); err != nil {
			os.RemoveAll(dir)
			return nil, notInstalled(mpName, v.Artifact.URL, err)
		}
	}
	now := c.cfg.Now()
	os.Chtimes(dir, now, now) // when it was staged, for evictStaged
	s := &staged{mp: mpName, version: v, dir: dir, listing: listing, keep: true, unlock: unlock, source: &pluginapi.Source{
		Marketplace: mpName, Version: v.Version, ArchiveSHA256: v.Artifact.SHA256, Digest: v.Digest, IndexVersion: ix.Version,
	}}
	if !preview {
		return s, nil
	}
	var pv pluginapi.Preview
	if sp, ok := c.cfg.Plugins.(StagedPreviewer); ok {
		pv, err = sp.PreviewStaged(ctx, dir, s.source, listing)
	} else {
		pv, err = c.cfg.Plugins.Preview(ctx, dir)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if pv.ID != req.Name {
		os.RemoveAll(dir)
		return nil, core.Errorf(core.EINVALID, "marketplace %s: the archive of %s %s holds plugin %s: refused", mpName, req.Name, v.Version, pv.ID)
	}
	if pv.Version != v.Version {
		os.RemoveAll(dir)
		return nil, core.Errorf(core.EINVALID, "marketplace %s: the archive of %s %s holds version %s: refused", mpName, req.Name, v.Version, pv.Version)
	}
	verified := []string{
		fmt.Sprintf("index version %d signed by %s, a trusted key", ix.Version, keyName(m.Trust.Keys)),
		fmt.Sprintf("index in log entry %d of tree %d", ix.Log.Index, m.Trust.Tree.Size),
		fmt.Sprintf("archive size %d bytes", v.Artifact.Size),
		"archive sha256 " + v.Artifact.SHA256,
		"folder digest " + v.Digest,
	}
	s.preview = pluginapi.MarketplacePreview{
		Marketplace: mpName, Preview: pv, Digest: v.Digest, ArchiveSHA256: v.Artifact.SHA256, Size: v.Artifact.Size, Verified: verified,
	}
	return s, nil
}

// checkStaged checks that the plugin folder dir, staged earlier with v's
// digest, holds the manifest v's summary shows (CheckManifest).
func checkStaged(dir, name string, v *Version) error {
	man, err := plugins.LoadManifest(dir)
	if err != nil {
		return core.Errorf(core.EINVALID, "plugin %s %s: %v", name, v.Version, err)
	}
	return CheckManifest(name, *v, man)
}

// download streams v's archive through its checks into dir: the size
// and sha256 against the signed index as it is read (FetchArtifact), the
// files unpacked as they arrive under Unpack's limits and hashed as they
// are written (UnpackTree), then the folder's digest and that its
// manifest asks for what the index showed (CheckDigest, CheckManifest).
// An archive that fails any check is removed with everything unpacked
// from it; the whole archive is read even when unpacking fails, so that
// a tampered archive is refused as such.
func (c *Client) download(ctx context.Context, mpName string, m *marketplace, v *Version, name, dir string, progress Progress) ([]byte, error) {
	f, err := NewFetcher(m.URL, c.cfg.HTTP)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, err
	}
	failed := func(err error) error {
		os.RemoveAll(dir)
		return notInstalled(mpName, v.Artifact.URL, err)
	}
	pr, pw := io.Pipe()
	fetched := make(chan error, 1)
	go func() {
		_, err := FetchArtifact(ctx, f, &progressWriter{w: pw, total: v.Artifact.Size, progress: progress}, name, *v)
		pw.CloseWithError(cmp.Or(err, io.EOF))
		fetched <- err
	}()
	t, uerr := UnpackTree(pr, dir, DefaultLimits)
	io.Copy(io.Discard, pr) // what Unpack left: FetchArtifact reads at most one byte past the size
	pr.Close()
	if err := <-fetched; err != nil {
		return nil, failed(err)
	}
	if uerr != nil {
		return nil, failed(uerr)
	}
	if err := CheckDigest(name, *v, t.Digest); err != nil {
		return nil, failed(err)
	}
	if err := checkStaged(dir, name, v); err != nil {
		return nil, failed(err)
	}
	return t.Listing, nil
}

// notInstalled words the failure of a download from the marketplace mp
// of the archive at url as the error a user reads, in the message the
// API sends (core.ErrorMessage), not in a wrapping that would stop at
// the API: "marketplace acme: <why>; nothing was installed". A refusal
// stays one, its reason last; an archive that breaks the rules is
// EINVALID, and any other failure (the network, the disk) EUNAVAIL.
func notInstalled(mp, url string, err error) error {
	var r *Refusal
	var ce *core.Error
	switch {
	case errors.As(err, &r):
		msg := strings.TrimSuffix(r.Message, ": refused ("+r.Reason+")")
		return refuse(r.Code, r.Reason, "marketplace %s: %s; nothing was installed", mp, msg)
	case errors.As(err, &ce) && ce.Code == core.EINVALID:
		return core.Errorf(core.EINVALID, "marketplace %s: %s; nothing was installed", mp, ce.Message)
	case ce != nil:
		return core.Errorf(core.EUNAVAIL, "marketplace %s: download %s: %s; nothing was installed", mp, url, ce.Message)
	}
	return core.Errorf(core.EUNAVAIL, "marketplace %s: download %s: %v; nothing was installed", mp, url, err)
}

// progressWriter reports the bytes written through it.
type progressWriter struct {
	w        io.Writer
	n, total int64
	progress Progress
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.n += int64(n)
	if p.progress != nil && n > 0 {
		p.progress(p.n, p.total)
	}
	return n, err
}

// Install installs a marketplace plugin: it stages (downloads and
// verifies) the version req asks for and hands the verified folder to
// the registry with the consent req carries, recording where it came
// from. A failure at any point leaves the installed version running.
func (c *Client) Install(ctx context.Context, req pluginapi.MarketplaceInstallRequest) (pluginapi.Info, error) {
	s, err := c.stage(ctx, req, nil, false)
	if err != nil {
		return pluginapi.Info{}, err
	}
	defer s.release()
	defer os.RemoveAll(s.dir)
	if req.Digest != "" && req.Digest != s.version.Digest {
		where := ""
		if s.mp != "" {
			where = " in marketplace " + s.mp
		}
		return pluginapi.Info{}, core.Errorf(core.ECONFLICT, "%s %s%s is now %s, not the %s previewed; review it again", cmp.Or(req.Name, s.preview.ID), s.version.Version, where, s.version.Digest, req.Digest)
	}
	return c.installStaged(ctx, s, req.Consent, req.AllowDowngrade)
}

// installStaged hands the staged folder to the registry, which moves it
// into place, with the consent given (bound to the previewed sha256 when
// the staging previewed it), recording where it came from.
func (c *Client) installStaged(ctx context.Context, s *staged, consent, allowDowngrade bool) (pluginapi.Info, error) {
	info, err := c.cfg.Plugins.Install(ctx, pluginapi.InstallRequest{
		Path: s.dir, Move: true, Listing: s.listing, Consent: consent, SHA256: s.preview.SHA256, AllowDowngrade: allowDowngrade, Source: s.source,
	})
	if err == nil {
		c.cfg.Log.Info("plugin installed from marketplace", "plugin", info.ID, "version", info.Version, "marketplace", s.mp, "digest", s.version.Digest)
	}
	return info, err
}

// InstallLocked reproduces the installation a lock file records
// (plugins.lock of another data root): every plugin at exactly its
// version, from the marketplace it came from, whose published digests
// must still be the locked ones. With dryRun it downloads and verifies
// each and says what it would do and what each asks for, installing
// nothing; otherwise it installs with consent (given for the dry run's
// permissions) and pins what the lock pins, allowing a downgrade (the
// lock's version is what is wanted). A plugin installed here already at
// the locked version and digest is unchanged. One the lock records
// without a marketplace (installed from a folder or a server.json)
// cannot be fetched here: it is skipped, with the reason in its result,
// and the others are installed. One converted from a Claude Code
// marketplace read from a folder (no commit pins it) is refused, while
// one whose marketplace was read from git is converted again from the
// marketplace at the locked commit. It stops at the first failure, which
// it returns with the results so far: what was installed stays.
func (c *Client) InstallLocked(ctx context.Context, lock *pluginapi.Lock, consent, dryRun bool) ([]pluginapi.LockedResult, error) {
	installed := c.installed(ctx)
	out := []pluginapi.LockedResult{}
	for _, p := range lock.Plugins {
		r := pluginapi.LockedResult{ID: p.ID, Version: p.Version}
		if p.Source != nil {
			r.Marketplace = p.Source.Marketplace
		}
		in, ok := installed[p.ID]
		if ok && in.Version == p.Version && in.Digest == p.Digest {
			r.Status = pluginapi.LockedUnchanged
			out = append(out, r)
			continue
		}
		if p.Source == nil {
			r.Status, r.Installed = pluginapi.LockedSkipped, in.Version
			r.Reason = fmt.Sprintf("installed from a folder or a server.json, not a marketplace: the lock cannot fetch it; install it as it was installed (kiln plugin install ./%s, or --mcp-registry)", p.ID)
			out = append(out, r)
			continue
		}
		m, err := c.get(p.Source.Marketplace)
		if err != nil {
			return out, err
		}
		if m.Kind == pluginapi.MarketplaceClaude {
			res, err := c.installLockedClaude(ctx, p, m, r, consent, dryRun)
			if err != nil {
				return out, err
			}
			out = append(out, res)
			continue
		}
		_, _, _, v, err := c.resolve(p.ID, p.Version, p.Source.Marketplace, "")
		if err != nil {
			return out, err
		}
		if v.Digest != p.Digest || v.Artifact.SHA256 != p.Source.ArchiveSHA256 {
			return out, core.Errorf(core.ECONFLICT, "marketplace %s now publishes %s %s with folder digest %s and archive sha256 %s; the lock file records %s and %s: refused",
				p.Source.Marketplace, p.ID, p.Version, v.Digest, v.Artifact.SHA256, p.Digest, p.Source.ArchiveSHA256)
		}
		req := pluginapi.MarketplaceInstallRequest{Name: p.ID, Version: p.Version, Marketplace: p.Source.Marketplace, Digest: p.Digest, AllowDowngrade: true}
		if dryRun {
			s, err := c.stage(ctx, req, nil, true)
			if err != nil {
				return out, err
			}
			s.release()
			r.Status, r.Permissions, r.NeedsConsent = pluginapi.LockedWouldInstall, s.preview.Permissions, s.preview.NeedsConsent
			if s.preview.Installed != "" {
				r.Installed, r.Permissions = s.preview.Installed, s.preview.Added
			}
			out = append(out, r)
			continue
		}
		req.Consent = consent
		info, err := c.Install(ctx, req)
		if err != nil {
			return out, err
		}
		if p.Pinned {
			if _, err := c.cfg.Plugins.Pin(ctx, p.ID, p.Version); err != nil {
				return out, err
			}
		}
		r.Status, r.Permissions = pluginapi.LockedInstalled, info.Permissions
		out = append(out, r)
	}
	return out, nil
}

// installLockedClaude is InstallLocked of one plugin converted from
// Claude Code marketplace m (lockedClaude), completing r.
func (c *Client) installLockedClaude(ctx context.Context, p pluginapi.LockedPlugin, m *marketplace, r pluginapi.LockedResult, consent, dryRun bool) (pluginapi.LockedResult, error) {
	s, err := c.lockedClaude(ctx, p, m)
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(s.dir)
	if dryRun {
		r.Status, r.Permissions, r.NeedsConsent = pluginapi.LockedWouldInstall, s.preview.Permissions, s.preview.NeedsConsent
		if s.preview.Installed != "" {
			r.Installed, r.Permissions = s.preview.Installed, s.preview.Added
		}
		return r, nil
	}
	info, err := c.installStaged(ctx, s, consent, true)
	if err != nil {
		return r, err
	}
	if p.Pinned {
		if _, err := c.cfg.Plugins.Pin(ctx, p.ID, p.Version); err != nil {
			return r, err
		}
	}
	r.Status, r.Permissions = pluginapi.LockedInstalled, info.Permissions
	return r, nil
}

// Outdated lists installed marketplace plugins with a newer version
// offered by the marketplace they came from.
func (c *Client) Outdated(ctx context.Context) []pluginapi.Outdated {
	out := []pluginapi.Outdated{}
	for _, in := range c.cfg.Plugins.List(ctx) {
		if in.Builtin || in.Source == nil {
			continue
		}
		_, _, _, v, err := c.resolve(in.ID, "", in.Source.Marketplace, in.Version)
		if err != nil {
			continue
		}
		if !newer(v.Version, in.Version) {
			continue
		}
		out = append(out, pluginapi.Outdated{Name: in.ID, Marketplace: in.Source.Marketplace, Installed: in.Version, Latest: v.Version, Pinned: in.Pinned})
	}
	return out
}

// UpgradeRequest resolves what upgrading an installed plugin means: the
// newest offered version of its marketplace, or an ECONFLICT when it is
// pinned or up to date (the newest offered is not newer than the
// installed one, which may have been installed by exact version).
func (c *Client) UpgradeRequest(ctx context.Context, id string) (pluginapi.MarketplaceInstallRequest, error) {
	var in *pluginapi.Info
	for _, i := range c.cfg.Plugins.List(ctx) {
		if i.ID == id {
			in = &i
		}
	}
	switch {
	case in == nil:
		return pluginapi.MarketplaceInstallRequest{}, core.Errorf(core.ENOTFOUND, "plugin %s is not installed", id)
	case in.Source == nil:
		return pluginapi.MarketplaceInstallRequest{}, core.Errorf(core.EINVALID, "plugin %s was not installed from a marketplace; install the new version as it was installed (from its folder, or --mcp-registry)", id)
	case in.Pinned != "":
		return pluginapi.MarketplaceInstallRequest{}, core.Errorf(core.ECONFLICT, "plugin %s is pinned to %s (kiln plugin unpin %s)", id, in.Pinned, id)
	}
	_, _, _, v, err := c.resolve(id, "", in.Source.Marketplace, in.Version)
	if err != nil {
		return pluginapi.MarketplaceInstallRequest{}, err
	}
	if !newer(v.Version, in.Version) {
		return pluginapi.MarketplaceInstallRequest{}, core.Errorf(core.ECONFLICT, "plugin %s %s is up to date: the newest version marketplace %s offers is %s", id, in.Version, in.Source.Marketplace, v.Version)
	}
	return pluginapi.MarketplaceInstallRequest{Name: id, Version: v.Version, Marketplace: in.Source.Marketplace}, nil
}

// newer reports whether version a follows version b by semantic version
// precedence; false when either is not one.
func newer(a, b string) bool {
	va, err1 := semver.NewVersion(a)
	vb, err2 := semver.NewVersion(b)
	return err1 == nil && err2 == nil && va.GreaterThan(vb)
}

// isPrerelease reports whether version v is a prerelease ("2.0.0-rc.1").
func isPrerelease(v string) bool {
	sv, err := semver.NewVersion(v)
	return err == nil && sv.Prerelease() != ""
}

// PeekName reads the name a marketplace's index gives itself, unverified:
// for naming a marketplace before verifying it under that name.
func PeekName(ctx context.Context, f Fetcher) (string, error) {
	raw, err := f.Fetch(ctx, IndexFile, MaxIndexSize)
	if err != nil {
		return "", err
	}
	var head struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &head); err != nil || head.Name == "" {
		return "", core.Errorf(core.EINVALID, "%s is not a marketplace index: it has no name", IndexFile)
	}
	return head.Name, nil
}

// keyName names the keys trusted by their note names and hashes
// ("acme+1a2b3c4d"); a key's base64 part, which may hold a "+", is
// left out.
func keyName(keys []string) string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = keyID(k)
	}
	return strings.Join(names, " or ")
}
