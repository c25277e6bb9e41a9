package plugins

import (
	"slices"
)

// Consent is what a user agreed a plugin may do, kept as data: the
// runtime it runs on (a process plugin runs unconfined, a WASM plugin
// confined) and the permission set itself. The words the user read
// (Lines) are derived from it, so rewording them never invalidates a
// consent.
type Consent struct {
	Runtime     Runtime     `json:"runtime"`
	Permissions Permissions `json:"permissions"`
}

// ConsentOf is what installing m asks the user to agree to.
func ConsentOf(m *Manifest) Consent {
	return Consent{Runtime: m.EffectiveRuntime(), Permissions: m.Permissions}
}

// Lines are the consent prompt's lines: for a process plugin first a
// warning that its permissions cannot be enforced, then
// Permissions.Summary, or a single line saying it asks for nothing.
func (c Consent) Lines() []string {
	var out []string
	if c.Runtime == RuntimeProcess {
		out = append(out, processWarning)
	}
	lines := c.Permissions.Summary()
	if len(lines) == 0 {
		return append(out, "no network, file, environment or program access")
	}
	return append(out, lines...)
}

const processWarning = "run as a separate program with your user account's access: Kiln scrubs its environment but cannot enforce the permissions below inside it"

// Added returns what want asks for beyond c: the permissions c does not
// grant (a host, a file access, an environment variable, exec, more
// memory, a longer timeout) and whether want runs unconfined where c ran
// confined. Covers reports whether nothing is added.
func (c Consent) Added(want Consent) (Permissions, bool) {
	var add Permissions
	for _, h := range want.Permissions.Network {
		if !slices.Contains(c.Permissions.Network, h) {
			add.Network = append(add.Network, h)
		}
	}
	for _, g := range want.Permissions.Filesystem {
		var had FilesystemGrant
		for _, o := range c.Permissions.Filesystem {
			if o.Path == g.Path {
				had = o
			}
		}
		if extra := (FilesystemGrant{Path: g.Path, Read: g.Read && !had.Read, Write: g.Write && !had.Write}); extra.Read || extra.Write {
			add.Filesystem = append(add.Filesystem, extra)
		}
	}
	for _, e := range want.Permissions.Env {
		if !slices.Contains(c.Permissions.Env, e) {
			add.Env = append(add.Env, e)
		}
	}
	add.Exec = want.Permissions.Exec && !c.Permissions.Exec
	if want.Permissions.MemoryMiB > c.Permissions.MemoryMiB {
		add.MemoryMiB = want.Permissions.MemoryMiB
	}
	if want.Permissions.TimeoutMS > c.Permissions.TimeoutMS {
		add.TimeoutMS = want.Permissions.TimeoutMS
	}
	unconfined := want.Runtime == RuntimeProcess && c.Runtime != RuntimeProcess
	return add, unconfined
}

// Covers reports whether c already grants everything want asks for.
func (c Consent) Covers(want Consent) bool {
	add, unconfined := c.Added(want)
	return !unconfined && len(add.Summary()) == 0
}

// AddedLines words what want asks for beyond c, one line each, prefixed
// "adds": "adds: connect to api.example.com on ports 80 and 443". Nil when
// c covers want.
func (c Consent) AddedLines(want Consent) []string {
	add, unconfined := c.Added(want)
	var out []string
	if unconfined {
		out = append(out, "adds: "+processWarning)
	}
	for _, l := range add.Summary() {
		out = append(out, "adds: "+l)
	}
	return out
}
