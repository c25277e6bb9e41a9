package plugins

import (
	"errors"
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits and defaults of the resource permissions.
const (
	DefaultMemoryMiB = 64     // memory_mib of a wasm plugin that does not set it
	MaxMemoryMiB     = 4096   // largest memory_mib: all a wasm32 module addresses (wasmrt.MaxMemoryMiB)
	DefaultTimeoutMS = 30000  // timeout_ms of a plugin that does not set it
	MaxTimeoutMS     = 600000 // largest timeout_ms (10 minutes)
)

// Permissions is what a plugin may do, as declared in its manifest and
// consented to at install. It is data: the host asks it (AllowsHost,
// AllowsResolvedAddr, FilesystemAccess, AllowsEnv) before doing anything on
// a plugin's behalf, and the zero value grants nothing — no network, no
// files, no environment, no programs, no memory and no time. ParseManifest
// fills in DefaultMemoryMiB (wasm only) and DefaultTimeoutMS, so a parsed
// manifest always carries explicit limits.
//
// Methods never fail: an entry that is not valid (possible only in a value
// built in Go rather than parsed) grants nothing.
type Permissions struct {
	// Network lists host[:port] patterns the plugin may connect to:
	// "api.example.com", "api.example.com:8443", "*.example.com" (any
	// subdomain, at any depth, but not example.com itself), "10.0.0.5:5432",
	// "[::1]:8080". A pattern without a port allows ports 80 and 443 only.
	Network []string `json:"network,omitempty"`
	// Filesystem lists paths the plugin may read or write; see FilesystemGrant.
	Filesystem []FilesystemGrant `json:"filesystem,omitempty"`
	// Env lists environment variable names the plugin may read.
	Env []string `json:"env,omitempty"`
	// Exec allows running other programs (runtime "process" and data-only
	// bundles only).
	Exec bool `json:"exec,omitempty"`
	// MemoryMiB caps a wasm plugin's linear memory, in MiB (wasm only).
	MemoryMiB int `json:"memory_mib,omitempty"`
	// TimeoutMS is the deadline of every call into the plugin, in milliseconds.
	TimeoutMS int `json:"timeout_ms,omitempty"`
}

// FilesystemGrant is one filesystem permission. Path is in one of two
// namespaces, never a host path:
//
//	grant:<name>[/sub/path]  inside the user's folder grant named <name>
//	                         (Permissions.Grants lists the names); the host
//	                         also needs that grant, writable for a write,
//	                         at each access (GrantResolver)
//	data:/[sub/path]         inside the plugin's own data folder
//
// A grant covers Path and everything beneath it. Paths are clean: no "."
// or ".." segments, no empty segments, no trailing slash (except "data:/"),
// no backslashes and no control characters. At least one of Read and Write
// is true.
type FilesystemGrant struct {
	Path  string `json:"path"`
	Read  bool   `json:"read,omitempty"`
	Write bool   `json:"write,omitempty"`
}

// The regular expressions below are copied verbatim into
// specs/kiln-plugin.schema.json; TestSchemaPatterns keeps them equal. They
// use only syntax that RE2 and ECMA-262 read alike.
const (
	reLabel = `[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?`
	reLast  = `[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?` // a TLD never starts with a digit, so "1.2.3" is no name
	reOctet = `(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])`
	rePort  = `(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})`
	reSeg   = `[^/\\\x00-\x1f\x7f-\x9f]+`

	// patternHostname is a host name without a wildcard or port.
	patternHostname = `^(?:` + reLabel + `\.)*` + reLast + `$`
	// patternNetwork is a network permission. The schema is coarser than
	// Go for IPv6: Go also wants the canonical form (netip.Addr.String).
	patternNetwork = `^(?:\*\.(?:` + reLabel + `\.)+` + reLast +
		`|(?:` + reLabel + `\.)*` + reLast +
		`|` + reOctet + `(?:\.` + reOctet + `){3}` +
		`|\[[0-9a-f:]{2,39}\])(?::` + rePort + `)?$`
	// patternUnspecified matches patterns naming 0.0.0.0/8 or [::], which
	// reach the local machine on some systems.
	patternUnspecified = `^(?:0\.[0-9.]+|\[::\])(?::[0-9]+)?$`
	// patternFSPath is a filesystem permission path.
	patternFSPath = `^(?:grant:[a-z][a-z0-9_-]{0,63}(?:/` + reSeg + `)*|data:/(?:` + reSeg + `(?:/` + reSeg + `)*)?)$`
	// patternDotSegment finds "." and ".." segments in entry and filesystem paths.
	patternDotSegment = `(?:^|/)\.\.?(?:/|$)`
	// patternEnv is an environment variable name.
	patternEnv = `^[A-Z_][A-Z0-9_]*$`
	// patternKilnEnv matches the variables that configure Kiln itself.
	patternKilnEnv = `^KILN_`
)

const (
	maxNetworkLen = 253
	maxPathLen    = 1024
)

var (
	reHostname    = regexp.MustCompile(patternHostname)
	reNetwork     = regexp.MustCompile(patternNetwork)
	reUnspecified = regexp.MustCompile(patternUnspecified)
	reFSPath      = regexp.MustCompile(patternFSPath)
	reDotSegment  = regexp.MustCompile(patternDotSegment)
	reEnv         = regexp.MustCompile(patternEnv)
	reKilnEnv     = regexp.MustCompile(patternKilnEnv)
	reGrantName   = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
)

// netPattern is a parsed network permission.
type netPattern struct {
	host     string     // lowercase name without "*.", or "" for an IP
	wildcard bool       // "*." + host: subdomains of host only
	ip       netip.Addr // valid for an IP literal
	port     int        // 0: ports 80 and 443
}

// parseNetwork parses a network permission. On failure it returns the
// reason, which names s.
func parseNetwork(s string) (netPattern, string) {
	switch {
	case s == "":
		return netPattern{}, "must not be empty"
	case len(s) > maxNetworkLen:
		return netPattern{}, fmt.Sprintf("is %d characters long (max %d)", len(s), maxNetworkLen)
	case strings.Contains(s, "://"):
		return netPattern{}, fmt.Sprintf("%q must be host[:port] without a scheme", s)
	case strings.ContainsAny(s, "/?#"):
		return netPattern{}, fmt.Sprintf("%q must be host[:port] without a path", s)
	case strings.ToLower(s) != s:
		return netPattern{}, fmt.Sprintf("%q must be lowercase", s)
	case strings.Count(s, "*") > 1 || strings.Contains(s, "*") && !strings.HasPrefix(s, "*."):
		return netPattern{}, fmt.Sprintf(`%q: a wildcard is allowed only as a leading "*."`, s)
	}
	var p netPattern
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netPattern{}, fmt.Sprintf("%q: missing \"]\" after the IPv6 address", s)
		}
		host, port = s[1:end], s[end+1:]
		if port != "" && !strings.HasPrefix(port, ":") {
			return netPattern{}, fmt.Sprintf("%q must be host[:port]", s)
		}
		port = strings.TrimPrefix(port, ":")
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return netPattern{}, fmt.Sprintf("%q: %q is not an IPv6 address", s, host)
		}
		if a.Is4In6() {
			return netPattern{}, fmt.Sprintf("%q: write the IPv4 address %s without brackets", s, a.Unmap())
		}
		if a.String() != host {
			return netPattern{}, fmt.Sprintf("%q: write the IPv6 address in canonical form [%s]", s, a)
		}
		p.ip = a
	} else {
		if i := strings.LastIndexByte(s, ':'); i >= 0 {
			host, port = s[:i], s[i+1:]
		}
		if strings.Contains(host, ":") {
			return netPattern{}, fmt.Sprintf("%q: write an IPv6 address in brackets, e.g. \"[::1]:8080\"", s)
		}
		if a, err := netip.ParseAddr(host); err == nil {
			p.ip = a
		} else {
			p.wildcard = strings.HasPrefix(host, "*.")
			p.host = strings.TrimPrefix(host, "*.")
		}
	}
	if port != "" || strings.HasSuffix(s, ":") {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return netPattern{}, fmt.Sprintf("%q: port must be a number from 1 to 65535", s)
		}
		p.port = n
	}
	if p.ip.IsValid() && (p.ip.IsUnspecified() || p.ip.Is4() && p.ip.As4()[0] == 0) {
		return netPattern{}, fmt.Sprintf("%q: addresses in 0.0.0.0/8 and [::] are not allowed", s)
	}
	if p.wildcard && !strings.Contains(p.host, ".") {
		return netPattern{}, fmt.Sprintf(`%q: a wildcard needs at least two labels after "*." (e.g. "*.example.com")`, s)
	}
	if !reNetwork.MatchString(s) || reUnspecified.MatchString(s) {
		return netPattern{}, fmt.Sprintf("%q is not a valid host name, IP address or \"*.\" pattern", s)
	}
	return p, ""
}

