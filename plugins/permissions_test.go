package plugins

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestZeroPermissionsGrantNothing(t *testing.T) {
	var p Permissions
	if p.AllowsHost("example.com", 443) || p.AllowsHost("127.0.0.1", 80) {
		t.Error("zero value allows a host")
	}
	if p.AllowsResolvedAddr(netip.MustParseAddr("10.0.0.1"), 443) {
		t.Error("zero value allows a private address")
	}
	if r, w := p.FilesystemAccess("data:/x"); r || w {
		t.Error("zero value allows files")
	}
	if p.AllowsEnv("HOME") || p.Exec || p.MemoryMiB != 0 || p.TimeoutMS != 0 {
		t.Error("zero value allows env, exec, memory or time")
	}
	if s := p.Summary(); len(s) != 0 {
		t.Errorf("zero value summary = %q", s)
	}
	if g := p.Grants(); g != nil {
		t.Errorf("zero value grants = %q", g)
	}
}

func TestAllowsHost(t *testing.T) {
	p := Permissions{Network: []string{
		"api.example.com",
		"*.svc.example.net",
		"db.example.org:5432",
		"127.0.0.1:8080",
		"[::1]:9000",
		"203.0.113.7",
		"localhost:3000",
		"BAD.example.com", // invalid (uppercase): grants nothing
		"*.org",           // invalid: grants nothing
	}}
	cases := []struct {
		host string
		port int
		want bool
	}{
		{"api.example.com", 443, true},
		{"api.example.com", 80, true},
		{"api.example.com", 8443, false}, // no port: 80 and 443 only
		{"API.Example.COM", 443, true},   // case-insensitive
		{"api.example.com.", 443, true},  // trailing dot
		{"api.example.com..", 443, false},
		{"x.api.example.com", 443, false}, // exact name only
		{"example.com", 443, false},
		{"a.svc.example.net", 443, true},
		{"a.b.svc.example.net", 80, true}, // any depth
		{"svc.example.net", 443, false},   // not the apex
		{"xsvc.example.net", 443, false},
		{"a..svc.example.net", 443, false}, // not a valid name
		{"db.example.org", 5432, true},
		{"db.example.org", 443, false},
		{"127.0.0.1", 8080, true},
		{"127.0.0.1", 80, false},
		{"localhost", 8080, false}, // a name pattern never matches an IP and vice versa
		{"localhost", 3000, true},
		{"::1", 9000, true},
		{"[::1]", 9000, true},
		{"::ffff:127.0.0.1", 8080, true}, // IPv4-mapped
		{"fe80::1%eth0", 9000, false},
		{"203.0.113.7", 443, true},
		{"203.0.113.7", 22, false},
		{"bad.example.com", 443, false},
		{"x.org", 443, false},
		{"api.example.com", 0, false},
		{"api.example.com", 70000, false},
		{"", 443, false},
		{"\u0430pi.example.com", 443, false}, // Cyrillic a: non-ASCII refused
		{"api.example.com:443", 443, false},  // host only, no port
	}
	for _, c := range cases {
		if got := p.AllowsHost(c.host, c.port); got != c.want {
			t.Errorf("AllowsHost(%q, %d) = %v, want %v", c.host, c.port, got, c.want)
		}
	}
}

func TestAllowsResolvedAddr(t *testing.T) {
	p := Permissions{Network: []string{"api.example.com", "10.0.0.5:5432", "[fd00::5]:443"}}
	cases := []struct {
		addr string
		port int
		want bool
	}{
		{"93.184.216.34", 443, true},
		{"2606:2800:220:1:248:1893:25c8:1946", 443, true},
		{"127.0.0.1", 443, false},
		{"10.0.0.1", 443, false},
		{"10.0.0.5", 5432, true}, // listed explicitly
		{"10.0.0.5", 443, false},
		{"::ffff:10.0.0.5", 5432, true},
		{"169.254.169.254", 80, false}, // cloud metadata
		{"100.64.0.1", 443, false},
		{"0.0.0.0", 443, false},
		{"::1", 443, false},
		{"fd00::5", 443, true},
		{"fd00::6", 443, false},
		{"fe80::1", 443, false},
		{"64:ff9b::a00:1", 443, false}, // NAT64 of 10.0.0.1
		{"224.0.0.1", 443, false},
		{"93.184.216.34", 0, false},
	}
	for _, c := range cases {
		if got := p.AllowsResolvedAddr(netip.MustParseAddr(c.addr), c.port); got != c.want {
			t.Errorf("AllowsResolvedAddr(%s, %d) = %v, want %v", c.addr, c.port, got, c.want)
		}
	}
	if p.AllowsResolvedAddr(netip.Addr{}, 443) {
		t.Error("zero Addr allowed")
	}
}

