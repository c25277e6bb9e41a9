// Package mcpserverstest is the conformance kit of the "mcp-servers"
// extension kind (plugins/mcp/mcpservers), in the spirit of testing/fstest:
// Run lays out bundles with an mcp.json in temporary folders, has the
// runtime under test hand out the kind's client for each (an
// mcpservers.Source), and checks that the kind, attached the way the
// registry attaches it, reads the servers the file defines, in name
// order, and refuses, naming the server and the reason, every definition
// the package's rules forbid.
//
// # Runtimes
//
// MCP server definitions are data: nothing in the bundle runs until the
// server's MCP bridge starts what they describe, and the kind's client is
// the folder itself. Two runtimes hand out a folder and so carry the kind:
// "data", which opens an installed bundle's folder through an os.Root
// (plugins.RuntimeData), and "builtin", for definitions compiled into
// kiln (an embed.FS or fstest.MapFS behind plugins.Clients). The "wasm"
// and "process" runtimes run a plugin's code and hand out what that code
// serves; a definition is not served by code, so they do not carry the
// kind (their Dispense refuses it) and the kit is not run over them.
// Kiln's own tests run it over both runtimes that do
// (conformance_test.go).
package mcpserverstest

import (
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/mcp/mcpservers"
)

// Open returns the client of the "mcp-servers" kind for the bundle in
// dir, as the runtime under test hands it out. dir holds the bundle's
// manifest (plugins.ManifestFile: a data-only bundle with ID PluginID
// providing "mcp-servers", whose permissions vary from case to case) and
// its files. Run calls Open once per bundle with that case's t, which Open
// may use to fail and to release what it opened (t.Cleanup).
type Open func(t *testing.T, dir string) mcpservers.Source

// PluginID is the ID of the bundles the kit lays out.
const PluginID = "kit.mcp"

// Perms are the permissions of the kit's bundles unless a case says
// otherwise: the variables, programs and hosts its good servers use.
const Perms = `{"env":["GITHUB_TOKEN","DOCS_KEY"],"exec":true,"network":["docs.example.com","localhost:3000"]}`

// Manifest returns the manifest of a kit bundle with the permissions perms
// (a JSON object).
func Manifest(perms string) string {
	return `{"apiVersion":"kiln.dev/v1","id":"` + PluginID + `","version":"1.0.0","description":"MCP servers for the conformance kit.",` +
		`"provides":["mcp-servers"],"permissions":` + perms + `}`
}

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, open Open) {
	t.Helper()
	t.Run("Kind", testKind)
	t.Run("Parse", func(t *testing.T) { testParse(t, open) })
	t.Run("Refused", func(t *testing.T) { testRefused(t, open) })
	t.Run("Size", func(t *testing.T) { testSize(t, open) })
	t.Run("SymlinkOut", func(t *testing.T) { testSymlinkOut(t, open) })
	t.Run("Host", func(t *testing.T) { testHost(t, open) })
	t.Run("HostFails", func(t *testing.T) { testHostFails(t, open) })
	t.Run("NoHost", func(t *testing.T) { testNoHost(t, open) })
}

// good defines one server of each sort, out of name order.
const good = `{"mcpServers": {
  "zeta": {"url": "https://docs.example.com/mcp", "headers": {"Authorization": "Bearer ${DOCS_KEY}"}},
  "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}", "LOG_LEVEL": "debug"}},
  "local_1": {"url": "http://localhost:3000/mcp?x=1"},
  "0-min": {"command": "/usr/local/bin/srv"},
  "old": {"type": "sse", "url": "https://docs.example.com/sse"},
  "here": {"type": "stdio", "command": "srv", "cwd": "/srv/data", "timeout": 600000}
}}`

// goodServers is what good defines, in name order.
var goodServers = []mcpservers.Server{
	{Name: "0-min", Type: "stdio", Command: "/usr/local/bin/srv"},
	{Name: "github", Type: "stdio", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-github"},
		Env: map[string]string{"GITHUB_TOKEN": "${GITHUB_TOKEN}", "LOG_LEVEL": "debug"}},
	{Name: "here", Type: "stdio", Command: "srv", Cwd: "/srv/data", Timeout: 600000},
	{Name: "local_1", Type: "http", URL: "http://localhost:3000/mcp?x=1"},
	{Name: "old", Type: "sse", URL: "https://docs.example.com/sse"},
	{Name: "zeta", Type: "http", URL: "https://docs.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer ${DOCS_KEY}"}},
}

var goodNames = []string{"0-min", "github", "here", "local_1", "old", "zeta"}

