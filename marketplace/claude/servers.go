package claude

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/mcp/mcpservers"
)

// serverDef is one MCP server definition of the plugin and where it was
// found.
type serverDef struct {
	name string
	raw  json.RawMessage
	from string
}

// servers converts the plugin's MCP servers into the bundle's mcp.json.
func (cv *conversion) servers() error {
	var defs []serverDef
	if _, err := cv.root.Lstat(MCPFile); err == nil {
		d, err := cv.serverFile(MCPFile)
		if err != nil {
			return err
		}
		defs = append(defs, d...)
	}
	for i, s := range cv.comp.MCPServers {
		var d []serverDef
		var err error
		if s.Path != "" {
			if s.Path == MCPFile {
				continue
			}
			d, err = cv.serverFile(s.Path)
		} else {
			d, err = serverMap(s.Inline, fmt.Sprintf("the manifest's mcpServers[%d]", i))
		}
		if err != nil {
			return err
		}
		defs = append(defs, d...)
	}
	out := map[string]mcpservers.Server{}
	from := map[string]string{}
	for _, d := range defs {
		s, why, err := cv.server(d)
		if err != nil {
			return core.Errorf(core.EINVALID, "claude plugin %s: MCP server %q (%s): %v", cv.name, d.name, d.from, err)
		}
		if why != "" {
			cv.skip("MCP server %s (%s): %s", d.name, d.from, why)
			continue
		}
		if prev, dup := from[s.Name]; dup {
			return core.Errorf(core.EINVALID, "claude plugin %s: MCP server %q is defined in %s and again in %s; which one runs would be a guess", cv.name, s.Name, prev, d.from)
		}
		from[s.Name] = d.from
		out[s.Name] = s
	}
	if len(out) == 0 {
		return nil
	}
	data, err := json.MarshalIndent(map[string]any{"mcpServers": out}, "", "  ")
	if err != nil {
		return err
	}
	cv.res.Servers = slices.Sorted(maps.Keys(out))
	return os.WriteFile(filepath.Join(cv.tmp, mcpservers.File), append(data, '\n'), 0o644)
}

// serverFile reads the server definitions in the plugin's file p.
func (cv *conversion) serverFile(p string) ([]serverDef, error) {
	data, err := readFile(cv.root.Name(), p)
	if errors.Is(err, fs.ErrNotExist) {
		cv.warn("the manifest's MCP server file %s does not exist", p)
		return nil, nil
	}
	if err != nil {
		return nil, core.Errorf(core.EINVALID, "claude plugin %s: %s: %v", cv.name, p, err)
	}
	o, err := parseObject(data, p)
	if err != nil {
		return nil, core.Errorf(core.EINVALID, "claude plugin %s: %v", cv.name, err)
	}
	if o.has("mcpServers") {
		return serverMap(o.members["mcpServers"], p)
	}
	return serverMap(data, p)
}

// serverMap reads an object of server definitions by name (or one
// wrapped in {"mcpServers": ...}) found at from.
func serverMap(raw json.RawMessage, from string) ([]serverDef, error) {
	o, err := asObject(raw, from)
	if err != nil {
		return nil, core.Errorf(core.EINVALID, "MCP servers: %v", err)
	}
	if len(o.members) == 1 && o.has("mcpServers") && kind(o.members["mcpServers"]) == "object" {
		return serverMap(o.members["mcpServers"], from)
	}
	var out []serverDef
	for _, name := range slices.Sorted(maps.Keys(o.members)) {
		out = append(out, serverDef{name, o.members[name], from})
	}
	return out, nil
}

// serverFields are the fields of a Claude Code MCP server definition
// Kiln converts.
var serverFields = []string{"type", "command", "args", "env", "cwd", "url", "headers"}