// CheckNetwork returns an error saying why s is not a valid entry of
// Permissions.Network (the syntax its doc comment gives), or nil. Other
// allowlists in the same syntax (a sandbox's networkPolicy) check their
// entries with it.
func CheckNetwork(s string) error {
	if _, reason := parseNetwork(s); reason != "" {
		return errors.New(reason)
	}
	return nil
}

// allowsPort reports whether a pattern's port admits port.
func (p netPattern) allowsPort(port int) bool {
	if p.port == 0 {
		return port == 80 || port == 443
	}
	return p.port == port
}

// canonicalHost normalizes a host to check against the patterns: ASCII
// only, lowercased, one trailing dot removed from a name, brackets removed
// from an IPv6 literal, IPv4-mapped IPv6 unmapped. ok is false for
// anything that is neither a valid host name nor an IP address without a
// zone.
func canonicalHost(host string) (name string, ip netip.Addr, ok bool) {
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			return "", netip.Addr{}, false // IDNA is not supported; send A-labels (xn--)
		}
	}
	host = strings.ToLower(host)
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return "", netip.Addr{}, false
		}
		return "", a.Unmap(), true
	}
	host = strings.TrimSuffix(host, ".")
	if len(host) > maxNetworkLen || !reHostname.MatchString(host) {
		return "", netip.Addr{}, false
	}
	return host, netip.Addr{}, true
}

