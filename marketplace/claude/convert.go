package claude

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/integrity"
	"github.com/kilnhq/kiln/plugins/mcp/mcpservers"
	"github.com/kilnhq/kiln/plugins/skillbundle"
	"github.com/kilnhq/kiln/skills"
)

// Converter turns a Claude Code plugin's folder into a Kiln data-only
// bundle. The zero value converts a folder on its own.
type Converter struct {
	// ID is the bundle's plugin id; "" is "claude.<plugin name>".
	ID string
	// Version is the bundle's version; "" takes plugin.json's, else the
	// entry's, else "0.0.0" (with "+git.<commit>" when Origin names a
	// commit). It must be semver.
	Version string
	// Entry is the plugin's marketplace entry when it came from one. Its
	// name, version and description fill in what plugin.json leaves out,
	// and the components it declares join plugin.json's, as in Claude
	// Code.
	Entry *Plugin
	// Origin says where the folder came from; the Result repeats it.
	Origin Origin
}

// Origin is where a converted plugin came from.
type Origin struct {
	Marketplace string // the marketplace's name, "" for a lone folder
	Plugin      string // the plugin's name
	Source      string // Source.String()
	Commit      string // the git commit it was checked out at
	// Unsigned is always true: see the constant Unsigned.
	Unsigned bool
}

// Result says what Convert made and what it left out.
type Result struct {
	// Manifest is the bundle's kiln-plugin.json; the bundle is its folder.
	Manifest string
	ID       string
	Version  string
	// Digest is the bundle's folder digest (plugins/integrity.Tree).
	Digest string
	// Skills and Servers are the names of the skills and MCP servers the
	// bundle provides, sorted.
	Skills  []string
	Servers []string
	// Skipped names each part of the plugin that was not converted, and
	// why, one line each ("hooks (hooks/): Kiln does not run ...").
	Skipped []string
	// Warnings are changes made on the way (a server renamed, a default
	// value dropped) and things worth checking, one line each.
	Warnings []string
	Origin   Origin
}

// Convert converts the Claude Code plugin in pluginDir into a new Kiln
// bundle folder out, as Converter{}.Convert does.
func Convert(ctx context.Context, pluginDir, out string) (Result, error) {
	return Converter{}.Convert(ctx, pluginDir, out)
}

// Convert converts the Claude Code plugin in pluginDir into a new Kiln
// data-only bundle folder out (its parent is created; out itself must
// not exist or be empty). The plugin's skills (skills/<name>/SKILL.md
// and the skill folders plugin.json adds) go to the bundle's skills/,
// and its MCP servers (.mcp.json and plugin.json's mcpServers) to its
// mcp.json, with the permissions they need (exec for a command, a URL's
// host, the variables they read). The bundle passes plugins.LoadManifest
// and the checks of the skills and mcp-servers kinds.
//
// What Kiln does not run is named in Result.Skipped, never dropped in
// silence: hooks, commands, agents, output styles, LSP servers, bin/ and
// the like; a skill Kiln's SKILL.md reader refuses; an MCP server that
// runs a program shipped inside the plugin (${CLAUDE_PLUGIN_ROOT}), uses
// a transport or a field Kiln lacks, or reads a variable Kiln cannot
// pass. A server whose command fetches a package without an exact
// version at start ("npx -y pkg@latest", "uvx pkg") fails the whole
// conversion (CheckPinned): the pins must cover what runs.
//
// Errors: EINVALID for a plugin that is malformed, has nothing Kiln can
// install, or fetches unpinned packages; ECONFLICT when out exists and
// is not empty. Nothing is left at out on failure.
func (c Converter) Convert(ctx context.Context, pluginDir, out string) (Result, error) {
	res, err := c.convert(ctx, pluginDir, out)
	if err != nil {
		var ce *core.Error
		if !errors.As(err, &ce) {
			err = core.Errorf(core.EINVALID, "claude plugin %s: %v", pluginDir, err)
		}
		return Result{}, err
	}
	return res, nil
}

// conversion is one Convert under way.
type conversion struct {
	ctx     context.Context
	root    *os.Root // the plugin's folder
	tmp     string   // the bundle being built
	res     *Result
	files   int
	bytes   int64
	name    string // the plugin's name
	comp    Components
	envRefs map[string]bool
	network map[string]bool
	exec    bool
}