// bundle is a kit bundle: its permissions and files.
type bundle struct {
	perms string            // "" is Perms
	files map[string]string // slash-separated paths
}

// lay writes b into a new temporary folder and returns it.
func lay(t *testing.T, b bundle) string {
	t.Helper()
	dir := t.TempDir()
	write(t, dir, plugins.ManifestFile, Manifest(cmp.Or(b.perms, Perms)))
	for p, body := range b.files {
		write(t, dir, p, body)
	}
	return dir
}

func write(t *testing.T, dir, p, body string) {
	t.Helper()
	full := filepath.Join(dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// opened is a bundle as the runtime under test hands it out, with the
// manifest the kind is given.
type opened struct {
	src mcpservers.Source
	m   *plugins.Manifest
}

func openBundle(t *testing.T, open Open, b bundle) opened {
	t.Helper()
	dir := lay(t, b)
	m, err := plugins.LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := open(t, dir)
	if src == nil || src.FS() == nil {
		t.Fatal("Open returned a nil source or a source with a nil FS")
	}
	return opened{src, m}
}

// attach is what the registry hands the kind.
func (o opened) attach(host any) plugins.Attach {
	return plugins.Attach{ID: PluginID, Manifest: o.m, Client: o.src, Host: host}
}

// kind is the registered "mcp-servers" kind.
func kind(t *testing.T) plugins.Kind {
	t.Helper()
	k, ok := plugins.LookupKind(mcpservers.Name)
	if !ok {
		t.Fatalf("no kind %q is registered", mcpservers.Name)
	}
	return k
}

func testKind(t *testing.T) {
	k := kind(t)
	if k.Name() != mcpservers.Name {
		t.Errorf("the kind registered as %q calls itself %q", mcpservers.Name, k.Name())
	}
	v, ok := k.(plugins.Validator)
	if !ok {
		t.Fatalf("the %q kind cannot check a bundle at install (no Validate)", mcpservers.Name)
	}
	m, err := plugins.ParseManifest([]byte(Manifest(Perms)))
	if err != nil {
		t.Fatal(err)
	}
	a := plugins.Attach{ID: PluginID, Manifest: m, Client: 42}
	if _, err := k.Attach(context.Background(), a); err == nil || !strings.Contains(err.Error(), string(mcpservers.Name)) {
		t.Errorf("Attach of a number as the client: %v; want an error naming the kind", err)
	}
	if err := v.Validate(context.Background(), a); err == nil {
		t.Error("Validate of a number as the client succeeded")
	}
}

func testParse(t *testing.T, open Open) {
	o := openBundle(t, open, bundle{files: map[string]string{mcpservers.File: good}})
	servers, err := mcpservers.Read(o.src.FS(), o.m.Permissions)
	if err != nil || !reflect.DeepEqual(servers, goodServers) {
		t.Errorf("Read = %+v, %v;\nwant %+v", servers, err, goodServers)
	}
	att, err := kind(t).Attach(context.Background(), o.attach(nil))
	if err != nil || !slices.Equal(att.Items, goodNames) {
		t.Errorf("Attach lists %q, %v; want %q", att.Items, err, goodNames)
	}
	if err := kind(t).(plugins.Validator).Validate(context.Background(), o.attach(nil)); err != nil {
		t.Errorf("Validate of good definitions: %v", err)
	}
}

// refused are bundles the kind refuses, each with what the error must
// say beyond the file's name.
var refused = []struct {
	name   string
	perms  string // "" is Perms
	body   string // mcp.json; "" for none
	reason string
}{
	// The file.
	{"no mcp.json", "", "", "has no mcp.json"},
	{"not JSON", "", `{"mcpServers": {`, "mcp.json: the JSON ends early"},
	{"bad JSON", "", `{"mcpServers": {"x": {"command": "x",}}}`, "mcp.json: invalid character"},
	{"not an object", "", `["github"]`, "mcp.json: want an object, not an array"},
	{"no servers", "", `{}`, "defines no servers"},
	{"empty servers", "", `{"mcpServers": {}}`, "defines no servers"},
	{"servers not an object", "", `{"mcpServers": ["github"]}`, "mcp.json: mcpServers: want an object, not an array"},
	{"server not an object", "", `{"mcpServers": {"x": "npx"}}`, `mcp.json: server "x": want an object, not a string`},
	{"args not an array", "", `{"mcpServers": {"x": {"command": "x", "args": "-v"}}}`, `mcp.json: server "x": args: want an array, not a string`},
	{"env value not a string", "", `{"mcpServers": {"x": {"command": "x", "env": {"N": 1}}}}`, `mcp.json: server "x": env: want a string, not a number`},
	{"unknown top-level field", "", `{"mcpServers": {"x": {"command": "x"}}, "inputs": []}`, `unknown field "inputs"`},
	{"unknown server field", "", `{"mcpServers": {"x": {"command": "x", "autoApprove": []}}}`, `server "x": json: unknown field "autoApprove"`},
	{"negative timeout", "", `{"mcpServers": {"x": {"command": "x", "timeout": -1}}}`, `server "x": timeout -1: want milliseconds from 1 to 86400000`},
	{"zero timeout", "", `{"mcpServers": {"x": {"command": "x", "timeout": 0}}}`, `server "x": timeout 0: want milliseconds from 1 to 86400000 (a day), or leave it out for the default`},
	{"timeout over a day", "", `{"mcpServers": {"x": {"command": "x", "timeout": 86400001}}}`, `server "x": timeout 86400001: want milliseconds`},
	{"timeout not a number", "", `{"mcpServers": {"x": {"command": "x", "timeout": "30s"}}}`, `server "x": timeout: want a number, not a string`},
	{"duplicate server", "", `{"mcpServers": {"x": {"command": "x"}, "x": {"command": "rm"}}}`, "mcpServers.x: duplicate key"},
	{"duplicate env key", "", `{"mcpServers": {"x": {"command": "x", "env": {"A": "1", "A": "2"}}}}`, "mcpServers.x.env.A: duplicate key"},
	{"trailing data", "", `{"mcpServers": {"x": {"command": "x"}}} {"mcpServers": {}}`, "trailing data"},
	// Names.
	{"uppercase name", "", `{"mcpServers": {"GitHub": {"command": "x"}}}`, `server "GitHub": a name is`},
	{"name with a dot", "", `{"mcpServers": {"a.b": {"command": "x"}}}`, `server "a.b": a name is`},
	{"name with a space", "", `{"mcpServers": {"a b": {"command": "x"}}}`, `server "a b": a name is`},
	{"name starting with -", "", `{"mcpServers": {"-x": {"command": "x"}}}`, `server "-x": a name is`},
	{"name starting with _", "", `{"mcpServers": {"_x": {"command": "x"}}}`, `server "_x": a name is`},
	{"empty name", "", `{"mcpServers": {"": {"command": "x"}}}`, `server "": a name is`},
	{"65-character name", "", `{"mcpServers": {"` + strings.Repeat("a", 65) + `": {"command": "x"}}}`, "a name is"},
	// Command or url.
	{"neither", "", `{"mcpServers": {"x": {}}}`, `server "x": needs a command (stdio) or a url`},
	{"empty command", "", `{"mcpServers": {"x": {"command": ""}}}`, `server "x": needs a command (stdio) or a url`},
	{"blank command", "", `{"mcpServers": {"x": {"command": "  \t"}}}`, `server "x": the command is blank`},
	{"both", "", `{"mcpServers": {"x": {"command": "x", "url": "https://docs.example.com/mcp"}}}`, "both a command and a url"},
	{"headers without url", "", `{"mcpServers": {"x": {"command": "x", "headers": {"A": "b"}}}}`, "headers are for a url"},
	{"args with url", "", `{"mcpServers": {"x": {"url": "https://docs.example.com/mcp", "args": ["-v"]}}}`, "args and env are for a command"},
	{"env with url", "", `{"mcpServers": {"x": {"url": "https://docs.example.com/mcp", "env": {"A": "b"}}}}`, "args and env are for a command"},
	{"cwd with url", "", `{"mcpServers": {"x": {"url": "https://docs.example.com/mcp", "cwd": "/tmp"}}}`, "cwd is for a command"},
	// The type.
	{"unknown type", "", `{"mcpServers": {"x": {"type": "ws", "url": "https://docs.example.com/mcp"}}}`, `type "ws": want "stdio", "http" or "sse"`},
	{"stdio with url", "", `{"mcpServers": {"x": {"type": "stdio", "url": "https://docs.example.com/mcp"}}}`, `type "stdio" is for a command`},
	{"sse with command", "", `{"mcpServers": {"x": {"type": "sse", "command": "x"}}}`, `type "sse" is for a url`},
	// The url.
	{"ftp url", "", `{"mcpServers": {"x": {"url": "ftp://docs.example.com/mcp"}}}`, `url "ftp://docs.example.com/mcp": want http(s)://host/path`},
	{"url without scheme", "", `{"mcpServers": {"x": {"url": "docs.example.com/mcp"}}}`, "want http(s)://host/path"},
	{"url without host", "", `{"mcpServers": {"x": {"url": "https:///mcp"}}}`, "want http(s)://host/path"},
	{"url with user info", "", `{"mcpServers": {"x": {"url": "https://me:pw@docs.example.com/mcp"}}}`, "without user info"},
	{"url with a fragment", "", `{"mcpServers": {"x": {"url": "https://docs.example.com/mcp#tools"}}}`, "or a fragment"},
	{"url with an empty fragment", "", `{"mcpServers": {"x": {"url": "https://docs.example.com/mcp#"}}}`, "or a fragment"},
	{"unparsable url", "", `{"mcpServers": {"x": {"url": "https://docs.example.com/%zz"}}}`, "want http(s)://host/path"},
	// What the user consented to.
	{"undeclared host", "", `{"mcpServers": {"x": {"url": "https://other.example.com/mcp"}}}`, "other.example.com:443: not permitted by permissions.network"},
	{"undeclared port", "", `{"mcpServers": {"x": {"url": "https://docs.example.com:8443/mcp"}}}`, "docs.example.com:8443: not permitted by permissions.network"},
	{"command without exec", `{"env":["GITHUB_TOKEN"]}`, `{"mcpServers": {"x": {"command": "npx"}}}`, "(permissions.exec)"},
	{"undeclared variable in env", "", `{"mcpServers": {"x": {"command": "x", "env": {"A": "${AWS_SECRET_ACCESS_KEY}"}}}}`, "env A uses ${AWS_SECRET_ACCESS_KEY}, which the plugin does not declare in permissions.env"},
	{"undeclared variable in a header", "", `{"mcpServers": {"x": {"url": "https://docs.example.com/mcp", "headers": {"X-Key": "${OTHER_KEY}"}}}}`, "header X-Key uses ${OTHER_KEY}"},
	{"undeclared variable in args", "", `{"mcpServers": {"x": {"command": "x", "args": ["--token", "${OTHER_KEY}"]}}}`, "args[1] uses ${OTHER_KEY}"},
	{"undeclared variable in the url", "", `{"mcpServers": {"x": {"url": "https://docs.example.com/mcp?key=${OTHER_KEY}"}}}`, "url uses ${OTHER_KEY}"},
	{"undeclared variable in the command", "", `{"mcpServers": {"x": {"command": "${HOME}/bin/srv"}}}`, "command uses ${HOME}"},
	{"Kiln's own variable", "", `{"mcpServers": {"x": {"command": "x", "env": {"T": "${KILN_API_TOKEN}"}}}}`, "uses ${KILN_API_TOKEN}"},
}

func testRefused(t *testing.T, open Open) {
	k := kind(t)
	v := k.(plugins.Validator)
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			b := bundle{perms: c.perms, files: map[string]string{"README.md": "x"}}
			if c.body != "" {
				b.files[mcpservers.File] = c.body
			}
			o := openBundle(t, open, b)
			h := &Host{}
			att, err := k.Attach(context.Background(), o.attach(h))
			switch {
			case err == nil:
				t.Fatalf("Attach = %q; want an error saying %q", att.Items, c.reason)
			case !strings.Contains(err.Error(), c.reason) || !strings.Contains(err.Error(), mcpservers.File):
				t.Errorf("Attach: %q; want an error naming %s and saying %q", err, mcpservers.File, c.reason)
			}
			if att.Detach != nil || len(att.Items) > 0 {
				t.Errorf("a failed Attach returned %q and a Detach: it must leave nothing attached", att.Items)
			}
			if calls := h.Calls(); len(calls) != 0 {
				t.Errorf("refused definitions reached the host: %q", calls)
			}
			if verr := v.Validate(context.Background(), o.attach(nil)); verr == nil || verr.Error() != err.Error() {
				t.Errorf("Validate says %v, Attach %q: they must agree", verr, err)
			}
		})
	}
}