// AllowsHost reports whether the plugin may connect to host on port. host
// is a name or an IP address as given to the dialer (an IPv6 address with
// or without brackets); the check is case-insensitive and ignores one
// trailing dot. Non-ASCII names are refused (send the xn-- form).
//
// A name pattern matches that name exactly; "*.example.com" matches every
// subdomain of example.com but not example.com. A name pattern never
// matches an IP address, and an IP pattern only that address. A pattern
// without a port allows ports 80 and 443 only; one with a port allows
// that port only.
//
// AllowsHost checks the name. A host that dials a name must also check
// every address the name resolves to with AllowsResolvedAddr.
func (p Permissions) AllowsHost(host string, port int) bool {
	if port < 1 || port > 65535 {
		return false
	}
	name, ip, ok := canonicalHost(host)
	if !ok {
		return false
	}
	for _, s := range p.Network {
		pat, bad := parseNetwork(s)
		if bad != "" || !pat.allowsPort(port) {
			continue
		}
		switch {
		case ip.IsValid():
			if pat.ip.IsValid() && pat.ip.Unmap() == ip {
				return true
			}
		case pat.ip.IsValid():
		case pat.wildcard:
			if strings.HasSuffix(name, "."+pat.host) {
				return true
			}
		case name == pat.host:
			return true
		}
	}
	return false
}

// nonPublic lists ranges, beyond those the netip predicates name, that do
// not reach the public internet (RFC 6890 and friends).
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"), // NAT64 can reach private IPv4
	netip.MustParsePrefix("64:ff9b:1::/48"),
}

// isPublic reports whether a reaches the public internet.
func isPublic(a netip.Addr) bool {
	if !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() {
		return false
	}
	for _, pre := range nonPublic {
		if pre.Contains(a) {
			return false
		}
	}
	return true
}