func (c Converter) convert(ctx context.Context, pluginDir, out string) (Result, error) {
	root, err := os.OpenRoot(pluginDir)
	if err != nil {
		return Result{}, fmt.Errorf("open plugin folder: %w", err)
	}
	defer root.Close()
	res := Result{Origin: c.Origin}
	res.Origin.Unsigned = Unsigned

	man, err := c.manifest(root, pluginDir)
	if err != nil {
		return Result{}, err
	}
	if c.Entry != nil && c.Entry.Name != man.Name {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the marketplace calls the plugin %q and its plugin.json %q", c.Entry.Name, man.Name))
	}
	res.Origin.Plugin = cmp.Or(res.Origin.Plugin, man.Name)
	res.ID = cmp.Or(c.ID, "claude."+man.Name)
	res.Version, err = c.version(man, &res)
	if err != nil {
		return Result{}, err
	}

	parent := filepath.Dir(out)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return Result{}, fmt.Errorf("create %s: %w", parent, err)
	}
	if err := emptyOrMissing(out); err != nil {
		return Result{}, err
	}
	tmp, err := os.MkdirTemp(parent, ".kiln-convert-")
	if err != nil {
		return Result{}, err
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	cv := &conversion{ctx: ctx, root: root, tmp: tmp, res: &res, name: man.Name, comp: man.Components,
		envRefs: map[string]bool{}, network: map[string]bool{}}
	if c.Entry != nil {
		cv.merge(c.Entry.Components)
	}
	cv.skipParts()
	if err := cv.skills(); err != nil {
		return Result{}, err
	}
	if err := cv.servers(); err != nil {
		return Result{}, err
	}
	if len(res.Skills) == 0 && len(res.Servers) == 0 {
		why := "it has no skills and no MCP servers"
		if len(res.Skipped) > 0 {
			why = "skipped: " + strings.Join(res.Skipped, "; ")
		}
		return Result{}, core.Errorf(core.EINVALID, "claude plugin %s has nothing Kiln can install (%s)", man.Name, why)
	}
	if err := cv.licenses(); err != nil {
		return Result{}, err
	}
	desc := description(cmp.Or(man.Description, entryDescription(c.Entry)), man.Name)
	m, err := cv.writeManifest(res.ID, res.Version, desc)
	if err != nil {
		return Result{}, err
	}
	if err := verify(tmp, m); err != nil {
		return Result{}, err
	}
	t, err := integrity.Tree(tmp)
	if err != nil {
		return Result{}, err
	}
	res.Digest = t.Digest
	if err := emptyOrMissing(out); err != nil {
		return Result{}, err
	}
	os.Remove(out) // an empty folder
	if err := os.Rename(tmp, out); err != nil {
		return Result{}, fmt.Errorf("create %s: %w", out, err)
	}
	done = true
	res.Manifest = filepath.Join(out, plugins.ManifestFile)
	return res, nil
}

// manifest reads the plugin's plugin.json. Without one (Claude Code
// allows that), the plugin is named by its entry or its folder.
func (c Converter) manifest(root *os.Root, pluginDir string) (*PluginManifest, error) {
	data, err := readFile(root.Name(), PluginFile)
	if errors.Is(err, fs.ErrNotExist) {
		name := filepath.Base(filepath.Clean(pluginDir))
		if c.Entry != nil {
			name = c.Entry.Name
		}
		if err := checkName("the plugin's folder name (it has no "+PluginFile+")", name); err != nil {
			return nil, core.Errorf(core.EINVALID, "claude plugin: %v", err)
		}
		return &PluginManifest{Name: name}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", PluginFile, err)
	}
	return ParsePluginManifest(data)
}

