// Package mcpservers is the "mcp-servers" extension kind: definitions of
// MCP servers a plugin ships, usually as a data-only bundle, in the file
// mcp.json of its folder, in the format MCP clients share:
//
//	{"mcpServers": {
//	  "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}},
//	  "docs":   {"url": "https://docs.example.com/mcp"}
//	}}
//
// A server runs a command (stdio) or is reached at an https URL
// (streamable HTTP), never both. Attach parses and checks the file and
// hands the servers to the server's MCP host; mcpserverstest is the
// kind's conformance kit.
package mcpservers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/plugins"
)

// Source is the client of the "mcp-servers" kind: a folder of files.
// plugins.Bundle satisfies it.
type Source interface {
	FS() fs.FS
}

// Server is one MCP server definition.
type Server struct {
	Name string `json:"-"`
	// Command and Args start a stdio server.
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// Env are variables set for the command; a value "${NAME}" takes the
	// server's variable NAME, which the plugin must declare in
	// permissions.env.
	Env map[string]string `json:"env,omitempty"`
	// URL reaches a streamable HTTP server.
	URL string `json:"url,omitempty"`
	// Headers are sent to an HTTP server, with the same "${NAME}" rule.
	Headers map[string]string `json:"headers,omitempty"`
}

// Host takes the MCP servers of a plugin while it is enabled. The MCP
// bridge implements it; a server without one lists a plugin's servers
// (Info.Provided) without starting them.
type Host interface {
	AddServers(source string, servers []Server) error
	RemoveServers(source string)
}

func init() { plugins.RegisterKind(Kind{}) }

// Kind is the "mcp-servers" kind.
type Kind struct{}

// Name is "mcp-servers".
func (Kind) Name() plugins.Capability { return plugins.CapMCPServers }

// Validate checks the source's server definitions at install.
func (Kind) Validate(_ context.Context, a plugins.Attach) error {
	src, ok := a.Client.(Source)
	if !ok {
		return fmt.Errorf("the runtime handed out %T for %q, not a folder", a.Client, plugins.CapMCPServers)
	}
	_, err := Read(src.FS(), a.Manifest.Permissions)
	return err
}

// Attach reads the source's servers and adds them to the host.
func (Kind) Attach(_ context.Context, a plugins.Attach) (plugins.Attached, error) {
	src, ok := a.Client.(Source)
	if !ok {
		return plugins.Attached{}, fmt.Errorf("the runtime handed out %T for %q, not a folder", a.Client, plugins.CapMCPServers)
	}
	servers, err := Read(src.FS(), a.Manifest.Permissions)
	if err != nil {
		return plugins.Attached{}, err
	}
	names := make([]string, len(servers))
	for i, s := range servers {
		names[i] = s.Name
	}
	host, ok := a.Host.(Host)
	if !ok {
		return plugins.Attached{Items: names}, nil
	}
	if err := host.AddServers(a.ID, servers); err != nil {
		return plugins.Attached{}, err
	}
	return plugins.Attached{Items: names, Detach: func() { host.RemoveServers(a.ID) }}, nil
}

// File is the definitions' file in a bundle's folder.
const File = "mcp.json"

// MaxFileSize bounds File.
const MaxFileSize = 1 << 20

var (
	reServer = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	reRef    = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
)

// Read parses and checks the MCP server definitions in fsys's mcp.json,
// sorted by name: every server named [a-z0-9][a-z0-9_-]*, with a command
// or an http(s) URL but not both, and every "${NAME}" it uses declared in
// perms.Env. Errors say which server and why.
func Read(fsys fs.FS, perms plugins.Permissions) ([]Server, error) {
	f, err := fsys.Open(File)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("provides mcp-servers but has no %s", File)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", File, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s is larger than %d KiB", File, MaxFileSize>>10)
	}
	var doc struct {
		Servers map[string]Server `json:"mcpServers"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", File, err)
	}
	if len(doc.Servers) == 0 {
		return nil, fmt.Errorf("%s defines no servers (want {\"mcpServers\": {\"<name>\": {...}}})", File)
	}
	var out []Server
	for name, s := range doc.Servers {
		s.Name = name
		if err := check(s, perms); err != nil {
			return nil, fmt.Errorf("%s: server %q: %w", File, name, err)
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Server) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func check(s Server, perms plugins.Permissions) error {
	switch {
	case !reServer.MatchString(s.Name):
		return errors.New("a name is 1 to 64 characters of a-z, 0-9, '_' and '-', starting with a letter or digit")
	case s.Command == "" && s.URL == "":
		return errors.New("needs a command (stdio) or a url (HTTP)")
	case s.Command != "" && s.URL != "":
		return errors.New("has both a command and a url; it is one or the other")
	case s.URL == "" && len(s.Headers) > 0:
		return errors.New("headers are for a url")
	case s.URL != "":
		if len(s.Args) > 0 || len(s.Env) > 0 {
			return errors.New("args and env are for a command")
		}
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
			return fmt.Errorf("url %q: want http(s)://host/path without user info", s.URL)
		}
	}
	for _, vals := range []map[string]string{s.Env, s.Headers} {
		for k, v := range vals {
			for _, m := range reRef.FindAllStringSubmatch(v, -1) {
				if !perms.AllowsEnv(m[1]) {
					return fmt.Errorf("%s uses ${%s}, which the plugin does not declare in permissions.env", k, m[1])
				}
			}
		}
	}
	return nil
}
