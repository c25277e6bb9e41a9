package mcpregistry

import (
	"archive/zip"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/marketplace/claude"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/integrity"
	"github.com/kilnhq/kiln/plugins/mcp/mcpservers"
)

// Fetch downloads the file at url (an MCPB package's identifier). The
// caller closes what it returns. Convert reads at most MaxMCPBSize bytes
// of it and checks them against the package's fileSha256.
type Fetch func(ctx context.Context, url string) (io.ReadCloser, error)

// MaxMCPBSize bounds an MCPB file Convert downloads.
const MaxMCPBSize = 256 << 20

// Options tune Convert. The zero value picks what to run and names the
// bundle after the server.
type Options struct {
	// Pick is what to install: "packages[N]" or "remotes[N]". "" picks
	// the first package Kiln can run, else the first remote; the ones
	// passed over are named in Result.Skipped.
	Pick string
	// ID is the bundle's plugin id; "" is "mcp." and the server's name
	// with "/" as "." ("mcp.io.github.acme.weather").
	ID string
	// Version is the bundle's version; "" is the server's, which must
	// then be semver.
	Version string
	// Fetch downloads MCPB files; nil refuses MCPB packages.
	Fetch Fetch
}

// Result says what Convert made.
type Result struct {
	// Manifest is the bundle's kiln-plugin.json; the bundle is its folder.
	Manifest string
	ID       string
	Version  string
	// Digest is the bundle's folder digest (plugins/integrity.Tree).
	Digest string
	// Server is the MCP server's name in the bundle's mcp.json.
	Server string
	// Picked is what was installed: "packages[0]", "remotes[1]".
	Picked string
	// Skipped names each package or remote passed over, and why.
	Skipped []string
	// Warnings are inputs not passed, defaults dropped and things worth
	// checking, one line each.
	Warnings []string
}

// The registries' own addresses: a package naming another (a mirror) is
// refused, since the command Kiln writes fetches from these.
var defaultBases = map[string][]string{
	TypeNPM:   {"https://registry.npmjs.org"},
	TypePyPI:  {"https://pypi.org"},
	TypeOCI:   {"https://docker.io"},
	TypeNuGet: {"https://api.nuget.org/v3/index.json", "https://api.nuget.org"},
}

// Convert makes the new Kiln data-only bundle folder out (its parent is
// created; out must not exist or be empty) of an "mcp-servers" bundle
// with one MCP server: the package or remote of s that opts.Pick names.
//
// A package runs on this machine through its runtime, at its exact
// version: npm as "npx -y <identifier>@<version>", PyPI as "uvx
// <identifier>==<version>", OCI as "docker run -i --rm <image>:<version>"
// (the image's variables passed with -e), NuGet as "dnx
// <identifier>@<version> --yes"; its runtime and package arguments and
// environment variables follow. A package without a version, at
// "latest", or at a range is refused (claude.CheckPinned words why), as
// is one from another registry than the public one its runtime fetches
// from, one whose transport is not stdio (a local HTTP server Kiln could
// start but not reach), or a registry type Kiln cannot run. An MCPB
// package needs fileSha256: the file is downloaded with opts.Fetch and
// refused unless its sha256 matches; a bundle whose command runs a
// program inside it (${__dirname}) is refused, since a Kiln bundle's
// servers run programs from the host or a URL.
//
// A remote becomes an HTTP (streamable-http) or SSE server at its URL;
// a URL whose host is a {variable} is refused (consent names the host).
//
// An input with a value is written as it is; one without takes its
// default, unless it is secret (a warning says so: the bundle's bytes are
// fixed, so nothing asks for another value later); a required or secret
// input without either becomes ${NAME}, the variable NAME (in capitals)
// the user sets, and the bundle asks permission to read it. An optional
// input without a value or default is left out, with a warning. The
// {variables} of a value are treated the same way.
//
// Errors are EINVALID with the reason (ECONFLICT when out is taken);
// nothing is left at out on failure.
func Convert(ctx context.Context, s *Server, out string, opts Options) (Result, error) {
	res, err := convert(ctx, s, out, opts)
	if err != nil {
		var ce *core.Error
		if !errors.As(err, &ce) {
			err = core.Errorf(core.EINVALID, "mcp server %s: %v", s.Name, err)
		}
		return Result{}, err
	}
	return res, nil
}