// version picks the bundle's version.
func (c Converter) version(man *PluginManifest, res *Result) (string, error) {
	v := cmp.Or(c.Version, man.Version)
	if v == "" && c.Entry != nil {
		v = c.Entry.Version
	}
	if v == "" {
		v = "0.0.0"
		if res.Origin.Commit != "" {
			v += "+git." + res.Origin.Commit[:min(12, len(res.Origin.Commit))]
		}
		res.Warnings = append(res.Warnings, fmt.Sprintf("the plugin names no version; the bundle is %s", v))
	}
	if len(v) > 128 || !reSemver.MatchString(v) {
		return "", core.Errorf(core.EINVALID, "claude plugin %s: version %q is not semver (MAJOR.MINOR.PATCH), which Kiln needs; give the bundle one explicitly", man.Name, v)
	}
	return v, nil
}

// merge adds an entry's components to the plugin's.
func (cv *conversion) merge(e Components) {
	cv.comp.Skills = append(cv.comp.Skills, e.Skills...)
	cv.comp.MCPServers = append(cv.comp.MCPServers, e.MCPServers...)
	for _, u := range e.Unrun {
		if !slices.Contains(cv.comp.Unrun, u) {
			cv.comp.Unrun = append(cv.comp.Unrun, u)
		}
	}
	cv.comp.UserConfig = append(cv.comp.UserConfig, e.UserConfig...)
	cv.comp.Dependencies = append(cv.comp.Dependencies, e.Dependencies...)
}

// skipParts names the parts of the plugin Kiln does not run, and the
// fields it does not know.
func (cv *conversion) skipParts() {
	for _, p := range unrunParts {
		var where []string
		if p.place != "" {
			if _, err := cv.root.Lstat(p.place); err == nil {
				where = append(where, p.place+suffixDir(cv.root, p.place))
			}
		}
		if p.field != "" && slices.Contains(cv.comp.Unrun, p.field) {
			where = append(where, `"`+p.field+`" in the manifest`)
		}
		if len(where) > 0 {
			cv.res.Skipped = append(cv.res.Skipped, fmt.Sprintf("%s (%s): %s", cmp.Or(p.field, p.place), strings.Join(where, ", "), p.why))
		}
	}
	for _, k := range cv.comp.Unknown {
		cv.warn("the manifest's field %q is not known to Kiln and was not converted", k)
	}
	if len(cv.comp.Dependencies) > 0 {
		cv.warn("the plugin depends on %s; convert and install them too", strings.Join(cv.comp.Dependencies, ", "))
	}
}

func suffixDir(root *os.Root, p string) string {
	if fi, err := root.Lstat(p); err == nil && fi.IsDir() {
		return "/"
	}
	return ""
}

func (cv *conversion) warn(format string, args ...any) {
	cv.res.Warnings = append(cv.res.Warnings, fmt.Sprintf(format, args...))
}

func (cv *conversion) skip(format string, args ...any) {
	cv.res.Skipped = append(cv.res.Skipped, fmt.Sprintf(format, args...))
}

// skills copies the plugin's skills into the bundle.
func (cv *conversion) skills() error {
	type found struct{ name, dir string }
	var all []found
	look := func(dir string, explicit bool) {
		if _, err := cv.root.Stat(dir + "/" + skills.File); err == nil {
			all = append(all, found{path.Base(dir), dir})
			return
		}
		ents, err := fs.ReadDir(cv.root.FS(), dir)
		if errors.Is(err, fs.ErrNotExist) {
			if explicit {
				cv.warn("the manifest's skills folder %s does not exist", dir)
			}
			return
		}
		if err != nil {
			cv.skip("%s/: %v (a link out of the plugin is refused)", dir, err)
			return
		}
		for _, e := range ents {
			p := path.Join(dir, e.Name())
			fi, err := cv.root.Stat(p) // follows a link, inside the plugin only
			if err != nil {
				cv.skip("%s: %v (a link out of the plugin is refused)", p, err)
				continue
			}
			if !fi.IsDir() {
				continue
			}
			if fi, err := cv.root.Stat(p + "/" + skills.File); err == nil && fi.Mode().IsRegular() {
				all = append(all, found{e.Name(), p})
			}
		}
	}
	look(skills.BundleDir, false)
	for _, p := range cv.comp.Skills {
		if p != skills.BundleDir {
			look(p, true)
		}
	}
	seen := map[string]string{}
	for _, f := range all {
		if prev, dup := seen[f.name]; dup {
			if prev != f.dir {
				cv.skip("skill %s (%s/): another skill of that name is in %s/", f.name, f.dir, prev)
			}
			continue
		}
		seen[f.name] = f.dir
		ok, err := cv.skill(f.name, f.dir)
		if err != nil {
			return err
		}
		if ok {
			cv.res.Skills = append(cv.res.Skills, f.name)
		}
	}
	slices.Sort(cv.res.Skills)
	return nil
}

