package marketplace

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/marketplace/claude"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// A Claude Code marketplace (kind "claude") is an unsigned source: the
// client adds one only with the user's explicit trust, and from then on
// treats it like a Kiln marketplace whose index it wrote itself. Each
// refresh reads the marketplace (a folder in place, or a clone of its
// git repository at its default branch's head) and converts every plugin
// kept in the marketplace's own folders (claude.Fetcher.Convert) to learn
// its version, kinds, digest and permissions; a plugin in a git
// repository of its own is listed from its entry and fetched, at the
// commit the entry pins, only to preview or install it. The listing is
// kept as Dir/<name>/claude.json. Installing converts the plugin again,
// from the marketplace at the commit the refresh read, and the registry
// installs the bundle as it installs a Kiln plugin, with consent.

// claudeListingFile is a Claude Code marketplace's listing, in Dir/<name>.
const claudeListingFile = "claude.json"

// claudeListingVersion is the version of claude.json this client writes.
const claudeListingVersion = 1

// claudeListing is what a refresh of a Claude Code marketplace keeps.
type claudeListing struct {
	Version int `json:"version"`
	// Name is the name the marketplace gives itself; Commit the git
	// commit it was read at, "" when it was read from a folder in place
	// (then nothing pins it).
	Name   string    `json:"name"`
	Commit string    `json:"commit,omitempty"`
	Read   time.Time `json:"read"`
	// Index lists the plugins as search, details and the resolver read
	// every marketplace: one version each, unsigned (Log.Index -1, no
	// artifact). A version's Yanked says why it cannot be installed (its
	// conversion was refused); asked for by exact version, it is
	// converted again and the refusal returned.
	Index Index `json:"index"`
	// Plugins says more of each plugin, by plugin id.
	Plugins map[string]claudePlugin `json:"plugins"`
}

// claudePlugin is one plugin of a Claude Code marketplace.
type claudePlugin struct {
	// Name is the plugin's name in the marketplace; Source where it is
	// (claude.Source.String()).
	Name   string `json:"name"`
	Source string `json:"source"`
	// Converted is true when the refresh converted the plugin: its
	// listed version, kinds, digest and permissions are the bundle's.
	// Otherwise (a git repository of its own) they are its entry's word
	// and its digest is empty until it is fetched.
	Converted bool     `json:"converted,omitempty"`
	Skipped   []string `json:"skipped,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`
}

// claudeUnknownPermissions is what a plugin's details say it asks for
// before it was converted.
const claudeUnknownPermissions = "not known until it is fetched and converted: preview it to see"

// claudeBundleID is the plugin id of plugin of the Claude Code
// marketplace added as mp: "claude.<mp>.<plugin>". It is named after the
// name the user gave the marketplace, not the one the marketplace gives
// itself, so that no marketplace can name its plugins as another's.
func claudeBundleID(mp, plugin string) string { return "claude." + mp + "." + plugin }

// checkAddClaude checks a request to add a Claude Code marketplace: the
// user must trust it explicitly, and it has no keys.
func checkAddClaude(req pluginapi.AddMarketplaceRequest) error {
	if !req.TrustUnsigned {
		return core.Errorf(core.EINVALID, "marketplace %s (%s) is a Claude Code marketplace, which is unsigned: no signature or transparency log vouches that what it serves is what its authors published, so Kiln cannot tell a tampered or rolled-back plugin from a real one, and installs from it only if you trust the source itself; to trust it explicitly, add it with --trust-unsigned (API: \"trust_unsigned\": true). Nothing was added",
			req.Name, redactURL(req.URL))
	}
	if len(req.Keys) > 0 {
		return core.Errorf(core.EINVALID, "marketplace %s: a Claude Code marketplace is not signed, so there is no key to trust; leave --key out", req.Name)
	}
	if u, err := url.Parse(req.URL); err == nil && u.User != nil {
		if _, hasPassword := u.User.Password(); hasPassword || u.Scheme == "http" || u.Scheme == "https" {
			return core.Errorf(core.EINVALID, "marketplace %s: %s carries credentials, which Kiln would keep and show; leave them out and let git's credential helper or ssh key supply them", req.Name, u.Redacted())
		}
	}
	return nil
}