func testSize(t *testing.T, open Open) {
	// The largest file read: good definitions padded with spaces.
	body := good + strings.Repeat(" ", mcpservers.MaxFileSize-len(good))
	o := openBundle(t, open, bundle{files: map[string]string{mcpservers.File: body}})
	if att, err := kind(t).Attach(context.Background(), o.attach(nil)); err != nil || !slices.Equal(att.Items, goodNames) {
		t.Errorf("a file of exactly %d bytes: %q, %v; want it read", mcpservers.MaxFileSize, att.Items, err)
	}
	o = openBundle(t, open, bundle{files: map[string]string{mcpservers.File: body + " "}})
	_, err := kind(t).Attach(context.Background(), o.attach(nil))
	if err == nil || !strings.Contains(err.Error(), "mcp.json is larger than") {
		t.Errorf("a file of %d bytes: %v; want it refused as too large", mcpservers.MaxFileSize+1, err)
	}
	if verr := kind(t).(plugins.Validator).Validate(context.Background(), o.attach(nil)); verr == nil {
		t.Error("Validate accepted a file Attach refuses as too large")
	}
}

func testSymlinkOut(t *testing.T, open Open) {
	outside := t.TempDir()
	write(t, outside, mcpservers.File, good)
	dir := lay(t, bundle{files: map[string]string{"README.md": "x"}})
	if err := os.Symlink(filepath.Join(outside, mcpservers.File), filepath.Join(dir, mcpservers.File)); err != nil {
		t.Skipf("cannot make symlinks here: %v", err)
	}
	m, err := plugins.LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	o := opened{open(t, dir), m}
	att, err := kind(t).Attach(context.Background(), o.attach(nil))
	if err == nil {
		t.Errorf("Attach read %q from an mcp.json that is a symlink out of the bundle", att.Items)
	} else if !strings.Contains(err.Error(), mcpservers.File) {
		t.Errorf("Attach: %q does not name %s", err, mcpservers.File)
	}
}

