package claude

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/kilnhq/kiln/core"
)

// PluginManifest is a plugin's .claude-plugin/plugin.json.
type PluginManifest struct {
	Name        string
	Version     string
	Description string
	Author      Person
	Homepage    string
	Repository  string
	License     string
	Keywords    []string
	Components  Components
}

// Components are what a plugin.json or a marketplace entry says of a
// plugin's parts beyond the standard layout.
type Components struct {
	// Skills are folders of skills (or skill folders) besides skills/,
	// relative to the plugin's root, clean.
	Skills []string
	// MCPServers are files of MCP server definitions besides .mcp.json,
	// or definitions given inline.
	MCPServers []MCPServers
	// Unrun names the fields declaring parts Kiln does not run
	// ("commands", "hooks", ...), in the order of unrunParts.
	Unrun []string
	// UserConfig names the options Claude Code asks its user for; MCP
	// server definitions refer to them as ${user_config.NAME}.
	UserConfig []string
	// Dependencies names the plugins this one needs.
	Dependencies []string
	// Unknown names the fields this package does not know, sorted.
	Unknown []string
}

// MCPServers is one source of MCP server definitions: a file relative to
// the plugin's root, or the definitions themselves (an object of servers
// by name).
type MCPServers struct {
	Path   string
	Inline json.RawMessage
}

// unrunParts are the parts of a Claude Code plugin Kiln does not run:
// the manifest field, the default place in the plugin's folder ("" for
// none) and why.
var unrunParts = []struct{ field, place, why string }{
	{"commands", "commands", "slash commands are Claude Code's; Kiln does not run them (a skill does the same job)"},
	{"agents", "agents", "Claude Code subagent definitions are not converted; Kiln makes subagents from skills"},
	{"hooks", "hooks", "Kiln does not run Claude Code hooks (shell commands on Claude Code's events)"},
	{"outputStyles", "output-styles", "output styles change Claude Code's system prompt; Kiln has no such setting"},
	{"lspServers", ".lsp.json", "Kiln does not run language servers"},
	{"monitors", "monitors", "Kiln does not run Claude Code monitors"},
	{"themes", "themes", "Claude Code themes do not apply to Kiln"},
	{"channels", "", "Claude Code channels do not apply to Kiln"},
	{"", "bin", "programs a plugin adds to Claude Code's PATH are not installed by Kiln"},
	{"", "settings.json", "a plugin's default Claude Code settings do not apply to Kiln"},
}

// Fields of plugin.json and of a marketplace entry that are metadata or
// that Components reads.
var (
	manifestFields = []string{"$schema", "name", "version", "description", "author", "homepage", "repository", "license", "keywords",
		"skills", "mcpServers", "userConfig", "dependencies"}
	entryFields = append([]string{"source", "category", "tags", "strict", "id"}, manifestFields...)
)

// ParsePluginManifest reads a plugin's plugin.json, as ParseMarketplace
// reads a marketplace: one JSON object without duplicate keys; name
// kebab-case; the fields Kiln uses of the right types; component paths
// relative to the plugin's root, never above it. Unknown fields are
// listed in Components.Unknown. Errors are EINVALID and name the field.
func ParsePluginManifest(data []byte) (*PluginManifest, error) {
	m, err := parsePluginManifest(data)
	if err != nil {
		return nil, core.Errorf(core.EINVALID, "claude plugin: %v", err)
	}
	return m, nil
}

func parsePluginManifest(data []byte) (*PluginManifest, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("plugin.json is larger than %d MiB", MaxFileSize>>20)
	}
	o, err := parseObject(data, "plugin.json")
	if err != nil {
		return nil, err
	}
	m := &PluginManifest{}
	if m.Name, err = o.str("name"); err != nil {
		return nil, err
	}
	if err := checkName("name", m.Name); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"version", &m.Version}, {"description", &m.Description}, {"homepage", &m.Homepage}, {"repository", &m.Repository}, {"license", &m.License}} {
		if *f.dst, err = o.str(f.key); err != nil {
			return nil, err
		}
	}
	if m.Author, err = person(o, "author", true); err != nil {
		return nil, err
	}
	if m.Keywords, err = o.strings("keywords", false); err != nil {
		return nil, err
	}
	if m.Components, err = parseComponents(o, manifestFields); err != nil {
		return nil, err
	}
	return m, nil
}

// parseComponents reads the component fields of o, a plugin.json or an
// entry whose other known fields are known.
func parseComponents(o object, known []string) (Components, error) {
	var c Components
	var err error
	skills, err := o.strings("skills", true)
	if err != nil {
		return c, err
	}
	for i, s := range skills {
		p, err := relPath(fmt.Sprintf("%s[%d]", o.path("skills"), i), s)
		if err != nil {
			return c, err
		}
		c.Skills = append(c.Skills, p)
	}
	if o.has("mcpServers") {
		if c.MCPServers, err = mcpServersField(o.members["mcpServers"], o.path("mcpServers")); err != nil {
			return c, err
		}
	}
	if o.has("userConfig") {
		uc, err := asObject(o.members["userConfig"], o.path("userConfig"))
		if err != nil {
			return c, err
		}
		c.UserConfig = slices.Sorted(maps.Keys(uc.members))
	}
	if o.has("dependencies") {
		raw := o.members["dependencies"]
		if kind(raw) == "object" {
			deps, _ := asObject(raw, o.path("dependencies"))
			c.Dependencies = slices.Sorted(maps.Keys(deps.members))
		} else if c.Dependencies, err = o.strings("dependencies", false); err != nil {
			return c, err
		}
	}
	for _, p := range unrunParts {
		if p.field != "" && o.has(p.field) {
			c.Unrun = append(c.Unrun, p.field)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(o.members)) {
		if !slices.Contains(known, k) && !slices.ContainsFunc(unrunParts, func(p struct{ field, place, why string }) bool { return p.field == k }) {
			c.Unknown = append(c.Unknown, k)
		}
	}
	return c, nil
}

// mcpServersField reads "mcpServers": a path, an array of paths and
// objects, or an object of servers by name (also when wrapped in
// {"mcpServers": {...}}, the form of .mcp.json).
func mcpServersField(raw json.RawMessage, at string) ([]MCPServers, error) {
	switch kind(raw) {
	case "string":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		p, err := relPath(at, s)
		if err != nil {
			return nil, err
		}
		return []MCPServers{{Path: p}}, nil
	case "object":
		return []MCPServers{{Inline: raw}}, nil
	case "array":
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, err
		}
		var out []MCPServers
		for i, it := range items {
			if k := kind(it); k != "string" && k != "object" {
				return nil, fmt.Errorf("%s[%d]: want a path or an object of servers, not %s", at, i, article(k))
			}
			one, err := mcpServersField(it, fmt.Sprintf("%s[%d]", at, i))
			if err != nil {
				return nil, err
			}
			out = append(out, one...)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("%s: want a path, an object of servers or an array of them, not %s", at, article(kind(raw)))
	}
}