// redactURL hides a password in a URL.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}

// claudeFetcher fetches with git into Dir/.staging, which Open empties.
func (c *Client) claudeFetcher() (claude.Fetcher, error) {
	dir := filepath.Join(c.cfg.Dir, stagingDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return claude.Fetcher{}, err
	}
	return claude.Fetcher{TempDir: dir}, nil
}

// loadClaude reads the Claude Code marketplace at location. A folder (an
// absolute path or a file:// URL) holding .claude-plugin/marketplace.json
// is read in place, unpinned; any other location is a git repository
// (https://, ssh://, git://, user@host:path, or a folder or file:// URL
// of a repository), cloned at commit, or at its default branch's head
// when commit is "". done removes the clone.
func (c *Client) loadClaude(ctx context.Context, location, commit string) (m *claude.Marketplace, done func(), err error) {
	gitURL := location
	if dir, ok := localPath(location); ok {
		if commit == "" && isClaudeFolder(dir) {
			m, err := claude.LoadMarketplace(location)
			return m, func() {}, err
		}
		gitURL = (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
	}
	f, err := c.claudeFetcher()
	if err != nil {
		return nil, nil, err
	}
	m, fe, err := f.LoadGit(ctx, gitURL, commit)
	if err != nil {
		return nil, nil, err
	}
	return m, func() { fe.Close() }, nil
}

// localPath returns the folder an absolute path or a file:// URL names.
func localPath(location string) (string, bool) {
	if filepath.IsAbs(location) {
		return filepath.Clean(location), true
	}
	if u, err := url.Parse(location); err == nil && u.Scheme == "file" && (u.Host == "" || u.Host == "localhost") && u.Path != "" {
		return filepath.Clean(filepath.FromSlash(u.Path)), true
	}
	return "", false
}

// isClaudeFolder reports whether dir is a Claude Code marketplace's
// folder, or its marketplace.json.
func isClaudeFolder(dir string) bool {
	if filepath.Base(dir) == "marketplace.json" {
		return true
	}
	_, err := os.Stat(filepath.Join(dir, filepath.FromSlash(claude.MarketplaceFile)))
	return err == nil
}

// refreshClaude reads Claude Code marketplace m again and keeps its new
// listing (on disk and loaded). A failure is returned and recorded in
// m.Error; the last listing stays.
func (c *Client) refreshClaude(ctx context.Context, name string, m *marketplace) error {
	fail := func(err error) error {
		c.mu.Lock()
		m.Error = err.Error()
		c.mu.Unlock()
		return err
	}
	cm, done, err := c.loadClaude(ctx, m.URL, "")
	if err != nil {
		return fail(err)
	}
	defer done()
	c.mu.RLock()
	var prev *claudeListing
	if l := c.loaded[name]; l != nil {
		prev = l.claude
	}
	c.mu.RUnlock()
	l, err := c.listClaude(ctx, name, cm, prev)
	if err != nil {
		return fail(err)
	}
	raw, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Join(c.cfg.Dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, claudeListingFile), raw); err != nil {
		return err
	}
	sum := sha256.Sum256(raw)
	c.mu.Lock()
	m.Trust = Trust{Keys: []string{}, IndexSHA256: hex.EncodeToString(sum[:]), Seen: l.Read}
	m.Refreshed, m.Error = l.Read, ""
	c.loaded[name] = newLoadedClaude(l)
	c.mu.Unlock()
	return nil
}