func TestParseNetwork(t *testing.T) {
	good := []string{"a", "localhost", "api.example.com", "api.example.com:1", "x.example.com:65535",
		"*.example.com", "*.a.b.example.com:8443", "1.2.3.4", "255.255.255.255:80", "[::1]", "[2001:db8::1]:443",
		"xn--caf-dma.example", "a-b.c-d.e", strings.Repeat("a", 63) + ".com"}
	for _, s := range good {
		if _, r := parseNetwork(s); r != "" {
			t.Errorf("parseNetwork(%q): %s", s, r)
		}
		if !reNetwork.MatchString(s) || reUnspecified.MatchString(s) {
			t.Errorf("schema patterns reject %q", s)
		}
	}
	bad := map[string]string{
		"":                         "must not be empty",
		"https://api.example.com":  "without a scheme",
		"api.example.com/v1":       "without a path",
		"api.example.com?x":        "without a path",
		"Api.example.com":          "lowercase",
		"api.*.example.com":        "wildcard",
		"*.*.example.com":          "wildcard",
		"*example.com":             "wildcard",
		"*.com":                    "two labels",
		"*.com:443":                "two labels",
		"a.com:0":                  "port",
		"a.com:080":                "port",
		"a.com:+80":                "port",
		"a.com:65536":              "port",
		"a.com:":                   "port",
		"a.com:x":                  "port",
		"::1":                      "brackets",
		"[::1":                     `missing "]"`,
		"[::1]x":                   "host[:port]",
		"[1.2.3.4]":                "not an IPv6 address",
		"[fe80::1%eth0]":           "not an IPv6 address",
		"[0:0::1]":                 "canonical form [::1]",
		"[2001:DB8::1]":            "lowercase",
		"[::ffff:10.0.0.1]":        "without brackets",
		"0.0.0.0":                  "0.0.0.0/8",
		"0.1.2.3:80":               "0.0.0.0/8",
		"[::]:80":                  "0.0.0.0/8",
		"1.2.3":                    "not a valid host name",
		"01.2.3.4":                 "not a valid host name",
		"256.1.1.1":                "not a valid host name",
		"-a.com":                   "not a valid host name",
		"a-.com":                   "not a valid host name",
		"a..com":                   "not a valid host name",
		"a.com.":                   "not a valid host name",
		"a_b.com":                  "not a valid host name",
		"user@a.com":               "not a valid host name",
		strings.Repeat("a", 64):    "not a valid host name",
		strings.Repeat("a.", 127):  "max 253",
		strings.Repeat("ab.", 90):  "max 253",
		"caf\u00e9.example":        "not a valid host name",
		"a.com:443:443":            "brackets",
		"\u212ailn.dev":            "lowercase",
		"a.com\n":                  "not a valid host name",
		"example.com:443 ":         "port",
		"1.2.3.4.5":                "not a valid host name",
		"*.1.2.3":                  "not a valid host name",
		"[::1]:0":                  "port",
		"[2001:db8::1]:65536":      "port",
		"[2001:db8:0:0:0:0:0:1]":   "canonical form",
		"[::ffff:0:0]":             "without brackets",
		"[64:ff9b::a00:1]:443:443": "port",
	}
	for s, want := range bad {
		_, r := parseNetwork(s)
		if !strings.Contains(r, want) {
			t.Errorf("parseNetwork(%q) = %q, want it to say %q", s, r, want)
		}
	}
}