// conversion is one Convert under way.
type conversion struct {
	ctx  context.Context
	s    *Server
	opts Options
	res  *Result
	env  map[string]bool // the variables the server reads
}

func convert(ctx context.Context, s *Server, out string, opts Options) (Result, error) {
	if err := s.check(); err != nil {
		return Result{}, err
	}
	res := Result{ID: opts.ID, Version: cmp.Or(opts.Version, s.Version)}
	if res.ID == "" {
		res.ID = "mcp." + strings.NewReplacer("/", ".", "_", "-").Replace(strings.ToLower(s.Name))
	}
	if len(res.ID) > 64 {
		return Result{}, core.Errorf(core.EINVALID, "mcp server %s: its bundle id %q would be longer than 64 characters; give the bundle an id", s.Name, res.ID)
	}
	if !reSemver.MatchString(res.Version) {
		return Result{}, core.Errorf(core.EINVALID, "mcp server %s: version %q is not semver (MAJOR.MINOR.PATCH), which Kiln needs; give the bundle a version", s.Name, res.Version)
	}
	name := s.Name[strings.IndexByte(s.Name, '/')+1:]
	res.Server = strings.Trim(reNotServer.ReplaceAllString(strings.ToLower(name), "-"), "-_")
	if len(res.Server) > 64 {
		res.Server = res.Server[:64]
	}
	c := &conversion{ctx: ctx, s: s, opts: opts, res: &res, env: map[string]bool{}}
	srv, perms, err := c.pick()
	if err != nil {
		return Result{}, err
	}
	srv.Name = res.Server
	return write(s, out, srv, perms, &res)
}