// readClaude reads the listing kept of Claude Code marketplace name,
// checking that its bytes are still those written.
func (c *Client) readClaude(name string, m *marketplace) (*loadedIndex, error) {
	raw, err := os.ReadFile(filepath.Join(c.cfg.Dir, name, claudeListingFile))
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != m.Trust.IndexSHA256 {
		return nil, core.Errorf(core.ECONFLICT, "marketplace %s: the listing kept on disk is not the one written; refresh it", name)
	}
	var l claudeListing
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", claudeListingFile, err)
	}
	if l.Version != claudeListingVersion {
		return nil, fmt.Errorf("%s has version %d; this Kiln reads version %d; refresh it", claudeListingFile, l.Version, claudeListingVersion)
	}
	return newLoadedClaude(&l), nil
}

func newLoadedClaude(l *claudeListing) *loadedIndex {
	li := newLoaded(&l.Index)
	li.claude = l
	return li
}

// listClaude lists the plugins of cm, added as mp. A plugin kept in the
// marketplace's folders is converted (into a folder removed at the end)
// to learn what it is; a conversion refused is listed with the reason.
// A version keeps the time it was first listed (its Published, which the
// quarantine counts from) while its version and digest stay the same.
func (c *Client) listClaude(ctx context.Context, mp string, cm *claude.Marketplace, prev *claudeListing) (*claudeListing, error) {
	now := c.cfg.Now().UTC()
	l := &claudeListing{Version: claudeListingVersion, Name: cm.Name, Commit: cm.Commit, Read: now, Plugins: map[string]claudePlugin{}}
	l.Index = Index{Name: cm.Name, Owner: Owner{Name: cm.Owner.Name, Email: cm.Owner.Email, URL: cm.Owner.URL}, Published: now, Log: LogEntry{Index: -1}, Plugins: []Plugin{}}
	f, err := c.claudeFetcher()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(f.TempDir, "list-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	for i, p := range cm.Plugins {
		id := claudeBundleID(mp, p.Name)
		cp := claudePlugin{Name: p.Name, Source: p.Source.String()}
		pl := Plugin{Name: id, Description: p.Description, Author: p.Author.Name, Homepage: p.Homepage, License: p.License, Kinds: []string{}}
		for _, t := range slices.Concat(p.Keywords, p.Tags) {
			if !slices.Contains(pl.Tags, t) {
				pl.Tags = append(pl.Tags, t)
			}
		}
		v := Version{Version: entryVersion(p), Published: now, Manifest: ManifestSummary{Runtime: plugins.RuntimeData, Provides: []string{}}}
		if p.Source.Git() && p.Source.SHA != "" {
			if len(p.Components.Skills) > 0 {
				pl.Kinds = append(pl.Kinds, "skills")
			}
			if len(p.Components.MCPServers) > 0 {
				pl.Kinds = append(pl.Kinds, "mcp-servers")
			}
		} else {
			out := filepath.Join(tmp, strconv.Itoa(i))
			res, err := f.Convert(ctx, cm, p.Name, out, claude.Converter{ID: id})
			switch {
			case ctx.Err() != nil:
				return nil, ctx.Err()
			case core.ErrorCode(err) == core.EINTERNAL:
				return nil, fmt.Errorf("claude plugin %s: %w", p.Name, err)
			case err != nil:
				v.Yanked = "not installable: " + core.ErrorMessage(err)
			default:
				man, err := plugins.LoadManifest(out)
				if err != nil {
					return nil, fmt.Errorf("claude plugin %s: %w", p.Name, err)
				}
				v.Version, v.Digest = res.Version, res.Digest
				v.Manifest = ManifestSummary{Runtime: man.EffectiveRuntime(), Permissions: man.Permissions}
				for _, k := range man.Provides {
					v.Manifest.Provides = append(v.Manifest.Provides, string(k))
				}
				pl.Kinds = slices.Clone(v.Manifest.Provides)
				pl.Description = cmp.Or(pl.Description, man.Description)
				cp.Converted, cp.Skipped, cp.Warnings = true, res.Skipped, res.Warnings
			}
		}
		if pv := prev.version(id); pv != nil && pv.Version == v.Version && pv.Digest == v.Digest && prev.Plugins[id].Source == cp.Source {
			v.Published = pv.Published
		}
		pl.Versions = []Version{v}
		l.Index.Plugins = append(l.Index.Plugins, pl)
		l.Plugins[id] = cp
	}
	slices.SortFunc(l.Index.Plugins, func(a, b Plugin) int { return strings.Compare(a.Name, b.Name) })
	return l, nil
}