func TestFilesystemAccess(t *testing.T) {
	p := Permissions{Filesystem: []FilesystemGrant{
		{Path: "grant:projects", Read: true},
		{Path: "grant:projects/notes", Read: true, Write: true},
		{Path: "data:/", Write: true},
		{Path: "data:/cache", Read: true},
		{Path: "grant:../etc", Read: true}, // invalid: grants nothing
	}}
	cases := []struct {
		path        string
		read, write bool
	}{
		{"grant:projects", true, false},
		{"grant:projects/a/b.txt", true, false},
		{"grant:projects/notes", true, true},
		{"grant:projects/notes/x.md", true, true},
		{"grant:projects/notesx", true, false},
		{"grant:projectsx", false, false},
		{"grant:other/x", false, false},
		{"data:/", false, true},
		{"data:/x", false, true},
		{"data:/cache/y", true, true}, // grants add up
		{"grant:projects/notes/../../x", false, false},
		{"grant:projects/", false, false},
		{"grant:projects//a", false, false},
		{"grant:projects/a\\b", false, false},
		{"/etc/passwd", false, false},
		{"data:", false, false},
		{"data:x", false, false},
		{"grant:etc", false, false},
		{"", false, false},
	}
	for _, c := range cases {
		r, w := p.FilesystemAccess(c.path)
		if r != c.read || w != c.write {
			t.Errorf("FilesystemAccess(%q) = %v, %v, want %v, %v", c.path, r, w, c.read, c.write)
		}
	}
	if g := p.Grants(); !slices.Equal(g, []string{"projects"}) {
		t.Errorf("Grants = %q", g)
	}
}

func TestCheckFSPath(t *testing.T) {
	for _, s := range []string{"grant:a", "grant:a/b", "grant:my_projects-2/x y/z.txt", "data:/", "data:/a", "data:/a/b.c", "data:/..a", "data:/a.", "grant:a/:b"} {
		if r := checkFSPath(s); r != "" {
			t.Errorf("checkFSPath(%q) = %q", s, r)
		}
		if !reFSPath.MatchString(s) || reDotSegment.MatchString(s) {
			t.Errorf("schema patterns reject %q", s)
		}
	}
	for _, s := range []string{"", "grant:", "grant:/a", "grant:A", "grant:1a", "grant:a/", "grant:a//b", "grant:a/.", "grant:a/..", "grant:a/./b",
		"data:", "data:a", "data://", "data:/a/", "data:/.", "data:/..", "data:/a/../b", "/abs", "home:/a", "grant:a\\b", "grant:a/b\x00",
		"grant:a/\u0085", "data:/a\nb", "grant:" + strings.Repeat("a", 65), "data:/" + strings.Repeat("\u00e9", 1020)} {
		if checkFSPath(s) == "" {
			t.Errorf("checkFSPath(%q) accepted it", s)
		}
		if reFSPath.MatchString(s) && !reDotSegment.MatchString(s) && len([]rune(s)) <= maxPathLen {
			t.Errorf("schema patterns accept %q", s)
		}
	}
}

func TestAllowsEnv(t *testing.T) {
	p := Permissions{Env: []string{"OPENAI_API_KEY", "_X", "KILN_API_TOKEN", "lower"}}
	for name, want := range map[string]bool{
		"OPENAI_API_KEY": true, "_X": true, "openai_api_key": false, "KILN_API_TOKEN": false,
		"lower": false, "HOME": false, "": false,
	} {
		if got := p.AllowsEnv(name); got != want {
			t.Errorf("AllowsEnv(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestSummary(t *testing.T) {
	p := Permissions{
		Network:    []string{"api.weather.example:443", "*.example.com", "127.0.0.1:8080", "10.1.2.3:5432", "[::1]:9000", "nope://x"},
		Filesystem: []FilesystemGrant{{Path: "grant:projects/notes", Read: true, Write: true}, {Path: "grant:docs", Read: true}, {Path: "data:/", Write: true}, {Path: "data:/cache", Read: true}},
		Env:        []string{"OPENAI_API_KEY"},
		Exec:       true,
		MemoryMiB:  64,
		TimeoutMS:  1500,
	}
	want := []string{
		"connect to api.weather.example on port 443",
		"connect to any subdomain of example.com on ports 80 and 443",
		"connect to 127.0.0.1 (this computer) on port 8080",
		"connect to 10.1.2.3 (a local network address) on port 5432",
		"connect to [::1] (this computer) on port 9000",
		"read and write files in grant:projects/notes",
		"read files in grant:docs",
		"write files in its own data folder",
		"read files in data:/cache (in its own data folder)",
		"read environment variable OPENAI_API_KEY",
		"run programs",
		"use up to 64 MiB of memory",
		"take up to 1500 ms per call",
	}
	if got := p.Summary(); !slices.Equal(got, want) {
		t.Errorf("Summary:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	m := Manifest{Runtime: RuntimeProcess}
	if got := m.ConsentSummary(); len(got) != 2 || !strings.Contains(got[0], "cannot enforce") {
		t.Errorf("ConsentSummary of a process plugin = %q", got)
	}
}
