// Package mcpservers is the "mcp-servers" extension kind: definitions of
// MCP servers a plugin ships, usually as a data-only bundle, in the file
// mcp.json of its folder, in the format MCP clients share:
//
//	{"mcpServers": {
//	  "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}},
//	  "docs":   {"url": "https://docs.example.com/mcp"}
//	}}
//
// A server runs a command (stdio, in cwd when given) or is reached at an
// http(s) URL, never both; "type" is "stdio" (the default with a command),
// "http" (streamable HTTP, the default with a URL) or "sse" (the older
// HTTP+SSE transport). What a server does on the plugin's
// behalf is what the user consented to: a command needs permissions.exec,
// a URL's host its entry in permissions.network, and every "${NAME}" it
// uses the variable in permissions.env. Attach parses and checks the file
// and hands the servers to the server's MCP host; mcpserverstest is the
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
	"maps"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/netguard"
)

// Source is the client of the "mcp-servers" kind: a folder of files.
// plugins.Bundle satisfies it.
type Source interface {
	FS() fs.FS
}

// Server is one MCP server definition.
type Server struct {
	Name string `json:"-"`
	// Type is the transport: TypeStdio, TypeHTTP or TypeSSE. Read and
	// Parse fill it in when the file leaves it out.
	Type string `json:"type,omitempty"`
	// Command and Args start a stdio server, in the directory Cwd when
	// it is given (an absolute path, or one relative to the directory
	// the host runs servers in).
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	Cwd     string   `json:"cwd,omitempty"`
	// Env are variables set for the command. A "${NAME}" in a value (or
	// in the command, an argument, the URL or a header) takes the
	// server's variable NAME, which the plugin must declare in
	// permissions.env.
	Env map[string]string `json:"env,omitempty"`
	// URL reaches a streamable HTTP server.
	URL string `json:"url,omitempty"`
	// Headers are sent to an HTTP server, with the same "${NAME}" rule.
	Headers map[string]string `json:"headers,omitempty"`
	// Trust and Disabled are Kiln's, in the user's own configuration
	// only (a plugin's mcp.json may not set them): trust "all" holds none
	// of the server's tools for approval (by default those not annotated
	// read-only are held); a disabled server is not connected until it
	// is enabled.
	Trust    string `json:"trust,omitempty"`
	Disabled bool   `json:"disabled,omitempty"`
	// Timeout is how long, in milliseconds, a tool call waits for the
	// server's answer before it fails (as Gemini CLI reads "timeout"),
	// 1 to MaxTimeout; 0 (left out: "timeout": 0 is refused) takes the
	// host's default.
	Timeout int64 `json:"timeout,omitempty"`
}

// MaxTimeout bounds Server.Timeout: one day, in milliseconds.
const MaxTimeout = 24 * 60 * 60 * 1000

// Transports.
const (
	TypeStdio = "stdio"
	TypeHTTP  = "http"
	TypeSSE   = "sse"
)

// Host takes the MCP servers of a plugin while it is enabled. The MCP
// bridge implements it; a server without one lists a plugin's servers
// (Info.Provided) without starting them.
type Host interface {
	AddServers(source string, servers []Server) error
	RemoveServers(source string)
}

// Name is the kind's name, as manifests list it in "provides".
const Name plugins.Capability = "mcp-servers"

func init() { plugins.RegisterKind(Kind{}) }

// Kind is the "mcp-servers" kind.
type Kind struct{}

// Name is "mcp-servers".
func (Kind) Name() plugins.Capability { return Name }

// IsData is true: MCP server definitions are data, which a data-only bundle provides.
func (Kind) IsData() bool { return true }

// Validate checks the source's server definitions at install.
func (Kind) Validate(_ context.Context, a plugins.Attach) error {
	src, ok := a.Client.(Source)
	if !ok {
		return fmt.Errorf("the runtime handed out %T for %q, not a folder", a.Client, Name)
	}
	_, err := Read(src.FS(), a.Manifest.Permissions)
	return err
}