func testHost(t *testing.T, open Open) {
	o := openBundle(t, open, bundle{files: map[string]string{mcpservers.File: good}})
	h := &Host{}
	att, err := kind(t).Attach(context.Background(), o.attach(h))
	if err != nil {
		t.Fatalf("Attach with a host: %v", err)
	}
	if !slices.Equal(att.Items, goodNames) {
		t.Errorf("Attach lists %q; want %q", att.Items, goodNames)
	}
	if got := h.Servers(PluginID); !reflect.DeepEqual(got, goodServers) {
		t.Errorf("the host got %+v;\nwant %+v", got, goodServers)
	}
	if att.Detach == nil {
		t.Fatal("Attach with a host returned no Detach: the servers could never be withdrawn")
	}
	att.Detach()
	if calls := h.Calls(); !slices.Equal(calls, []string{"add " + PluginID, "remove " + PluginID}) {
		t.Errorf("host calls %q; want one add then one remove of %s", calls, PluginID)
	}
	if h.Servers(PluginID) != nil {
		t.Error("the servers are still on the host after Detach")
	}
}

func testHostFails(t *testing.T, open Open) {
	o := openBundle(t, open, bundle{files: map[string]string{mcpservers.File: good}})
	h := &Host{Fail: errors.New("the MCP bridge is shutting down")}
	att, err := kind(t).Attach(context.Background(), o.attach(h))
	if err == nil || !strings.Contains(err.Error(), "the MCP bridge is shutting down") {
		t.Errorf("Attach with a failing host: %v; want the host's error", err)
	}
	if att.Detach != nil {
		t.Error("a failed Attach returned a Detach")
	}
}