// version returns the listed version of plugin id, or nil.
func (l *claudeListing) version(id string) *Version {
	if l == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(l.Index.Plugins, id, func(p Plugin, id string) int { return strings.Compare(p.Name, id) })
	if !ok || len(l.Index.Plugins[i].Versions) == 0 {
		return nil
	}
	return &l.Index.Plugins[i].Versions[0]
}

// entryVersion is the version a marketplace entry names when it is
// semver, else 0.0.0 (with the commit a git source pins as build
// metadata).
func entryVersion(p claude.Plugin) string {
	if _, err := semver.StrictNewVersion(p.Version); err == nil {
		return p.Version
	}
	if p.Source.SHA != "" {
		return "0.0.0+git." + p.Source.SHA[:12]
	}
	return "0.0.0"
}

// stageClaude converts version v of plugin id of Claude Code marketplace
// mpName into a staging folder, from the marketplace at the commit its
// last refresh read (or its folder as it is now). A plugin the refresh
// converted must convert to the digest it listed: otherwise the
// marketplace's folder changed since, and the user is to refresh and
// review it again.
func (c *Client) stageClaude(ctx context.Context, id, mpName string, m *marketplace, v *Version) (*staged, error) {
	c.mu.RLock()
	var l *claudeListing
	if li := c.loaded[mpName]; li != nil {
		l = li.claude
	}
	c.mu.RUnlock()
	cp, ok := l.pluginOf(id)
	if !ok {
		return nil, core.Errorf(core.ENOTFOUND, "marketplace %s offers no plugin %s; refresh it", mpName, id)
	}
	s, err := c.convertClaude(ctx, mpName, m, l.Commit, cp, id)
	if err != nil {
		return nil, err
	}
	if v.Digest == "" {
		s.preview.Verified = append(s.preview.Verified, "converted to a bundle with folder digest "+s.version.Digest)
		if s.version.Version != v.Version {
			s.preview.Warnings = append(s.preview.Warnings, fmt.Sprintf("the marketplace lists version %s; the plugin it fetched is version %s", v.Version, s.version.Version))
		}
		return s, nil
	}
	if s.version.Digest != v.Digest {
		os.RemoveAll(s.dir)
		return nil, core.Errorf(core.ECONFLICT, "marketplace %s: %s now converts to folder digest %s, not the %s listed when the marketplace was read on %s (its folder changed since): refused; refresh it (kiln marketplace refresh %s) and review it again",
			mpName, id, s.version.Digest, v.Digest, l.Read.Format(time.RFC3339), mpName)
	}
	s.preview.Verified = append(s.preview.Verified, fmt.Sprintf("folder digest %s, as listed when the marketplace was read on %s", v.Digest, l.Read.Format(time.RFC3339)))
	return s, nil
}

// pluginOf returns what the listing says of plugin id.
func (l *claudeListing) pluginOf(id string) (claudePlugin, bool) {
	if l == nil {
		return claudePlugin{}, false
	}
	cp, ok := l.Plugins[id]
	return cp, ok
}

