package skills

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Origin is where a catalog entry comes from.
type Origin string

// The origins, highest precedence first.
const (
	OriginCustom  Origin = "custom"
	OriginPlugin  Origin = "plugin"
	OriginBuiltin Origin = "builtin"
)

// BundleDir is the folder of a plugin bundle that holds its skills
// (plugins/skillbundle reads bundles by it).
const BundleDir = "skills"

// Layer names one copy of a skill: its origin and, for a plugin, the
// plugin's ID.
type Layer struct {
	Origin Origin `json:"origin"`
	Source string `json:"source,omitempty"`
}

// Entry is the effective skill of one name.
type Entry struct {
	*Skill
	Layer
	// Shadows lists the copies of the same name this one hides, highest
	// first.
	Shadows  []Layer   `json:"shadows,omitempty"`
	Warnings []Warning `json:"warnings,omitempty"`
	fsys     fs.FS
}

// FS is the skill's folder (SKILL.md, scripts/, references/, assets/ ...)
// for mounting into a run.
func (e Entry) FS() fs.FS { return e.fsys }

// Files lists the paths of the files in the skill's folder other than
// SKILL.md, sorted, slash-separated and relative to the folder.
func (e Entry) Files() ([]string, error) {
	var out []string
	err := fs.WalkDir(e.fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && p != File {
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// Problem is a skill the catalog skipped and why.
type Problem struct {
	Layer
	Name string      `json:"name"`
	Err  *ParseError `json:"error"`
}

// loaded is one parsed copy of a skill, or the reason it was skipped.
type loaded struct {
	skill    *Skill
	warnings []Warning
	err      *ParseError
	fsys     fs.FS
	// mtime and size of the SKILL.md read, for custom skills.
	mtime time.Time
	size  int64
}

// Catalog holds the skills of every source and answers by name with
// precedence custom > plugin > builtin; among plugins the lowest plugin
// ID wins. It is safe for concurrent use.
type Catalog struct {
	dir string

	mu      sync.RWMutex
	custom  map[string]*loaded
	plugins map[string]map[string]*loaded // plugin ID -> name -> skill
	builtin map[string]*loaded
}

// NewCatalog returns a catalog of the custom skills in dir (dir/<name>/
// SKILL.md; a missing dir, or "", holds none) and the built-in skills in builtin
// (<name>/SKILL.md at its root; nil for none). It reads both; a skill
// that does not parse is a Problem, not an error. The error is for a
// folder that cannot be read.
func NewCatalog(dir string, builtin fs.FS) (*Catalog, error) {
	c := &Catalog{dir: dir, custom: map[string]*loaded{}, plugins: map[string]map[string]*loaded{}, builtin: map[string]*loaded{}}
	if builtin != nil {
		ents, err := fs.ReadDir(builtin, ".")
		if err != nil {
			return nil, fmt.Errorf("read built-in skills: %w", err)
		}
		for _, e := range ents {
			if e.IsDir() {
				if _, err := fs.Stat(builtin, e.Name()+"/"+File); err == nil {
					c.builtin[e.Name()] = load(builtin, e.Name(), e.Name())
				}
			}
		}
	}
	if err := c.Reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// load parses fsys/dir/SKILL.md as the skill name.
func load(fsys fs.FS, dir, name string) *loaded {
	file := path.Join(dir, File)
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		return &loaded{err: &ParseError{File: file, Line: 0, Reason: err.Error()}}
	}
	l := &loaded{fsys: sub}
	src, err := fs.ReadFile(fsys, file)
	if err != nil {
		l.err = &ParseError{File: file, Line: 0, Reason: err.Error()}
		return l
	}
	s, warns, err := Parse(name, src)
	if err != nil {
		var pe *ParseError
		if !errors.As(err, &pe) {
			pe = &ParseError{Reason: err.Error()}
		}
		pe.File = file
		l.err = pe
		return l
	}
	l.skill, l.warnings = s, warns
	return l
}

// Reload rescans the custom folder: it stats each <name>/SKILL.md and
// parses again only those whose size or modification time changed; new
// folders are added and removed ones dropped. It returns an error only
// when the folder exists and cannot be read.
func (c *Catalog) Reload() error {
	if c.dir == "" {
		return nil
	}
	ents, err := os.ReadDir(c.dir)
	if errors.Is(err, fs.ErrNotExist) {
		ents, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("read custom skills: %w", err)
	}
	c.mu.RLock()
	old := c.custom
	c.mu.RUnlock()
	next := make(map[string]*loaded, len(ents))
	root := os.DirFS(c.dir)
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		fi, err := os.Stat(filepath.Join(c.dir, name, File))
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if l, ok := old[name]; ok && l.mtime.Equal(fi.ModTime()) && l.size == fi.Size() {
			next[name] = l
			continue
		}
		l := load(root, name, name)
		if l.err != nil {
			l.err.File = filepath.Join(c.dir, name, File)
		}
		l.mtime, l.size = fi.ModTime(), fi.Size()
		next[name] = l
	}
	c.mu.Lock()
	c.custom = next
	c.mu.Unlock()
	return nil
}

// Watch calls Reload every interval until ctx is done, so skills edited on
// disk take effect without a restart, and returns ctx's error. A Reload
// that fails (the folder unreadable for a moment) is reported to onError,
// when set, and the watch goes on: the catalog keeps what it had.
func (c *Catalog) Watch(ctx context.Context, interval time.Duration, onError func(error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if err := c.Reload(); err != nil && onError != nil {
				onError(err)
			}
		}
	}
}

// AddSkills makes the named skills of a plugin available under source,
// the plugin's ID, reading fsys/skills/<name>/SKILL.md; it replaces what
// source added before. A skill that does not parse is a Problem; the
// others load. It implements plugins/skillbundle.Host.
func (c *Catalog) AddSkills(source string, fsys fs.FS, names []string) error {
	if source == "" {
		return fmt.Errorf("add skills: empty source")
	}
	set := make(map[string]*loaded, len(names))
	for _, name := range names {
		if !ValidName(name) {
			return fmt.Errorf("add skills of %s: bad skill name %q", source, name)
		}
		set[name] = load(fsys, path.Join(BundleDir, name), name)
	}
	c.mu.Lock()
	c.plugins[source] = set
	c.mu.Unlock()
	return nil
}

// RemoveSkills withdraws the skills source added.
func (c *Catalog) RemoveSkills(source string) {
	c.mu.Lock()
	delete(c.plugins, source)
	c.mu.Unlock()
}

// layered is a copy of a skill and where it comes from.
type layered struct {
	Layer
	*loaded
}

// layers returns, under the read lock, every loaded copy of every name,
// highest precedence first.
func (c *Catalog) layers() map[string][]layered {
	type lc = layered
	out := map[string][]lc{}
	for name, l := range c.custom {
		out[name] = append(out[name], lc{Layer{Origin: OriginCustom}, l})
	}
	srcs := make([]string, 0, len(c.plugins))
	for s := range c.plugins {
		srcs = append(srcs, s)
	}
	slices.Sort(srcs)
	for _, s := range srcs {
		for name, l := range c.plugins[s] {
			out[name] = append(out[name], lc{Layer{Origin: OriginPlugin, Source: s}, l})
		}
	}
	for name, l := range c.builtin {
		out[name] = append(out[name], lc{Layer{Origin: OriginBuiltin}, l})
	}
	return out
}

// List returns the effective skills, sorted by name. A copy that did not
// parse is skipped, so a broken custom skill leaves the plugin or
// built-in one of its name in effect (and is reported by Problems).
func (c *Catalog) List() []Entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []Entry
	for _, ls := range c.layers() {
		if e, ok := effective(ls); ok {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Get returns the effective skill named name, or false.
func (c *Catalog) Get(name string) (Entry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return effective(c.layers()[name])
}

// effective picks the first copy that parsed from ls, highest precedence
// first, and lists the parsed copies beneath it as shadowed.
func effective(ls []layered) (Entry, bool) {
	var e *Entry
	for _, l := range ls {
		if l.err != nil {
			continue
		}
		if e == nil {
			e = &Entry{Skill: l.skill, Layer: l.Layer, Warnings: l.warnings, fsys: l.fsys}
			continue
		}
		e.Shadows = append(e.Shadows, l.Layer)
	}
	if e == nil {
		return Entry{}, false
	}
	return *e, true
}

// Problems returns the skills that were skipped and why, sorted by name
// and then by precedence.
func (c *Catalog) Problems() []Problem {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []Problem
	for name, ls := range c.layers() {
		for _, l := range ls {
			if l.err != nil {
				out = append(out, Problem{Layer: l.Layer, Name: name, Err: l.err})
			}
		}
	}
	rank := map[Origin]int{OriginCustom: 0, OriginPlugin: 1, OriginBuiltin: 2}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Origin != b.Origin {
			return rank[a.Origin] < rank[b.Origin]
		}
		return a.Source < b.Source
	})
	return out
}

// Ready reports whether every tool the skill names is among tools: each
// explicit reference must be listed and each wildcard must match at
// least one (path.Match). When it is not, reason says what is missing.
// A skill that names no tools is ready.
func (s *Skill) Ready(tools []string) (ready bool, reason string) {
	var missing, unmatched []string
	for _, ref := range s.Tools {
		if !IsWildcard(ref) {
			if !slices.Contains(tools, ref) {
				missing = append(missing, ref)
			}
			continue
		}
		if !slices.ContainsFunc(tools, func(t string) bool { ok, _ := path.Match(ref, t); return ok }) {
			unmatched = append(unmatched, ref)
		}
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, "missing tools: "+strings.Join(missing, ", "))
	}
	if len(unmatched) > 0 {
		parts = append(parts, "no tool matches: "+strings.Join(unmatched, ", "))
	}
	return len(parts) == 0, strings.Join(parts, "; ")
}