// Attach reads the source's servers and adds them to the host.
func (Kind) Attach(_ context.Context, a plugins.Attach) (plugins.Attached, error) {
	src, ok := a.Client.(Source)
	if !ok {
		return plugins.Attached{}, fmt.Errorf("the runtime handed out %T for %q, not a folder", a.Client, Name)
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
// sorted by name. Decoding is strict, as for manifests: unknown fields,
// duplicate keys (at any depth) and trailing data are errors. Every
// server is named [a-z0-9][a-z0-9_-]* and has a non-blank command or an
// http(s) URL (with a host, no user info and no fragment) but not both; a
// command needs perms.Exec, a URL's host:port perms.Network, and every
// "${NAME}" the server uses perms.Env. Errors say which server and why.
func Read(fsys fs.FS, perms plugins.Permissions) ([]Server, error) {
	f, err := fsys.Open(File)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("provides mcp-servers but has no %s", File)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", File, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", File, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s is larger than %d KiB", File, MaxFileSize>>10)
	}
	return Parse(data, &perms)
}

// Parse parses and checks MCP server definitions in the mcp.json format,
// as Read does. perms are the consent of the plugin that ships them; nil
// means no plugin (the user's own configuration), so nothing is checked
// against permissions.
func Parse(data []byte, perms *plugins.Permissions) ([]Server, error) {
	if err := plugins.StrictJSON(data); err != nil {
		return nil, fmt.Errorf("%s: %w", File, err)
	}
	var doc struct {
		Servers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := decode(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", File, err)
	}
	if len(doc.Servers) == 0 {
		return nil, fmt.Errorf("%s defines no servers (want {\"mcpServers\": {\"<name>\": {...}}})", File)
	}
	var out []Server
	for _, name := range slices.Sorted(maps.Keys(doc.Servers)) {
		var s Server
		if err := decode(doc.Servers[name], &s); err != nil {
			return nil, fmt.Errorf("%s: server %q: %w", File, name, err)
		}
		// Timeout's zero is also its absence: see whether it was given.
		var given struct {
			Timeout *int64 `json:"timeout"`
		}
		_ = json.Unmarshal(doc.Servers[name], &given) // decoded above
		s.Name = name
		if err := check(&s, given.Timeout != nil, perms); err != nil {
			return nil, fmt.Errorf("%s: server %q: %w", File, name, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// decode decodes data into v, refusing unknown fields, and words a value
// of the wrong type in JSON's terms.
func decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return fmt.Errorf("want an object, not %s", article(te.Value))
		}
		return fmt.Errorf("%s: want %s, not %s", te.Field, article(jsonKind(te.Type)), article(te.Value))
	}
	return err
}

// check checks s, whose timeout was given when timeout is true (0
// included), and sets its default type.
func check(s *Server, timeout bool, perms *plugins.Permissions) error {
	switch {
	case perms != nil && (s.Trust != "" || s.Disabled):
		return errors.New("trust and disabled are the user's to set, in their own .mcp.json, not a plugin's")
	case s.Trust != "" && s.Trust != "all":
		return fmt.Errorf(`trust %q: want "all" (hold none of its tools for approval) or leave it out`, s.Trust)
	case timeout && (s.Timeout < 1 || s.Timeout > MaxTimeout):
		return fmt.Errorf("timeout %d: want milliseconds from 1 to %d (a day), or leave it out for the default", s.Timeout, MaxTimeout)
	}
	switch s.Type {
	case "":
		s.Type = TypeStdio
		if s.URL != "" {
			s.Type = TypeHTTP
		}
	case TypeStdio:
		if s.URL != "" {
			return errors.New(`type "stdio" is for a command, not a url`)
		}
	case TypeHTTP, TypeSSE:
		if s.Command != "" {
			return fmt.Errorf("type %q is for a url, not a command", s.Type)
		}
	default:
		return fmt.Errorf(`type %q: want "stdio", "http" or "sse"`, s.Type)
	}
	switch {
	case !reServer.MatchString(s.Name):
		return errors.New("a name is 1 to 64 characters of a-z, 0-9, '_' and '-', starting with a letter or digit")
	case s.Command == "" && s.URL == "":
		return errors.New("needs a command (stdio) or a url (HTTP)")
	case s.Command != "" && s.URL != "":
		return errors.New("has both a command and a url; it is one or the other")
	case s.URL == "" && len(s.Headers) > 0:
		return errors.New("headers are for a url")
	}
	if s.URL != "" {
		if len(s.Args) > 0 || len(s.Env) > 0 {
			return errors.New("args and env are for a command")
		}
		if s.Cwd != "" {
			return errors.New("cwd is for a command")
		}
		// A fragment is never sent to a server: a URL with one is a
		// mistake (RFC 3986, section 3.5).
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || strings.Contains(s.URL, "#") {
			return fmt.Errorf("url %q: want http(s)://host/path without user info or a fragment", s.URL)
		}
		if perms == nil {
			// the user's own configuration: any host
		} else if err := netguard.CheckURL(*perms, u); err != nil {
			return fmt.Errorf("url %q: %w; declare the host in permissions.network", s.URL, err)
		}
	} else {
		if strings.TrimSpace(s.Command) == "" {
			return errors.New("the command is blank")
		}
		if perms != nil && !perms.Exec {
			return errors.New("runs a command, which the plugin does not declare (permissions.exec)")
		}
	}
	// Every string that may be expanded: what is not checked here could
	// read a variable the user never agreed to.
	if perms == nil {
		return nil
	}
	refs := []struct{ where, value string }{{"command", s.Command}, {"url", s.URL}, {"cwd", s.Cwd}}
	for i, a := range s.Args {
		refs = append(refs, struct{ where, value string }{fmt.Sprintf("args[%d]", i), a})
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		refs = append(refs, struct{ where, value string }{"env " + k, s.Env[k]})
	}
	for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
		refs = append(refs, struct{ where, value string }{"header " + k, s.Headers[k]})
	}
	for _, r := range refs {
		for _, m := range reRef.FindAllStringSubmatch(r.value, -1) {
			if !perms.AllowsEnv(m[1]) {
				return fmt.Errorf("%s uses ${%s}, which the plugin does not declare in permissions.env", r.where, m[1])
			}
		}
	}
	return nil
}

// Expand returns s with every "${NAME}" in its command, arguments, cwd,
// environment values, URL and header values replaced by lookup(NAME). A
// name lookup does not know is an error naming the variable and where it
// is used (never a value).
func Expand(s Server, lookup func(name string) (string, bool)) (Server, error) {
	var missing []string
	exp := func(where, v string) string {
		return reRef.ReplaceAllStringFunc(v, func(ref string) string {
			name := reRef.FindStringSubmatch(ref)[1]
			val, ok := lookup(name)
			if !ok {
				missing = append(missing, fmt.Sprintf("${%s} in %s", name, where))
			}
			return val
		})
	}
	out := s
	out.Command = exp("command", s.Command)
	out.URL = exp("url", s.URL)
	out.Cwd = exp("cwd", s.Cwd)
	out.Args = nil
	for i, a := range s.Args {
		out.Args = append(out.Args, exp(fmt.Sprintf("args[%d]", i), a))
	}
	out.Env = expandMap(s.Env, "env ", exp)
	out.Headers = expandMap(s.Headers, "header ", exp)
	if len(missing) > 0 {
		return Server{}, fmt.Errorf("server %q: unset variables: %s", s.Name, strings.Join(missing, ", "))
	}
	return out, nil
}

func expandMap(m map[string]string, where string, exp func(where, v string) string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out[k] = exp(where+k, m[k])
	}
	return out
}

// jsonKind names the JSON value that decodes into t.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Map, reflect.Struct:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	default:
		return "number"
	}
}

// article puts "a" or "an" before a JSON kind ("an array", "a string").
func article(kind string) string {
	if strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}

// Interface guards.
var (
	_ plugins.DataKind  = Kind{}
	_ plugins.Validator = Kind{}
)