var (
	reNotServer = regexp.MustCompile(`[^a-z0-9_-]+`)
	reSemver    = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*)?(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$`)
	rePick      = regexp.MustCompile(`^(packages|remotes)\[(0|[1-9][0-9]*)\]$`)
)

// pick converts what opts.Pick names, or the first that converts.
func (c *conversion) pick() (mcpservers.Server, plugins.Permissions, error) {
	try := func(kind string, i int) (mcpservers.Server, plugins.Permissions, error) {
		c.res.Picked = fmt.Sprintf("%s[%d]", kind, i)
		c.env = map[string]bool{}
		if kind == "packages" {
			return c.pkg(c.s.Packages[i], c.res.Picked)
		}
		return c.remote(c.s.Remotes[i], c.res.Picked)
	}
	if c.opts.Pick != "" {
		m := rePick.FindStringSubmatch(c.opts.Pick)
		if m == nil {
			return mcpservers.Server{}, plugins.Permissions{}, core.Errorf(core.EINVALID, "pick %q: want packages[N] or remotes[N]", c.opts.Pick)
		}
		i, _ := strconv.Atoi(m[2])
		if m[1] == "packages" && i >= len(c.s.Packages) || m[1] == "remotes" && i >= len(c.s.Remotes) {
			return mcpservers.Server{}, plugins.Permissions{}, core.Errorf(core.EINVALID, "mcp server %s has no %s (%d packages, %d remotes)", c.s.Name, c.opts.Pick, len(c.s.Packages), len(c.s.Remotes))
		}
		return try(m[1], i)
	}
	if len(c.s.Packages)+len(c.s.Remotes) == 0 {
		return mcpservers.Server{}, plugins.Permissions{}, core.Errorf(core.EINVALID, "mcp server %s has no packages and no remotes: nothing to install", c.s.Name)
	}
	var errs []string
	for _, kind := range []string{"packages", "remotes"} {
		n := len(c.s.Packages)
		if kind == "remotes" {
			n = len(c.s.Remotes)
		}
		for i := range n {
			warned := len(c.res.Warnings)
			srv, perms, err := try(kind, i)
			if err != nil {
				c.res.Warnings = c.res.Warnings[:warned] // of what is not installed
			}
			if err == nil {
				c.res.Skipped = append(c.res.Skipped, errs...)
				return srv, perms, nil
			}
			if c.ctx.Err() != nil {
				return srv, perms, c.ctx.Err()
			}
			errs = append(errs, core.ErrorMessage(err))
		}
	}
	return mcpservers.Server{}, plugins.Permissions{}, core.Errorf(core.EINVALID, "mcp server %s: nothing Kiln can install: %s", c.s.Name, strings.Join(errs, "; "))
}

// pkg converts package p, at at.
func (c *conversion) pkg(p Package, at string) (mcpservers.Server, plugins.Permissions, error) {
	fail := func(format string, args ...any) (mcpservers.Server, plugins.Permissions, error) {
		return mcpservers.Server{}, plugins.Permissions{}, core.Errorf(core.EINVALID, "%s (%s %s): %s", at, p.RegistryType, p.Identifier, fmt.Sprintf(format, args...))
	}
	if p.Transport.Type != TransportStdio {
		return fail("the package serves %s at %s, a local HTTP server Kiln's mcp-servers bundle could start but not reach; pick a stdio package or a remote", p.Transport.Type, p.Transport.URL)
	}
	if bases, ok := defaultBases[p.RegistryType]; ok && p.RegistryBaseURL != "" && !slices.Contains(bases, strings.TrimSuffix(p.RegistryBaseURL, "/")) {
		return fail("it comes from %s, and Kiln runs %s packages from %s only", p.RegistryBaseURL, p.RegistryType, bases[0])
	}
	want := map[string]string{TypeNPM: "npx", TypePyPI: "uvx", TypeOCI: "docker", TypeNuGet: "dnx"}[p.RegistryType]
	if p.RuntimeHint != "" && p.RegistryType != TypeMCPB && p.RuntimeHint != want {
		return fail("its runtime hint %q is not %q, the runtime Kiln runs %s packages with", p.RuntimeHint, want, p.RegistryType)
	}
	var s mcpservers.Server
	env, err := c.envVars(p.EnvironmentVariables, at)
	if err != nil {
		return fail("%v", err)
	}
	rtArgs, err := c.args(p.RuntimeArguments, at+".runtimeArguments")
	if err != nil {
		return fail("%v", err)
	}
	pkgArgs, err := c.args(p.PackageArguments, at+".packageArguments")
	if err != nil {
		return fail("%v", err)
	}
	s.Env = env
	switch p.RegistryType {
	case TypeNPM:
		s.Command = "npx"
		s.Args = append(append(append([]string{"-y"}, rtArgs...), at2(p.Identifier, "@", p.Version)), pkgArgs...)
	case TypePyPI:
		s.Command = "uvx"
		s.Args = append(append(rtArgs, at2(p.Identifier, "==", p.Version)), pkgArgs...)
	case TypeOCI:
		image, err := ociImage(p)
		if err != nil {
			return fail("%v", err)
		}
		s.Command = "docker"
		s.Args = []string{"run", "-i", "--rm"}
		for _, k := range slices.Sorted(maps.Keys(env)) {
			s.Args = append(s.Args, "-e", k)
		}
		s.Args = append(append(append(s.Args, rtArgs...), image), pkgArgs...)
	case TypeNuGet:
		s.Command = "dnx"
		s.Args = append(append(rtArgs, at2(p.Identifier, "@", p.Version), "--yes"), pkgArgs...)
		if len(pkgArgs) > 0 {
			s.Args = slices.Insert(s.Args, len(s.Args)-len(pkgArgs), "--")
		}
	case TypeMCPB:
		if s, err = c.mcpb(p, s); err != nil {
			return fail("%v", err)
		}
		s.Args = append(s.Args, pkgArgs...)
	default:
		return fail("Kiln cannot run %q packages (it runs npm, pypi, oci, nuget and mcpb)", p.RegistryType)
	}
	s.Type = mcpservers.TypeStdio
	warns, err := claude.CheckPinned(s)
	if err != nil {
		return fail("%v", err)
	}
	for _, w := range warns {
		c.res.Warnings = append(c.res.Warnings, at+": "+w)
	}
	return s, plugins.Permissions{Exec: true, Env: slices.Sorted(maps.Keys(c.env))}, nil
}

// at2 joins a package and its version with sep, or is the package alone.
func at2(pkg, sep, version string) string {
	if version == "" {
		return pkg
	}
	return pkg + sep + version
}

// ociImage is the image reference of an OCI package: its identifier at
// its version, or the identifier alone when it holds a tag or digest.
func ociImage(p Package) (string, error) {
	ref := p.Identifier[strings.LastIndexByte(p.Identifier, '/')+1:]
	if strings.Contains(ref, "@") || strings.Contains(ref, ":") {
		if p.Version != "" && !strings.HasSuffix(p.Identifier, ":"+p.Version) && !strings.Contains(ref, "@") {
			return "", fmt.Errorf("its identifier names a tag and its version %q another", p.Version)
		}
		return p.Identifier, nil
	}
	return at2(p.Identifier, ":", p.Version), nil
}

// remote converts remote r, at at.
func (c *conversion) remote(r Remote, at string) (mcpservers.Server, plugins.Permissions, error) {
	fail := func(format string, args ...any) (mcpservers.Server, plugins.Permissions, error) {
		return mcpservers.Server{}, plugins.Permissions{}, core.Errorf(core.EINVALID, "%s (%s %s): %s", at, r.Type, r.URL, fmt.Sprintf(format, args...))
	}
	u, err := c.template(r.URL, r.Variables, at+".url")
	if err != nil {
		return fail("%v", err)
	}
	pu, err := url.Parse(u)
	if err != nil || pu.Host == "" || strings.ContainsAny(pu.Host, "${}") {
		return fail("its host is not fixed (it comes from a variable), and the bundle must name the host it may reach")
	}
	s := mcpservers.Server{Type: mcpservers.TypeHTTP, URL: u}
	if r.Type == TransportSSE {
		s.Type = mcpservers.TypeSSE
	}
	if s.Headers, err = c.keyValues(r.Headers, at+".headers", r.Variables); err != nil {
		return fail("%v", err)
	}
	return s, plugins.Permissions{Network: []string{strings.ToLower(pu.Host)}, Env: slices.Sorted(maps.Keys(c.env))}, nil
}

// envVars converts a package's environment variables.
func (c *conversion) envVars(kvs []KeyValue, at string) (map[string]string, error) {
	return c.keyValues(kvs, at+".environmentVariables", nil)
}

// keyValues converts environment variables or headers; vars are the
// remote's variables (nil for a package's).
func (c *conversion) keyValues(kvs []KeyValue, at string, vars map[string]Input) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for i, kv := range kvs {
		v, ok, err := c.input(kv.Input, kv.Name, fmt.Sprintf("%s[%d] (%s)", at, i, kv.Name), vars)
		if err != nil {
			return nil, err
		}
		if ok {
			out[kv.Name] = v
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// args converts a list of arguments.
func (c *conversion) args(list []Argument, at string) ([]string, error) {
	var out []string
	for i, a := range list {
		where := fmt.Sprintf("%s[%d]", at, i)
		if a.Type == "named" {
			v, ok, err := c.input(a.Input, strings.TrimLeft(a.Name, "-"), where+" ("+a.Name+")", nil)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			out = append(out, a.Name)
			if v != "" {
				out = append(out, v)
			}
			continue
		}
		v, ok, err := c.input(a.Input, a.ValueHint, where+" ("+cmp.Or(a.ValueHint, "positional")+")", nil)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, v)
		}
	}
	return out, nil
}

// input is the value of one input named name (for the variable it is
// read from when the user sets it); false when it is left out.
func (c *conversion) input(in Input, name, at string, outer map[string]Input) (string, bool, error) {
	if in.Value != "" {
		vars := in.Variables
		if vars == nil {
			vars = outer
		}
		v, err := c.template(in.Value, vars, at)
		return v, err == nil, err
	}
	if in.Default != "" && !in.IsSecret {
		c.res.Warnings = append(c.res.Warnings, fmt.Sprintf("%s: its default %q is written into the bundle", at, in.Default))
		return in.Default, true, nil
	}
	if in.IsRequired || in.IsSecret {
		ref, err := c.ref(name, at)
		return ref, err == nil, err
	}
	c.res.Warnings = append(c.res.Warnings, fmt.Sprintf("%s: optional and not passed", at))
	return "", false, nil
}

var (
	reBrace   = regexp.MustCompile(`\{([a-zA-Z_][a-zA-Z0-9_]*)\}`)
	reNotEnv  = regexp.MustCompile(`[^A-Z0-9_]+`)
	reEnvName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
)

// template replaces the {name}s of s that vars define: by the variable's
// value when it has one, else by a Kiln variable reference.
func (c *conversion) template(s string, vars map[string]Input, at string) (string, error) {
	var err error
	out := reBrace.ReplaceAllStringFunc(s, func(m string) string {
		name := m[1 : len(m)-1]
		v, ok := vars[name]
		if !ok {
			return m // the schema: an unknown {name} stays as it is
		}
		if v.Value != "" {
			return v.Value
		}
		if v.Default != "" && !v.IsSecret {
			c.res.Warnings = append(c.res.Warnings, fmt.Sprintf("%s {%s}: its default %q is written into the bundle", at, name, v.Default))
			return v.Default
		}
		ref, e := c.ref(name, fmt.Sprintf("%s {%s}", at, name))
		if e != nil && err == nil {
			err = e
		}
		return ref
	})
	return out, err
}

// ref is the Kiln variable reference the user sets an input through:
// ${NAME}, the input's name in capitals.
func (c *conversion) ref(name, at string) (string, error) {
	v := strings.Trim(reNotEnv.ReplaceAllString(strings.ToUpper(name), "_"), "_")
	switch {
	case !reEnvName.MatchString(v):
		return "", fmt.Errorf("%s: %q cannot be made a variable name", at, name)
	case strings.HasPrefix(v, "KILN_"):
		return "", fmt.Errorf("%s: variables named KILN_* are Kiln's own and never passed to a plugin", at)
	}
	c.env[v] = true
	return "${" + v + "}", nil
}

// mcpb downloads and checks an MCPB package and converts the command its
// manifest runs.
func (c *conversion) mcpb(p Package, s mcpservers.Server) (mcpservers.Server, error) {
	if p.FileSHA256 == "" {
		return s, errors.New("an MCPB package names no fileSha256, and an MCPB file is installed only when its sha256 is known")
	}
	if c.opts.Fetch == nil {
		return s, errors.New("no downloader was given for MCPB files")
	}
	rc, err := c.opts.Fetch(c.ctx, p.Identifier)
	if err != nil {
		return s, fmt.Errorf("download: %v", err)
	}
	defer rc.Close()
	f, err := os.CreateTemp("", "kiln-mcpb-")
	if err != nil {
		return s, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(rc, MaxMCPBSize+1))
	if err != nil {
		return s, fmt.Errorf("download: %v", err)
	}
	if n > MaxMCPBSize {
		return s, fmt.Errorf("the file is larger than %d MiB", MaxMCPBSize>>20)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != p.FileSHA256 {
		return s, fmt.Errorf("the downloaded file's sha256 is %s, not the %s server.json names: refused", got, p.FileSHA256)
	}
	zr, err := zip.NewReader(f, n)
	if err != nil {
		return s, errors.New("the file is not an MCPB bundle (a zip archive)")
	}
	cfg, userConfig, err := mcpbConfig(zr)
	if err != nil {
		return s, err
	}
	rewrite := func(v string) (string, error) {
		if strings.Contains(v, "${__dirname}") {
			return "", errors.New("its command runs a program inside the bundle (${__dirname}), and a Kiln bundle's servers run programs from the host (its PATH) or a URL, not from the bundle")
		}
		var err error
		out := reMCPBVar.ReplaceAllStringFunc(v, func(m string) string {
			name := m[2 : len(m)-1]
			if key, ok := strings.CutPrefix(name, "user_config."); ok {
				if _, known := userConfig[key]; !known && err == nil {
					err = fmt.Errorf("its command uses ${%s}, which its user_config does not define", name)
				}
				name = key
			}
			ref, e := c.ref(name, "manifest.json")
			if e != nil && err == nil {
				err = e
			}
			return ref
		})
		return out, err
	}
	if s.Command, err = rewrite(cfg.Command); err != nil {
		return s, err
	}
	if s.Command == "" {
		return s, errors.New("its manifest.json names no command (server.mcp_config.command)")
	}
	for _, a := range cfg.Args {
		v, err := rewrite(a)
		if err != nil {
			return s, err
		}
		s.Args = append(s.Args, v)
	}
	for _, k := range slices.Sorted(maps.Keys(cfg.Env)) {
		v, err := rewrite(cfg.Env[k])
		if err != nil {
			return s, err
		}
		if s.Env == nil {
			s.Env = map[string]string{}
		}
		s.Env[k] = v
	}
	return s, nil
}

var reMCPBVar = regexp.MustCompile(`\$\{([^}]*)\}`)

// mcpbCommand is what an MCPB manifest's server.mcp_config runs.
type mcpbCommand struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

// mcpbConfig reads the server.mcp_config and the user_config names of an
// MCPB bundle's manifest.json.
func mcpbConfig(zr *zip.Reader) (mcpbCommand, map[string]json.RawMessage, error) {
	var doc struct {
		Server struct {
			MCPConfig mcpbCommand `json:"mcp_config"`
		} `json:"server"`
		UserConfig map[string]json.RawMessage `json:"user_config"`
	}
	f, err := zr.Open("manifest.json")
	if err != nil {
		return mcpbCommand{}, nil, errors.New("the MCPB bundle has no manifest.json")
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxServerSize+1))
	if err != nil || len(data) > MaxServerSize {
		return mcpbCommand{}, nil, errors.New("the MCPB bundle's manifest.json cannot be read or is too large")
	}
	if err := plugins.StrictJSON(data); err != nil {
		return mcpbCommand{}, nil, fmt.Errorf("the MCPB bundle's manifest.json: %v", err)
	}
	if err := decode(data, &doc); err != nil {
		return mcpbCommand{}, nil, fmt.Errorf("the MCPB bundle's manifest.json: %v", err)
	}
	return doc.Server.MCPConfig, doc.UserConfig, nil
}

// write makes the bundle folder out of the one server srv.
func write(s *Server, out string, srv mcpservers.Server, perms plugins.Permissions, res *Result) (Result, error) {
	data, err := json.MarshalIndent(map[string]any{"mcpServers": map[string]mcpservers.Server{srv.Name: srv}}, "", "  ")
	if err != nil {
		return Result{}, err
	}
	if _, err := mcpservers.Parse(data, &perms); err != nil {
		return Result{}, core.Errorf(core.EINVALID, "mcp server %s: %s: the server Kiln would define is refused: %v", s.Name, res.Picked, err)
	}
	m := plugins.Manifest{APIVersion: plugins.APIVersion, ID: res.ID, Version: res.Version,
		Description: description(s), Provides: []plugins.Capability{mcpservers.Name}, Permissions: perms}
	man, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Result{}, err
	}
	if _, err := plugins.ParseManifest(man); err != nil {
		return Result{}, core.Errorf(core.EINVALID, "mcp server %s: the bundle's manifest would be invalid (give it another id?): %v", s.Name, err)
	}
	parent := filepath.Dir(out)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return Result{}, err
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
	if err := os.WriteFile(filepath.Join(tmp, plugins.ManifestFile), append(man, '\n'), 0o644); err != nil {
		return Result{}, err
	}
	if err := os.WriteFile(filepath.Join(tmp, mcpservers.File), append(data, '\n'), 0o644); err != nil {
		return Result{}, err
	}
	lm, err := plugins.LoadManifest(tmp)
	if err != nil {
		return Result{}, err
	}
	if _, err := mcpservers.Read(os.DirFS(tmp), lm.Permissions); err != nil {
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
		return Result{}, err
	}
	done = true
	res.Manifest = filepath.Join(out, plugins.ManifestFile)
	return *res, nil
}

// description is the bundle's description: the server's title and
// description on one line.
func description(s *Server) string {
	d := s.Description
	if s.Title != "" {
		d = s.Title + ": " + d
	}
	d = strings.Join(strings.FieldsFunc(d, func(r rune) bool {
		return r < ' ' || r == 0x7f || r >= 0x80 && r <= 0x9f || r >= 0x200e && r <= 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == ' ' || r == '\t'
	}), " ")
	return cmp.Or(d, "MCP server "+s.Name+".")
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