// skill converts the skill in folder dir of the plugin; false means it
// was skipped (and Result.Skipped says why).
func (cv *conversion) skill(name, dir string) (bool, error) {
	if !skills.ValidName(name) {
		cv.skip("skill %s (%s/): a Kiln skill's name is 1 to 64 characters of a-z, 0-9 and single hyphens", name, dir)
		return false, nil
	}
	src, err := readFile(cv.root.Name(), dir+"/"+skills.File)
	if err != nil {
		cv.skip("skill %s (%s/): %v", name, dir, err)
		return false, nil
	}
	_, warns, err := skills.Parse(name, src)
	var pe *skills.ParseError
	if errors.As(err, &pe) && pe.Reason == "name is required" {
		// Claude Code names a skill by its folder when SKILL.md does not.
		src = withName(src, name)
		cv.warn("skills/%s/SKILL.md: its frontmatter names no skill; \"name: %s\" (its folder's) was added", name, name)
		_, warns, err = skills.Parse(name, src)
	}
	if err != nil {
		cv.skip("skill %s (%s/): Kiln's SKILL.md reader refuses it: %v", name, dir, err)
		return false, nil
	}
	for _, w := range warns {
		cv.warn("skills/%s/%s", name, w)
	}
	if bytes.Contains(src, []byte("${CLAUDE_PLUGIN_ROOT}")) || bytes.Contains(src, []byte("${CLAUDE_SKILL_DIR}")) {
		cv.warn("skills/%s/SKILL.md refers to Claude Code's ${CLAUDE_PLUGIN_ROOT} or ${CLAUDE_SKILL_DIR}, which Kiln does not set", name)
	}
	dst := filepath.Join(cv.tmp, skills.BundleDir, name)
	staged := filepath.Join(cv.tmp, ".staging")
	if err := cv.copyTree(dir, staged); err != nil {
		os.RemoveAll(staged)
		var lim *limitError
		if errors.As(err, &lim) {
			return false, lim
		}
		cv.skip("skill %s (%s/): %v", name, dir, err)
		return false, nil
	}
	if err := os.WriteFile(filepath.Join(staged, skills.File), src, 0o644); err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return false, err
	}
	return true, os.Rename(staged, dst)
}

// withName adds "name: <name>" at the top of src's frontmatter.
func withName(src []byte, name string) []byte {
	i := bytes.IndexByte(src, '\n')
	if i < 0 {
		return src
	}
	out := slices.Clone(src[:i+1])
	out = append(out, "name: "+name+"\n"...)
	return append(out, src[i+1:]...)
}

// limitError is a plugin past the size limits: it fails the conversion.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

// copyTree copies the folder src of the plugin to the new folder dst: its
// regular files and folders. A link is followed when it leads inside the
// plugin's folder; a link out of it, a device or a socket is an error,
// as is a plugin past integrity.MaxFiles or MaxBytes (a *limitError).
func (cv *conversion) copyTree(src, dst string) error {
	return fs.WalkDir(cv.root.FS(), src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := cv.ctx.Err(); err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, src), "/")
		target := filepath.Join(dst, filepath.FromSlash(rel))
		if strings.ContainsFunc(rel, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return fmt.Errorf("%q: a file name with a control character", p)
		}
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		fi, err := cv.root.Stat(p) // follows a link, inside the plugin only
		if err != nil {
			return fmt.Errorf("%s: %v (a link out of the plugin is refused)", p, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file or folder", p)
		}
		if cv.files++; cv.files > integrity.MaxFiles {
			return &limitError{fmt.Sprintf("the plugin has more than %d files", integrity.MaxFiles)}
		}
		if cv.bytes += fi.Size(); cv.bytes > integrity.MaxBytes {
			return &limitError{fmt.Sprintf("the plugin is larger than %d MiB", integrity.MaxBytes>>20)}
		}
		in, err := cv.root.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm()&0o755|0o644)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, io.LimitReader(in, fi.Size())); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
}