var reServerName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// server converts one definition. A reason not to convert it is why
// (then s is empty); err is a definition that fails the conversion (a
// malformed one, an unpinned package).
func (cv *conversion) server(d serverDef) (s mcpservers.Server, why string, err error) {
	o, err := asObject(d.raw, "")
	if err != nil {
		return s, "", errors.New("want an object")
	}
	s.Name = strings.Trim(strings.Map(func(r rune) rune {
		switch {
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return '-'
	}, d.name), "-_")
	if len(s.Name) > 64 {
		s.Name = s.Name[:64]
	}
	if !reServerName.MatchString(s.Name) {
		return s, fmt.Sprintf("its name %q cannot be made a Kiln server name (a-z, 0-9, '_' and '-')", d.name), nil
	}
	if s.Name != d.name {
		cv.warn("MCP server %q is named %q in Kiln (its tools are mcp.%s.<tool>)", d.name, s.Name, s.Name)
	}
	if o.has("headersHelper") {
		return s, "its headers come from a program it runs (headersHelper), which Kiln does not run", nil
	}
	for _, k := range slices.Sorted(maps.Keys(o.members)) {
		if !slices.Contains(serverFields, k) && o.has(k) {
			cv.warn("MCP server %q: its field %q is not converted", d.name, k)
		}
	}
	if s.Type, err = o.str("type"); err != nil {
		return s, "", err
	}
	switch s.Type {
	case "", mcpservers.TypeStdio, mcpservers.TypeHTTP, mcpservers.TypeSSE:
	case "streamable-http":
		s.Type = mcpservers.TypeHTTP
	default:
		return s, fmt.Sprintf("its transport %q is not one Kiln speaks (stdio, http, sse)", s.Type), nil
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"command", &s.Command}, {"cwd", &s.Cwd}, {"url", &s.URL}} {
		if *f.dst, err = o.str(f.key); err != nil {
			return s, "", err
		}
	}
	if s.Args, err = o.strings("args", false); err != nil {
		return s, "", err
	}
	if s.Env, err = stringMap(o, "env"); err != nil {
		return s, "", err
	}
	if s.Headers, err = stringMap(o, "headers"); err != nil {
		return s, "", err
	}
	refs := map[string]bool{}
	rw := varRewriter{cv: cv, server: d.name, refs: refs}
	s.Command = rw.rewrite(s.Command)
	s.Cwd = rw.rewrite(s.Cwd)
	s.URL = rw.rewrite(s.URL)
	for i := range s.Args {
		s.Args[i] = rw.rewrite(s.Args[i])
	}
	for k, v := range s.Env {
		s.Env[k] = rw.rewrite(v)
	}
	for k, v := range s.Headers {
		s.Headers[k] = rw.rewrite(v)
	}
	if rw.why != "" {
		return s, rw.why, nil
	}
	if why := cv.bundled(s); why != "" {
		return s, why, nil
	}
	if s.Cwd != "" && !filepath.IsAbs(s.Cwd) {
		return s, fmt.Sprintf("it runs in the folder %q of the plugin, and Kiln does not run servers from a bundle's folder", s.Cwd), nil
	}
	perms := plugins.Permissions{Exec: s.Command != "", Env: slices.Sorted(maps.Keys(refs))}
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		if err != nil || u.Host == "" || strings.Contains(u.Host, "${") {
			return s, fmt.Sprintf("its URL %q has no host Kiln can ask consent for", s.URL), nil
		}
		perms.Network = []string{hostPattern(u)}
	}
	// The definition must pass the mcp-servers kind's own check.
	one, _ := json.Marshal(map[string]any{"mcpServers": map[string]mcpservers.Server{s.Name: s}})
	parsed, perr := mcpservers.Parse(one, &perms)
	if perr != nil {
		return s, strings.TrimPrefix(perr.Error(), mcpservers.File+": "), nil
	}
	s = parsed[0]
	warns, err := CheckPinned(s)
	if err != nil {
		return s, "", err
	}
	for _, w := range warns {
		cv.warn("MCP server %q: %s", s.Name, w)
	}
	cv.exec = cv.exec || perms.Exec
	for _, n := range perms.Network {
		cv.network[n] = true
	}
	for n := range refs {
		cv.envRefs[n] = true
	}
	return s, "", nil
}

