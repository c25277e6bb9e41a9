package pluginapi

import (
	"encoding/json"
	"time"
)

// Marketplace kinds.
const (
	// MarketplaceKiln is a signed Kiln marketplace (marketplace.json with
	// its signature and log).
	MarketplaceKiln = "kiln"
	// MarketplaceClaude is a Claude Code marketplace
	// (.claude-plugin/marketplace.json): unsigned, added only when the
	// user trusts it explicitly.
	MarketplaceClaude = "claude"
)

// Marketplace is a marketplace the server was told about, as the API
// and the CLI show it.
type Marketplace struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// Kind is "kiln" or "claude".
	Kind string `json:"kind"`
	// Keys are the verifier keys the server trusts for it (none for an
	// unsigned source).
	Keys []string `json:"keys"`
	// Unsigned is true for a source whose index is not signed; the user
	// trusted it explicitly when adding it.
	Unsigned bool `json:"unsigned,omitempty"`
	// Quarantine is how old a version must be before it is offered
	// ("72h"; "0s" offers every version).
	Quarantine string `json:"quarantine"`
	// Owner and Version are those of the last verified index; Expires is
	// when that index stops being trusted.
	Owner   string    `json:"owner,omitempty"`
	Version uint64    `json:"version,omitempty"`
	Expires time.Time `json:"expires,omitzero"`
	// Expired is true once Expires has passed: the marketplace needs a
	// refresh. Its plugins are still listed, but nothing is installed
	// from it until a refresh verifies a newer index.
	Expired bool `json:"expired,omitempty"`
	// Tree is the last log tree head verified: its size and root hash.
	TreeSize int64  `json:"tree_size,omitempty"`
	TreeHash string `json:"tree_hash,omitempty"`
	// Plugins counts the plugins its index offers.
	Plugins   int       `json:"plugins"`
	Added     time.Time `json:"added"`
	Refreshed time.Time `json:"refreshed,omitzero"`
	// Error is why the last refresh was refused, or "": the index kept
	// is the last one verified.
	Error string `json:"error,omitempty"`
}

// AddMarketplaceRequest is the body of POST /marketplaces.
type AddMarketplaceRequest struct {
	// Name is the marketplace's name, which must be the one its signed
	// index gives; empty takes that name.
	Name string `json:"name,omitempty"`
	// URL is where the marketplace's files are: an https:// URL, a
	// file:// URL, an absolute path on the server's machine, or an
	// http:// URL of a loopback host.
	URL string `json:"url"`
	// Keys are the verifier keys to trust (at least one for a Kiln
	// marketplace).
	Keys []string `json:"keys,omitempty"`
	// Kind is "kiln" (the default) or "claude".
	Kind string `json:"kind,omitempty"`
	// TrustUnsigned must be true to add an unsigned (Claude) source.
	TrustUnsigned bool `json:"trust_unsigned,omitempty"`
	// Quarantine is a duration ("72h"); empty is 0.
	Quarantine string `json:"quarantine,omitempty"`
}

// MarketplacePlugin is a plugin a marketplace offers, as search and the
// plugin's details show it.
type MarketplacePlugin struct {
	Name        string   `json:"name"`
	Marketplace string   `json:"marketplace"`
	Description string   `json:"description"`
	Author      string   `json:"author,omitempty"`
	Homepage    string   `json:"homepage,omitempty"`
	License     string   `json:"license,omitempty"`
	Tags        []string `json:"tags"`
	Kinds       []string `json:"kinds"`
	// Latest is the newest version offered now (quarantine and yanked
	// versions left out, and prereleases unless the installed version is
	// one), or "" when none is (also while the marketplace's index is
	// expired).
	Latest string `json:"latest"`
	// Installed is the installed version, or "".
	Installed string `json:"installed,omitempty"`
	// Score ranks a search result (higher first).
	Score int `json:"score,omitempty"`
	// Versions are newest first; only in a plugin's details.
	Versions []MarketplaceVersion `json:"versions,omitempty"`
}

// MarketplaceVersion is one published version of a plugin.
type MarketplaceVersion struct {
	Version   string    `json:"version"`
	Published time.Time `json:"published"`
	// Digest is the unpacked folder's digest; ArchiveSHA256 and Size
	// the archive's.
	Digest        string   `json:"digest"`
	ArchiveSHA256 string   `json:"archive_sha256"`
	Size          int64    `json:"size"`
	Runtime       string   `json:"runtime"`
	Provides      []string `json:"provides"`
	// Permissions are the consent lines of what it asks for.
	Permissions []string `json:"permissions"`
	MinKiln     string   `json:"min_kiln,omitempty"`
	Protocol    int      `json:"protocol,omitempty"`
	// Offered is false when the version is not offered unless asked for
	// by exact version; Reason says why (quarantine, yanked, needs a
	// newer Kiln), or that the marketplace's index expired, which
	// nothing is installed from until it is refreshed.
	Offered bool   `json:"offered"`
	Reason  string `json:"reason,omitempty"`
	// Signed is true when the index listing it was signed by a trusted
	// key; LogIndex is the index version's entry in the marketplace's
	// log (-1 for an unsigned source).
	Signed   bool  `json:"signed"`
	LogIndex int64 `json:"log_index"`
}