// licenses copies the plugin's LICENSE, COPYING and NOTICE files: a
// bundle that redistributes its skills carries their terms.
func (cv *conversion) licenses() error {
	ents, err := fs.ReadDir(cv.root.FS(), ".")
	if err != nil {
		return err
	}
	for _, e := range ents {
		up := strings.ToUpper(e.Name())
		if !strings.HasPrefix(up, "LICENSE") && !strings.HasPrefix(up, "LICENCE") && !strings.HasPrefix(up, "COPYING") && !strings.HasPrefix(up, "NOTICE") {
			continue
		}
		fi, err := cv.root.Stat(e.Name())
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > MaxFileSize {
			continue
		}
		data, err := readFile(cv.root.Name(), e.Name())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(cv.tmp, e.Name()), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeManifest writes the bundle's kiln-plugin.json and returns it
// parsed.
func (cv *conversion) writeManifest(id, version, desc string) (*plugins.Manifest, error) {
	m := plugins.Manifest{APIVersion: plugins.APIVersion, ID: id, Version: version, Description: desc}
	if len(cv.res.Skills) > 0 {
		m.Provides = append(m.Provides, skillbundle.Name)
	}
	if len(cv.res.Servers) > 0 {
		m.Provides = append(m.Provides, mcpservers.Name)
	}
	m.Permissions = cv.permissions()
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	data = append(data, '\n')
	if _, err := plugins.ParseManifest(data); err != nil {
		return nil, core.Errorf(core.EINVALID, "claude plugin %s: the bundle's manifest would be invalid (give it another id?): %v", cv.name, err)
	}
	if err := os.WriteFile(filepath.Join(cv.tmp, plugins.ManifestFile), data, 0o644); err != nil {
		return nil, err
	}
	return plugins.LoadManifest(cv.tmp)
}

// permissions are what the converted servers need.
func (cv *conversion) permissions() plugins.Permissions {
	return plugins.Permissions{
		Exec:    cv.exec,
		Env:     slices.Sorted(maps.Keys(cv.envRefs)),
		Network: slices.Sorted(maps.Keys(cv.network)),
	}
}

// verify runs the bundle through the checks the registry's install runs
// on a data-only bundle.
func verify(dir string, m *plugins.Manifest) error {
	fsys := os.DirFS(dir)
	for _, k := range m.Provides {
		var err error
		switch k {
		case skillbundle.Name:
			_, err = skillbundle.List(fsys)
		case mcpservers.Name:
			_, err = mcpservers.Read(fsys, m.Permissions)
		}
		if err != nil {
			return fmt.Errorf("the converted bundle fails its own check (%s): %w", k, err)
		}
	}
	return nil
}

// emptyOrMissing refuses an out that exists and holds something.
func emptyOrMissing(out string) error {
	ents, err := os.ReadDir(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return core.Errorf(core.ECONFLICT, "%s exists and is not an empty folder", out)
	case len(ents) > 0:
		return core.Errorf(core.ECONFLICT, "%s exists and is not empty; choose a new folder for the bundle", out)
	}
	return nil
}

func entryDescription(e *Plugin) string {
	if e == nil {
		return ""
	}
	return e.Description
}

var (
	reSpace = regexp.MustCompile(`\s+`)
	// reSemver is SemVer 2.0.0, as plugins.ParseManifest reads it.
	reSemver = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*)?(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$`)
)

// description makes a Kiln manifest description of d: one line, at most
// 300 characters, without control or bidirectional formatting
// characters.
func description(d, name string) string {
	d = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return ' '
		}
		return r
	}, d)
	d = strings.TrimSpace(reSpace.ReplaceAllString(d, " "))
	if d == "" {
		return "Claude Code plugin " + name + ", converted to a Kiln bundle."
	}
	if utf8.RuneCountInString(d) > 300 {
		d = string([]rune(d)[:299]) + "…"
	}
	return d
}

// hostPattern is the permissions.network pattern for u: its host,
// lowercase, with the port when it is given.
func hostPattern(u *url.URL) string { return strings.ToLower(u.Host) }