// bundled says why s runs something shipped inside the plugin, or "":
// its command or an argument is a file of the plugin's folder.
func (cv *conversion) bundled(s mcpservers.Server) string {
	for _, a := range append([]string{s.Command}, s.Args...) {
		if a == "" || strings.HasPrefix(a, "-") || filepath.IsAbs(a) || strings.Contains(a, "${") || strings.Contains(a, "://") {
			continue
		}
		p := path.Clean(strings.TrimPrefix(a, "./"))
		if p == "." || strings.HasPrefix(p, "../") || !fs.ValidPath(p) {
			continue
		}
		fi, err := cv.root.Stat(p)
		if err == nil && (fi.Mode().IsRegular() || strings.Contains(a, "/")) {
			return fmt.Sprintf("it runs %s from inside the plugin, and a Kiln bundle's servers run programs from the host (its PATH) or a URL, not from the bundle", a)
		}
	}
	return ""
}

// stringMap reads the member key as an object of strings.
func stringMap(o object, key string) (map[string]string, error) {
	if !o.has(key) {
		return nil, nil
	}
	mo, err := asObject(o.members[key], o.path(key))
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(mo.members))
	for k := range mo.members {
		if out[k], err = mo.str(k); err != nil {
			return nil, err
		}
	}
	return out, nil
}

var (
	reVarRef   = regexp.MustCompile(`\$\{([^}]*)\}`)
	reEnvName  = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
	reNotIdent = regexp.MustCompile(`[^A-Za-z0-9_]`)
)

// varRewriter turns Claude Code's variable references into Kiln's: ${NAME}
// stays; ${NAME:-default} loses its default; ${user_config.key} becomes
// ${KEY}. A variable only Claude Code sets (${CLAUDE_PLUGIN_ROOT} ...) or
// one Kiln cannot pass sets why.
type varRewriter struct {
	cv     *conversion
	server string
	refs   map[string]bool
	why    string
}

func (rw *varRewriter) rewrite(s string) string {
	return reVarRef.ReplaceAllStringFunc(s, func(ref string) string {
		inner := ref[2 : len(ref)-1]
		name := inner
		if n, _, ok := strings.Cut(inner, ":-"); ok {
			name = n
			rw.cv.warn("MCP server %q: ${%s}'s default is dropped (Kiln has no defaults): set %s, or the server does not start", rw.server, n, n)
		}
		switch {
		case name == "CLAUDE_PLUGIN_ROOT":
			rw.fail("it runs a program shipped inside the plugin (${CLAUDE_PLUGIN_ROOT}), and a Kiln bundle's servers run programs from the host (its PATH) or a URL, not from the bundle")
		case name == "CLAUDE_PLUGIN_DATA":
			rw.fail("it keeps its state in Claude Code's plugin data folder (${CLAUDE_PLUGIN_DATA}), which Kiln does not provide")
		case strings.HasPrefix(name, "CLAUDE_"):
			rw.fail(fmt.Sprintf("it uses ${%s}, which only Claude Code sets", name))
		case strings.HasPrefix(name, "user_config."):
			key := strings.TrimPrefix(name, "user_config.")
			name = strings.ToUpper(reNotIdent.ReplaceAllString(key, "_"))
			rw.cv.warn("MCP server %q: the plugin option %s (${user_config.%s}) is read from the variable %s", rw.server, key, key, name)
		}
		switch {
		case strings.HasPrefix(name, "KILN_"):
			rw.fail(fmt.Sprintf("it uses ${%s}: variables named KILN_* are Kiln's own and never passed to a plugin", name))
		case !reEnvName.MatchString(name):
			rw.fail(fmt.Sprintf("it uses ${%s}: Kiln passes variables named in capitals, digits and '_' only", name))
		}
		rw.refs[name] = true
		return "${" + name + "}"
	})
}

func (rw *varRewriter) fail(why string) {
	if rw.why == "" {
		rw.why = why
	}
}