func testNoHost(t *testing.T, open Open) {
	o := openBundle(t, open, bundle{files: map[string]string{mcpservers.File: good}})
	att, err := kind(t).Attach(context.Background(), o.attach(nil))
	if err != nil || !slices.Equal(att.Items, goodNames) {
		t.Errorf("Attach without a host = %q, %v; want the servers listed", att.Items, err)
	}
	if att.Detach != nil {
		att.Detach() // harmless: there is nothing to take back
	}
}

// Host is an mcpservers.Host that records what it is given. Fail, when
// set, is AddServers' error. It is safe for concurrent use.
type Host struct {
	Fail error

	mu      sync.Mutex
	calls   []string
	servers map[string][]mcpservers.Server
}

// AddServers records the servers, or returns Fail.
func (h *Host) AddServers(source string, servers []mcpservers.Server) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, "add "+source)
	if h.Fail != nil {
		return h.Fail
	}
	if h.servers == nil {
		h.servers = map[string][]mcpservers.Server{}
	}
	h.servers[source] = slices.Clone(servers)
	return nil
}

// RemoveServers forgets source's servers.
func (h *Host) RemoveServers(source string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, "remove "+source)
	delete(h.servers, source)
}

// Calls lists the calls so far: "add <source>", "remove <source>".
func (h *Host) Calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// Servers returns what source added and has not removed, or nil.
func (h *Host) Servers(source string) []mcpservers.Server {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.servers[source]
}

// Interface guards.
var _ mcpservers.Host = (*Host)(nil)
