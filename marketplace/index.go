package marketplace

import (
	"time"

	"github.com/kilnhq/kiln/plugins"
)

// Files of a published marketplace, relative to its root.
const (
	IndexFile     = "marketplace.json"
	SignatureFile = "marketplace.json.sig"
	RotationsFile = "keys/rotations.json"
	LogEntryDir   = "log/entry"
)

// Index is marketplace.json. Its JSON Schema is
// specs/marketplace.schema.json; ParseIndex is the one reader and refuses
// what the schema refuses.
type Index struct {
	// Schema is the optional "$schema" URI editors use.
	Schema string `json:"$schema,omitempty"`
	// Name is the marketplace's name: lowercase letters, digits and
	// hyphens (kebab-case), 2 to 64 characters.
	Name  string `json:"name"`
	Owner Owner  `json:"owner"`
	// Version grows with every publish (1, 2, ...). A client refuses an
	// index older than the last it verified.
	Version uint64 `json:"version"`
	// Published is when this index version was built; Expires is when a
	// client stops trusting it (a frozen marketplace is refused).
	Published time.Time `json:"published"`
	Expires   time.Time `json:"expires"`
	// Log is this index version's entry in the marketplace's log.
	Log LogEntry `json:"log"`
	// Plugins are sorted by name.
	Plugins []Plugin `json:"plugins"`
}

// Owner is who runs the marketplace.
type Owner struct {
	Name  string `json:"name"`
	Email string `json:"email,omitempty"`
	URL   string `json:"url,omitempty"`
}

// LogEntry places an index version in the marketplace's log.
type LogEntry struct {
	// Index is the entry's position (0 for the first index version).
	Index int64 `json:"index"`
}

// Plugin is one plugin the marketplace offers.
type Plugin struct {
	// Name is the plugin's manifest id.
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Author      string   `json:"author,omitempty"`
	Homepage    string   `json:"homepage,omitempty"`
	License     string   `json:"license,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	// Kinds is the union of what its versions provide ("toolset",
	// "model-provider", "skills", "mcp-servers", "sandbox-runtime").
	Kinds []string `json:"kinds"`
	// Versions are sorted newest first by semantic version.
	Versions []Version `json:"versions"`
}

// Version is one published version of a plugin.
type Version struct {
	// Version is a semantic version without a leading "v" ("1.4.0").
	Version string `json:"version"`
	// Published is when this version was first published: a client's
	// quarantine counts from it.
	Published time.Time `json:"published"`
	Artifact  Artifact  `json:"artifact"`
	// Digest is the folder digest of the unpacked plugin
	// (plugins/integrity.Tree), hex.
	Digest string `json:"digest"`
	// Manifest summarises the plugin's kiln-plugin.json: what a user
	// consents to before anything is downloaded.
	Manifest ManifestSummary `json:"manifest"`
	// MinKiln is the oldest Kiln version that can run it ("" for any);
	// Protocol is the plugin protocol (process) or ABI (wasm) it speaks,
	// 0 for a data-only bundle.
	MinKiln  string `json:"min_kiln,omitempty"`
	Protocol int    `json:"protocol,omitempty"`
	// Yanked, when set, says why this version should not be installed;
	// it is offered only when asked for by exact version.
	Yanked string `json:"yanked,omitempty"`
}

// Artifact is where a version's archive is and what its bytes are.
type Artifact struct {
	// URL is a path relative to the index under plugins/ (where Build
	// puts archives and Handler serves them), an https:// URL or a
	// file:// URL.
	URL string `json:"url"`
	// SHA256 is the archive's sha256, hex; Size its length in bytes.
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// ManifestSummary is what a plugin's manifest asks for.
type ManifestSummary struct {
	Runtime     plugins.Runtime     `json:"runtime"`
	Provides    []string            `json:"provides"`
	Permissions plugins.Permissions `json:"permissions"`
}

// Consent is the consent installing this version asks for.
func (s ManifestSummary) Consent() plugins.Consent {
	return plugins.Consent{Runtime: s.Runtime, Permissions: s.Permissions}
}