// MarketplaceInstallRequest is the body of POST /marketplace/preview and
// POST /marketplace/install.
type MarketplaceInstallRequest struct {
	// Name is the plugin's name; Version a version or a constraint
	// ("1.2.3", "^1.2", "~1.2", "latest" or ""). Only an exact version
	// reaches a quarantined or yanked version; "latest" reaches a
	// prerelease only when the installed version is one, and a range only
	// when it names one ("^2.0.0-rc.1").
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	// Marketplace picks one when several offer the name.
	Marketplace string `json:"marketplace,omitempty"`
	// Consent is the user's answer to the preview's permissions.
	Consent bool `json:"consent,omitempty"`
	// Digest, when set, must be the previewed folder digest: the consent
	// is for those bytes.
	Digest string `json:"digest,omitempty"`
	// AllowDowngrade permits installing a version older than the
	// installed one.
	AllowDowngrade bool `json:"allow_downgrade,omitempty"`
	// MCPRegistry, when set, installs an MCP server described by an MCP
	// Registry server.json instead of a marketplace plugin; Name,
	// Version and Marketplace are then left empty.
	MCPRegistry *MCPRegistrySource `json:"mcp_registry,omitempty"`
}

// MCPRegistrySource names an MCP Registry server.json to convert into an
// "mcp-servers" bundle: the document itself, or a server of a registry
// (the official one or a mirror) by name and version.
type MCPRegistrySource struct {
	// ServerJSON is a server.json document.
	ServerJSON json.RawMessage `json:"server_json,omitempty"`
	// Registry is a registry's address (https://, or http:// on this
	// machine); Name the server's name there ("io.github.acme/weather")
	// and Version its version: exact, or "" or "latest" for the version
	// the registry marks latest, which the preview then names exactly.
	Registry string `json:"registry,omitempty"`
	Name     string `json:"name,omitempty"`
	Version  string `json:"version,omitempty"`
	// Pick is what to run: "packages[N]" or "remotes[N]"; "" is the
	// first package Kiln can run, else the first remote.
	Pick string `json:"pick,omitempty"`
}

// MarketplacePreview is what installing a marketplace plugin would do,
// after its archive was downloaded and verified.
type MarketplacePreview struct {
	Marketplace string `json:"marketplace"`
	// Preview is the registry's preview of the verified folder: the
	// permissions, what an upgrade adds, the changed files.
	Preview
	// Digest is the verified folder digest to send back with consent.
	Digest string `json:"digest"`
	// ArchiveSHA256 and Size are the verified archive's.
	ArchiveSHA256 string `json:"archive_sha256"`
	Size          int64  `json:"size"`
	// Verified lists what was checked, in order ("signature by
	// acme+1a2b3c4d", "log entry 4 in tree 5", "size 20971520",
	// "archive sha256", "folder digest").
	Verified []string `json:"verified"`
	// Skipped names what a converted source holds that Kiln does not run
	// (a Claude plugin's hooks, commands, agents).
	Skipped []string `json:"skipped,omitempty"`
	// Warnings are what a conversion changed on the way or wants checked
	// (a server renamed, an input left for a variable to set).
	Warnings []string `json:"warnings,omitempty"`
}

// Outdated is an installed marketplace plugin with a newer version
// offered.
type Outdated struct {
	Name        string `json:"name"`
	Marketplace string `json:"marketplace"`
	Installed   string `json:"installed"`
	Latest      string `json:"latest"`
	// Pinned is the version the plugin is pinned to, or "": a pinned
	// plugin is not upgraded.
	Pinned string `json:"pinned,omitempty"`
}

// Progress is one line of a download's progress (POST
// /marketplace/preview with Accept: application/x-ndjson).
type Progress struct {
	Done  int64 `json:"done"`
	Total int64 `json:"total"`
}

// LockedInstallRequest is the body of POST /marketplace/install-locked.
type LockedInstallRequest struct {
	// Lock is the lock file of the installation to reproduce.
	Lock Lock `json:"lock"`
	// Consent is the user's answer to the dry run's permissions.
	Consent bool `json:"consent,omitempty"`
	// DryRun downloads and verifies every plugin and says what it would
	// do, installing nothing.
	DryRun bool `json:"dry_run,omitempty"`
}

// What installing a locked plugin did (LockedResult.Status).
const (
	LockedInstalled    = "installed"     // installed at the locked version
	LockedUnchanged    = "unchanged"     // that version and digest were installed already
	LockedWouldInstall = "would_install" // a dry run: verified, not installed
	LockedSkipped      = "skipped"       // not installed from the lock; Reason says why
)

// LockedResult is one plugin of a locked install.
type LockedResult struct {
	ID          string `json:"id"`
	Version     string `json:"version"`
	Marketplace string `json:"marketplace"`
	Status      string `json:"status"`
	// Installed is the version installed now, for a plugin the lock
	// changes; Permissions are then what the locked version adds.
	Installed    string   `json:"installed,omitempty"`
	Permissions  []string `json:"permissions,omitempty"`
	NeedsConsent bool     `json:"needs_consent,omitempty"`
	// Reason says why a plugin was skipped (one installed from a folder,
	// which the lock cannot fetch).
	Reason string `json:"reason,omitempty"`
}