// convertClaude fetches plugin cp of Claude Code marketplace mpName from
// the marketplace at commit ("" for its folder as it is now), converts
// it into a new folder of Dir/.staging as bundle id, and describes it
// with the registry's preview, what was and was not checked, and what
// Kiln does not run. The staged source records the marketplace's commit.
func (c *Client) convertClaude(ctx context.Context, mpName string, m *marketplace, commit string, cp claudePlugin, id string) (*staged, error) {
	cm, done, err := c.loadClaude(ctx, m.URL, commit)
	if err != nil {
		return nil, err
	}
	defer done()
	f, err := c.claudeFetcher()
	if err != nil {
		return nil, err
	}
	out, err := os.MkdirTemp(f.TempDir, "claude-")
	if err != nil {
		return nil, err
	}
	res, err := f.Convert(ctx, cm, cp.Name, out, claude.Converter{ID: id})
	if err != nil {
		os.RemoveAll(out)
		return nil, err
	}
	pv, err := c.cfg.Plugins.Preview(ctx, out)
	if err != nil {
		os.RemoveAll(out)
		return nil, err
	}
	if pv.ID != id || pv.Version != res.Version {
		os.RemoveAll(out)
		return nil, core.Errorf(core.EINVALID, "marketplace %s: %s converted to plugin %s %s: refused", mpName, id, pv.ID, pv.Version)
	}
	verified := []string{
		fmt.Sprintf("unsigned source trusted by you on %s: no signature and no transparency log vouch for it", m.Added.Format(time.DateOnly)),
		claudePin(m.URL, cm.Commit, res.Origin),
	}
	if len(res.Servers) > 0 {
		verified = append(verified, "the packages its MCP servers start are pinned to exact versions")
	}
	return &staged{
		mp:      mpName,
		version: &Version{Version: res.Version, Digest: res.Digest, Artifact: Artifact{SHA256: res.Digest}},
		dir:     out,
		source: &pluginapi.Source{Marketplace: mpName, Version: res.Version, ArchiveSHA256: res.Digest, Digest: res.Digest,
			Commit: cm.Commit},
		preview: pluginapi.MarketplacePreview{Marketplace: mpName, Preview: pv, Digest: res.Digest, Verified: verified,
			Skipped: res.Skipped, Warnings: res.Warnings},
	}, nil
}

// claudePin says what pins a converted plugin's bytes.
func claudePin(location, commit string, o claude.Origin) string {
	switch {
	case o.Commit != "" && commit != "" && o.Commit != commit:
		return fmt.Sprintf("pinned to commit %s of %s, by the marketplace at commit %s", o.Commit, o.Source, commit)
	case o.Commit != "":
		return "pinned to commit " + o.Commit
	case commit != "":
		return "pinned to commit " + commit
	}
	return fmt.Sprintf("not pinned to a commit: read from the folder %s as it is now", redactURL(location))
}

// lockedClaude reproduces locked plugin p, converted from Claude Code
// marketplace m: from the marketplace at the commit the lock records,
// which must convert to exactly the locked version and digest. A plugin
// whose marketplace was read from a folder has no commit and is refused.
// The staged folder is the caller's to remove.
func (c *Client) lockedClaude(ctx context.Context, p pluginapi.LockedPlugin, m *marketplace) (*staged, error) {
	mp := p.Source.Marketplace
	if p.Source.Commit == "" {
		return nil, core.Errorf(core.EINVALID, "plugin %s %s came from Claude Code marketplace %s read from a folder, which no git commit pins: the lock cannot reproduce it; install it again (kiln plugin install %s) and review what it asks for",
			p.ID, p.Version, mp, p.ID)
	}
	name, ok := strings.CutPrefix(p.ID, claudeBundleID(mp, ""))
	if !ok || name == "" {
		return nil, core.Errorf(core.EINVALID, "plugin %s is not a plugin of Claude Code marketplace %s (its plugins are %s<name>)", p.ID, mp, claudeBundleID(mp, ""))
	}
	s, err := c.convertClaude(ctx, mp, m, p.Source.Commit, claudePlugin{Name: name}, p.ID)
	if err != nil {
		return nil, err
	}
	if s.version.Version != p.Version || s.version.Digest != p.Digest {
		os.RemoveAll(s.dir)
		return nil, core.Errorf(core.ECONFLICT, "Claude Code marketplace %s at commit %s converts %s to version %s with folder digest %s; the lock file records %s and %s: refused",
			mp, p.Source.Commit, p.ID, s.version.Version, s.version.Digest, p.Version, p.Digest)
	}
	s.preview.Verified = append(s.preview.Verified, "folder digest "+p.Digest+", as the lock file records")
	return s, nil
}