// AllowsResolvedAddr reports whether the plugin may connect to addr on
// port after a name that AllowsHost allowed resolved to addr. It is the
// guard against a permitted name pointing into the local network (DNS
// rebinding): a public address is allowed; a loopback, private, link-local
// or otherwise non-public one only when the manifest lists that exact
// address with a matching port. It grants nothing by itself — call
// AllowsHost first.
func (p Permissions) AllowsResolvedAddr(addr netip.Addr, port int) bool {
	if !addr.IsValid() || addr.Zone() != "" || port < 1 || port > 65535 {
		return false
	}
	addr = addr.Unmap()
	if isPublic(addr) {
		return true
	}
	for _, s := range p.Network {
		if pat, bad := parseNetwork(s); bad == "" && pat.ip.IsValid() && pat.ip.Unmap() == addr && pat.allowsPort(port) {
			return true
		}
	}
	return false
}

// checkFSPath returns why s is not a valid filesystem permission path, or "".
func checkFSPath(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case utf8.RuneCountInString(s) > maxPathLen:
		return fmt.Sprintf("is %d characters long (max %d)", utf8.RuneCountInString(s), maxPathLen)
	case strings.ContainsRune(s, '\\'):
		return fmt.Sprintf("%q must use forward slashes", s)
	case strings.ContainsFunc(s, isControl):
		return fmt.Sprintf("%q contains control characters", s)
	case strings.HasPrefix(s, "/") || !strings.HasPrefix(s, "grant:") && !strings.HasPrefix(s, "data:"):
		return fmt.Sprintf(`%q must start with "grant:<name>" or "data:/"`, s)
	case reDotSegment.MatchString(s):
		return fmt.Sprintf(`%q must not contain "." or ".." segments`, s)
	}
	if name, ok := strings.CutPrefix(s, "grant:"); ok {
		name, rest, _ := strings.Cut(name, "/")
		if !reGrantName.MatchString(name) {
			return fmt.Sprintf("%q: grant name %q must be 1-64 lowercase letters, digits, \"_\" and \"-\", starting with a letter", s, name)
		}
		if rest != "" && path.Clean("/"+rest) != "/"+rest || strings.HasSuffix(s, "/") {
			return fmt.Sprintf("%q is not clean (no empty segments or trailing slash)", s)
		}
	} else {
		rest, _ := strings.CutPrefix(s, "data:")
		if !strings.HasPrefix(rest, "/") {
			return fmt.Sprintf(`%q: write the data folder as "data:/" followed by a relative path`, s)
		}
		if rest != "/" && path.Clean(rest) != rest {
			return fmt.Sprintf("%q is not clean (no empty segments or trailing slash)", s)
		}
	}
	if !reFSPath.MatchString(s) {
		return fmt.Sprintf("%q is not a valid grant: or data:/ path", s) // unreachable unless the checks above drift
	}
	return ""
}

// isControl reports C0 and C1 control characters.
func isControl(r rune) bool { return r < 0x20 || r >= 0x7f && r <= 0x9f }

// FilesystemAccess reports whether the plugin may read and whether it may
// write at p, a clean path in the notation of FilesystemGrant
// ("grant:notes/2024/todo.md", "data:/cache/x"). Grants add up: p is
// readable if any grant covering it allows reading, writable likewise. A
// path that is not clean (".." segments, a trailing slash, backslashes,
// ...) gets no access at all; the host resolves a plugin's request to a
// clean path, and refuses symlinks out of the grant, before asking.
func (p Permissions) FilesystemAccess(target string) (read, write bool) {
	if checkFSPath(target) != "" {
		return false, false
	}
	for _, g := range p.Filesystem {
		if checkFSPath(g.Path) != "" || !covers(g.Path, target) {
			continue
		}
		read = read || g.Read
		write = write || g.Write
	}
	return read, write
}

// covers reports whether the grant path g covers the path p.
func covers(g, p string) bool {
	if g == p {
		return true
	}
	if !strings.HasSuffix(g, "/") { // "data:/" already ends in one
		g += "/"
	}
	return strings.HasPrefix(p, g)
}

