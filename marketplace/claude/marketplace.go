package claude

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/core"
)

// Unsigned is a fact about every Claude Code marketplace: nothing in its
// format is signed, so nothing vouches for what it serves but the place
// it is read from. A client adds one only when its user trusts it
// explicitly, and says so wherever it shows what came from it.
const Unsigned = true

// Files of a Claude Code marketplace and plugin, relative to their roots.
const (
	MarketplaceFile = ".claude-plugin/marketplace.json"
	PluginFile      = ".claude-plugin/plugin.json"
	MCPFile         = ".mcp.json"
)

// MaxFileSize bounds marketplace.json, plugin.json and .mcp.json.
const MaxFileSize = 4 << 20

// maxNameLen bounds marketplace and plugin names.
const maxNameLen = 64

var (
	reName = regexp.MustCompile(`^[a-z0-9]+(?:-[a-z0-9]+)*$`)
	reRepo = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)
	reSHA  = regexp.MustCompile(`^[0-9a-fA-F]{40}$`)
	reSCP  = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^/\\]`)
)

// Marketplace is a Claude Code marketplace: .claude-plugin/marketplace.json.
type Marketplace struct {
	// Name is kebab-case: lowercase letters, digits and single hyphens.
	Name  string
	Owner Person
	// Description and Version come from "metadata" or the top level.
	Description string
	Version     string
	// PluginRoot is metadata.pluginRoot: the folder relative plugin
	// sources are taken from, clean and slash-separated ("" for the
	// marketplace's root).
	PluginRoot string
	Plugins    []Plugin
	// Root is the folder the marketplace was read from (the one holding
	// .claude-plugin/), or "" when it was parsed from bytes; relative
	// sources are resolved in it.
	Root string
	// Commit is the commit of the git repository the marketplace was
	// read from (Fetcher.LoadGit), or "": its relative sources are
	// pinned by it.
	Commit string
}

// Person is an owner or author.
type Person struct {
	Name  string
	Email string
	URL   string
}

// Plugin is one entry of a marketplace: where the plugin is, what the
// marketplace says of it, and the components the entry itself declares
// (merged with the plugin's own plugin.json, as Claude Code does).
type Plugin struct {
	Name        string
	Source      Source
	Description string
	Version     string
	Author      Person
	Homepage    string
	Repository  string
	License     string
	Category    string
	Keywords    []string
	Tags        []string
	// Strict is true (the default) when the plugin's plugin.json is the
	// authority on it and the entry only adds to it; false when the entry
	// defines the plugin entirely and plugin.json may be missing.
	Strict     bool
	Components Components
}

// SourceKind is the form of a plugin's source.
type SourceKind string

// Source kinds.
const (
	// SourcePath is a folder inside the marketplace ("./plugins/x").
	SourcePath SourceKind = "path"
	// SourceGitHub is a GitHub repository ({source: "github", repo}).
	SourceGitHub SourceKind = "github"
	// SourceURL is a git repository at any URL ({source: "url", url}).
	SourceURL SourceKind = "url"
	// SourceGitSubdir is a folder of a git repository ({source:
	// "git-subdir", url, path}).
	SourceGitSubdir SourceKind = "git-subdir"
	// SourceNPM and SourcePip are packages of those registries; Kiln
	// reads them but does not fetch plugins from them.
	SourceNPM SourceKind = "npm"
	SourcePip SourceKind = "pip"
)

// Source is where a plugin is.
type Source struct {
	Kind SourceKind
	// Path is, for SourcePath, the plugin's folder relative to the
	// marketplace's root (PluginRoot applied; "." for the root itself)
	// and, for SourceGitSubdir, its folder inside the repository: clean
	// and slash-separated, never absolute or above the root.
	Path string
	// Repo is SourceGitHub's "owner/name".
	Repo string
	// URL is SourceURL's and SourceGitSubdir's git URL.
	URL string
	// Ref is a branch or tag; SHA is a full commit id (40 hex digits,
	// lowercase). A git source with a SHA is pinned: it names exact
	// bytes, whatever the ref later points at.
	Ref string
	SHA string
	// Package, Version and Registry are SourceNPM's and SourcePip's.
	Package  string
	Version  string
	Registry string
}

// Git reports whether the source is a git repository.
func (s Source) Git() bool {
	return s.Kind == SourceGitHub || s.Kind == SourceURL || s.Kind == SourceGitSubdir
}

// String names the source for a user: "./plugins/x", "github:owner/name@<sha>",
// "https://host/repo.git#sub/dir@<ref>", "npm:pkg@1.0.0". A password in a
// URL is shown as "***".
func (s Source) String() string {
	var b strings.Builder
	switch s.Kind {
	case SourcePath:
		b.WriteString("./" + strings.TrimPrefix(s.Path, "."))
	case SourceGitHub:
		b.WriteString("github:" + s.Repo)
	case SourceURL:
		b.WriteString(redact(s.URL))
	case SourceGitSubdir:
		b.WriteString(redact(s.URL) + "#" + s.Path)
	case SourceNPM, SourcePip:
		b.WriteString(string(s.Kind) + ":" + s.Package)
		if s.Version != "" {
			b.WriteString("@" + s.Version)
		}
	}
	if s.Git() {
		switch {
		case s.SHA != "":
			b.WriteString("@" + s.SHA)
		case s.Ref != "":
			b.WriteString("@" + s.Ref)
		}
	}
	return b.String()
}

// ParseMarketplace reads marketplace.json. Fields Kiln does not use are
// allowed (the format grows); what it uses is checked: the document is
// one JSON object without duplicate keys, name and every plugin's name
// are kebab-case and unique, owner has a name, and every source is a
// relative path that stays inside the marketplace or an object of a
// known kind with what that kind needs (a commit sha, when given, is 40
// hex digits). Errors are EINVALID and name the field.
func ParseMarketplace(data []byte) (*Marketplace, error) {
	m, err := parseMarketplace(data)
	if err != nil {
		return nil, core.Errorf(core.EINVALID, "claude marketplace: %v", err)
	}
	return m, nil
}

func parseMarketplace(data []byte) (*Marketplace, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("marketplace.json is larger than %d MiB", MaxFileSize>>20)
	}
	top, err := parseObject(data, "marketplace.json")
	if err != nil {
		return nil, err
	}
	m := &Marketplace{}
	if m.Name, err = top.str("name"); err != nil {
		return nil, err
	}
	if err := checkName("name", m.Name); err != nil {
		return nil, err
	}
	if !top.has("owner") {
		return nil, errors.New(`owner: required (an object with a "name")`)
	}
	if m.Owner, err = person(top, "owner", false); err != nil {
		return nil, err
	}
	if m.Owner.Name == "" {
		return nil, errors.New("owner.name: required")
	}
	if m.Description, err = top.str("description"); err != nil {
		return nil, err
	}
	if m.Version, err = top.str("version"); err != nil {
		return nil, err
	}
	if top.has("metadata") {
		meta, err := asObject(top.members["metadata"], "metadata")
		if err != nil {
			return nil, err
		}
		for _, f := range []struct {
			key string
			dst *string
		}{{"description", &m.Description}, {"version", &m.Version}, {"pluginRoot", &m.PluginRoot}} {
			s, err := meta.str(f.key)
			if err != nil {
				return nil, err
			}
			if s != "" {
				*f.dst = s
			}
		}
		if m.PluginRoot != "" {
			if m.PluginRoot, err = relPath("metadata.pluginRoot", m.PluginRoot); err != nil {
				return nil, err
			}
		}
	}
	if !top.has("plugins") {
		return nil, errors.New("plugins: required (an array of plugin entries)")
	}
	raw := top.members["plugins"]
	if k := kind(raw); k != "array" {
		return nil, fmt.Errorf("plugins: want an array, not %s", article(k))
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	seen := map[string]int{}
	for i, it := range items {
		at := fmt.Sprintf("plugins[%d]", i)
		p, err := parseEntry(it, at, m.PluginRoot)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[p.Name]; dup {
			return nil, fmt.Errorf("%s.name: %q is also plugins[%d]", at, p.Name, j)
		}
		seen[p.Name] = i
		m.Plugins = append(m.Plugins, p)
	}
	return m, nil
}

// Plugin returns the entry named name, or ENOTFOUND.
func (m *Marketplace) Plugin(name string) (Plugin, error) {
	for _, p := range m.Plugins {
		if p.Name == name {
			return p, nil
		}
	}
	return Plugin{}, core.Errorf(core.ENOTFOUND, "claude marketplace %s has no plugin %q", m.Name, name)
}

// LoadMarketplace reads the marketplace at location: a folder holding
// .claude-plugin/marketplace.json, that file itself, or a file:// URL of
// either. The result's Root is the marketplace's folder. A missing file
// is ENOTFOUND; a bad one EINVALID.
func LoadMarketplace(location string) (*Marketplace, error) {
	p := location
	if strings.HasPrefix(location, "file:") {
		u, err := url.Parse(location)
		if err != nil || u.Host != "" && u.Host != "localhost" || u.Path == "" {
			return nil, core.Errorf(core.EINVALID, "claude marketplace %q: want file:///absolute/path", location)
		}
		p = filepath.FromSlash(u.Path)
	} else if strings.Contains(location, "://") {
		return nil, core.Errorf(core.EINVALID, "claude marketplace %q: only a folder or a file:// URL is read here; clone a git marketplace first", location)
	}
	root := p
	if filepath.Base(p) == "marketplace.json" {
		root = filepath.Dir(filepath.Dir(p))
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, core.Errorf(core.EINVALID, "claude marketplace %q: %v", location, err)
	}
	data, err := readFile(root, MarketplaceFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, core.Errorf(core.ENOTFOUND, "claude marketplace: %s has no %s", root, MarketplaceFile)
	}
	if err != nil {
		return nil, core.Errorf(core.EINVALID, "claude marketplace: %s: %v", root, err)
	}
	m, err := ParseMarketplace(data)
	if err != nil {
		return nil, err
	}
	m.Root = root
	return m, nil
}

// readFile reads rel inside dir: a regular file (a symlink may lead
// elsewhere inside dir, not out of it) of at most MaxFileSize bytes.
func readFile(dir, rel string) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	fi, err := root.Stat(rel)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", rel)
	}
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s is larger than %d MiB", rel, MaxFileSize>>20)
	}
	return data, nil
}

// parseEntry reads one plugin entry at at; pluginRoot is the
// marketplace's, for relative sources.
func parseEntry(raw json.RawMessage, at, pluginRoot string) (Plugin, error) {
	o, err := asObject(raw, at)
	if err != nil {
		return Plugin{}, err
	}
	var p Plugin
	if p.Name, err = o.str("name"); err != nil {
		return Plugin{}, err
	}
	if err := checkName(o.path("name"), p.Name); err != nil {
		return Plugin{}, err
	}
	if !o.has("source") {
		return Plugin{}, fmt.Errorf("%s: required (a relative path such as \"./plugins/%s\" or an object)", o.path("source"), p.Name)
	}
	if p.Source, err = parseSource(o.members["source"], o.path("source"), pluginRoot); err != nil {
		return Plugin{}, err
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"description", &p.Description}, {"version", &p.Version}, {"homepage", &p.Homepage},
		{"repository", &p.Repository}, {"license", &p.License}, {"category", &p.Category}} {
		if *f.dst, err = o.str(f.key); err != nil {
			return Plugin{}, err
		}
	}
	if p.Author, err = person(o, "author", true); err != nil {
		return Plugin{}, err
	}
	if p.Keywords, err = o.strings("keywords", false); err != nil {
		return Plugin{}, err
	}
	if p.Tags, err = o.strings("tags", false); err != nil {
		return Plugin{}, err
	}
	if p.Strict, err = o.boolean("strict", true); err != nil {
		return Plugin{}, err
	}
	if p.Components, err = parseComponents(o, entryFields); err != nil {
		return Plugin{}, err
	}
	return p, nil
}

// parseSource reads a plugin's source at at.
func parseSource(raw json.RawMessage, at, pluginRoot string) (Source, error) {
	if kind(raw) == "string" {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return Source{}, err
		}
		if strings.Contains(s, "://") || reSCP.MatchString(s) {
			return Source{}, fmt.Errorf(`%s: %q is a URL; a string source is a path inside the marketplace (use {"source": "url", "url": ...} for a git repository)`, at, s)
		}
		p, err := relPath(at, s)
		if err != nil {
			return Source{}, err
		}
		return Source{Kind: SourcePath, Path: path.Join(cmp.Or(pluginRoot, "."), p)}, nil
	}
	o, err := asObject(raw, at)
	if err != nil {
		return Source{}, fmt.Errorf("%s: want a relative path or an object", at)
	}
	k, err := o.str("source")
	if err != nil {
		return Source{}, err
	}
	s := Source{Kind: SourceKind(k)}
	need := func(key string, dst *string) error {
		v, err := o.str(key)
		if err != nil {
			return err
		}
		if v == "" {
			return fmt.Errorf("%s: required for a %q source", o.path(key), k)
		}
		*dst = v
		return nil
	}
	switch s.Kind {
	case SourceGitHub:
		if err := need("repo", &s.Repo); err != nil {
			return Source{}, err
		}
		if !reRepo.MatchString(s.Repo) || strings.Contains(s.Repo, "..") {
			return Source{}, fmt.Errorf("%s: %q: want owner/name", o.path("repo"), s.Repo)
		}
	case SourceURL, SourceGitSubdir:
		if err := need("url", &s.URL); err != nil {
			return Source{}, err
		}
		if err := checkGitURL(o.path("url"), s.URL); err != nil {
			return Source{}, err
		}
		if s.Kind == SourceGitSubdir {
			var p string
			if err := need("path", &p); err != nil {
				return Source{}, err
			}
			if s.Path, err = relPath(o.path("path"), p); err != nil {
				return Source{}, err
			}
		}
	case SourceNPM, SourcePip:
		if err := need("package", &s.Package); err != nil {
			return Source{}, err
		}
		for _, f := range []struct {
			key string
			dst *string
		}{{"version", &s.Version}, {"registry", &s.Registry}} {
			if *f.dst, err = o.str(f.key); err != nil {
				return Source{}, err
			}
		}
		return s, nil
	case "":
		return Source{}, fmt.Errorf(`%s: required (one of "github", "url", "git-subdir", "npm", "pip")`, o.path("source"))
	default:
		return Source{}, fmt.Errorf(`%s: %q is not one of "github", "url", "git-subdir", "npm", "pip"`, o.path("source"), k)
	}
	if s.Ref, err = o.str("ref"); err != nil {
		return Source{}, err
	}
	if s.Ref != "" && (strings.HasPrefix(s.Ref, "-") || strings.ContainsFunc(s.Ref, badRefRune) || strings.Contains(s.Ref, "..")) {
		return Source{}, fmt.Errorf("%s: %q is not a branch or tag name", o.path("ref"), s.Ref)
	}
	if s.SHA, err = o.str("sha"); err != nil {
		return Source{}, err
	}
	if s.SHA != "" && !reSHA.MatchString(s.SHA) {
		return Source{}, fmt.Errorf("%s: %q: want a full commit id, 40 hex digits", o.path("sha"), s.SHA)
	}
	s.SHA = strings.ToLower(s.SHA)
	return s, nil
}

// badRefRune reports a rune git refuses in a ref name, or one that has no
// place there.
func badRefRune(r rune) bool {
	return r <= ' ' || r == 0x7f || strings.ContainsRune(`~^:?*[\`, r)
}

// checkGitURL checks a git URL: https, http, ssh, git or file, or ssh's
// short form user@host:path; never an option, a remote helper
// ("ext::...") or whitespace.
func checkGitURL(at, s string) error {
	if strings.HasPrefix(s, "-") || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Errorf("%s: %q is not a git URL", at, s)
	}
	if reSCP.MatchString(s) {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%s: %q is not a git URL", at, s)
	}
	switch u.Scheme {
	case "https", "http", "ssh", "git":
		if u.Host == "" {
			return fmt.Errorf("%s: %q has no host", at, s)
		}
	case "file":
		if u.Path == "" {
			return fmt.Errorf("%s: %q has no path", at, s)
		}
	default:
		return fmt.Errorf("%s: %q: want an https://, ssh://, git://, http:// or file:// URL, or user@host:path", at, s)
	}
	return nil
}

// relPath checks a path relative to a root: no absolute path, no
// backslash, no control character, nothing above the root. It returns
// it clean and slash-separated ("." for the root).
func relPath(at, p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("%s: empty path", at)
	case strings.HasPrefix(p, "/") || filepath.VolumeName(p) != "" || len(p) > 1 && p[1] == ':':
		return "", fmt.Errorf("%s: %q must be relative (like \"./plugins/x\")", at, p)
	case strings.ContainsRune(p, '\\'):
		return "", fmt.Errorf("%s: %q must use forward slashes", at, p)
	case strings.ContainsFunc(p, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return "", fmt.Errorf("%s: %q contains control characters", at, p)
	case strings.HasPrefix(p, "~"):
		return "", fmt.Errorf("%s: %q must be relative to the marketplace, not a home folder", at, p)
	}
	if slices.Contains(strings.Split(p, "/"), "..") {
		return "", fmt.Errorf("%s: %q must not contain \"..\"", at, p)
	}
	return path.Clean(p), nil
}

// checkName checks a marketplace's or a plugin's name.
func checkName(at, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s: required", at)
	case len(s) > maxNameLen:
		return fmt.Errorf("%s: %q is longer than %d characters", at, s, maxNameLen)
	case !reName.MatchString(s):
		return fmt.Errorf("%s: %q must be kebab-case: lowercase letters, digits and single hyphens", at, s)
	}
	return nil
}

// person reads the member key as a person: an object with name, email
// and url, or, when str is true, a string naming them.
func person(o object, key string, str bool) (Person, error) {
	if !o.has(key) {
		return Person{}, nil
	}
	raw := o.members[key]
	if str && kind(raw) == "string" {
		s, err := o.str(key)
		return Person{Name: s}, err
	}
	po, err := asObject(raw, o.path(key))
	if err != nil {
		return Person{}, err
	}
	var p Person
	for _, f := range []struct {
		key string
		dst *string
	}{{"name", &p.Name}, {"email", &p.Email}, {"url", &p.URL}} {
		if *f.dst, err = po.str(f.key); err != nil {
			return Person{}, err
		}
	}
	return p, nil
}