// Grants returns the folder grant names the filesystem permissions refer
// to, sorted and without duplicates: the user's folder grants the plugin
// may reach, as far as the user has them. It is nil when there are none.
func (p Permissions) Grants() []string {
	var names []string
	for _, g := range p.Filesystem {
		if checkFSPath(g.Path) != "" {
			continue
		}
		if rest, ok := strings.CutPrefix(g.Path, "grant:"); ok {
			name, _, _ := strings.Cut(rest, "/")
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// checkEnv returns why name is not a grantable environment variable, or "".
func checkEnv(name string) string {
	switch {
	case !reEnv.MatchString(name):
		return fmt.Sprintf("%q must match [A-Z_][A-Z0-9_]*", name)
	case reKilnEnv.MatchString(name):
		return fmt.Sprintf("%q: variables starting with KILN_ configure Kiln itself and cannot be granted", name)
	}
	return ""
}

// AllowsEnv reports whether the plugin may read the environment variable
// name. Names are case-sensitive; KILN_* variables are never allowed.
func (p Permissions) AllowsEnv(name string) bool {
	return checkEnv(name) == "" && slices.Contains(p.Env, name)
}

// Summary returns one human-readable line per permission, for the install
// consent prompt, in this order: network, files, environment, programs,
// memory, call timeout. Entries that are not valid are left out. The zero
// value has an empty summary (it grants nothing); a process plugin's
// permissions are not enforced, which Manifest.ConsentSummary says.
func (p Permissions) Summary() []string {
	var out []string
	for _, s := range p.Network {
		pat, bad := parseNetwork(s)
		if bad != "" {
			continue
		}
		var what string
		switch {
		case pat.ip.IsValid() && !isPublic(pat.ip):
			kind := "a local network address"
			if pat.ip.IsLoopback() {
				kind = "this computer"
			}
			what = fmt.Sprintf("%s (%s)", hostString(pat), kind)
		case pat.wildcard:
			what = "any subdomain of " + pat.host
		default:
			what = hostString(pat)
		}
		if pat.port == 0 {
			out = append(out, fmt.Sprintf("connect to %s on ports 80 and 443", what))
		} else {
			out = append(out, fmt.Sprintf("connect to %s on port %d", what, pat.port))
		}
	}
	for _, g := range p.Filesystem {
		if checkFSPath(g.Path) != "" {
			continue
		}
		var verb string
		switch {
		case g.Read && g.Write:
			verb = "read and write"
		case g.Read:
			verb = "read"
		case g.Write:
			verb = "write"
		default:
			continue
		}
		where := g.Path
		if g.Path == "data:/" {
			where = "its own data folder"
		} else if strings.HasPrefix(g.Path, "data:/") {
			where += " (in its own data folder)"
		}
		out = append(out, fmt.Sprintf("%s files in %s", verb, where))
	}
	for _, name := range p.Env {
		if checkEnv(name) == "" {
			out = append(out, "read environment variable "+name)
		}
	}
	if p.Exec {
		out = append(out, "run programs")
	}
	if p.MemoryMiB > 0 {
		out = append(out, fmt.Sprintf("use up to %d MiB of memory", p.MemoryMiB))
	}
	if p.TimeoutMS > 0 {
		out = append(out, "take up to "+millis(p.TimeoutMS)+" per call")
	}
	return out
}

// hostString writes a pattern's host as in the manifest.
func hostString(p netPattern) string {
	switch {
	case p.ip.Is6():
		return "[" + p.ip.String() + "]"
	case p.ip.IsValid():
		return p.ip.String()
	}
	return p.host
}

// millis writes a duration in milliseconds for people: "10 minutes",
// "30 seconds", "1500 ms".
func millis(ms int) string {
	plural := func(n int, unit string) string {
		if n == 1 {
			return "1 " + unit
		}
		return strconv.Itoa(n) + " " + unit + "s"
	}
	switch {
	case ms%60000 == 0:
		return plural(ms/60000, "minute")
	case ms%1000 == 0:
		return plural(ms/1000, "second")
	}
	return strconv.Itoa(ms) + " ms"
}
