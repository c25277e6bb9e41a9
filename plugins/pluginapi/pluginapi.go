// Package pluginapi holds the plugin and model-provider types the server's
// API, the kiln CLI and the Go SDK (sdk/client) share: what the registry
// and the provider hub answer and what they are asked. It imports core and
// the standard library only, never a transport (wazero, go-plugin, gRPC),
// so that the API layer and the SDK stay free of them; the allowlists of
// core/layering_test.go, which cover web and sdk/client, keep it so.
package pluginapi

import (
	"time"

	"github.com/kilnhq/kiln/core"
)

// Status is where an installed plugin is: what the user asked for
// (enabled or not) combined with what the host achieved.
type Status string

// Statuses.
const (
	StatusEnabled  Status = "enabled"  // loaded; what it provides is in use
	StatusDisabled Status = "disabled" // installed, not loaded
	StatusFailed   Status = "failed"   // enabled but not serving; Info.Error says why
)

// Info describes an installed (or built-in) plugin.
type Info struct {
	ID          string `json:"id"`
	Version     string `json:"version"`
	Description string `json:"description"`
	// Runtime is "builtin", "wasm", "process", or "data" for a data-only
	// bundle.
	Runtime string `json:"runtime"`
	// Provides lists its kinds: "toolset", "model-provider", "skills", ...
	Provides []string `json:"provides"`
	// Builtin is true for the plugins that ship inside the kiln binary:
	// they cannot be removed, only disabled.
	Builtin bool `json:"builtin"`
	// Enabled is what the user asked for; Status is what holds.
	Enabled bool   `json:"enabled"`
	Status  Status `json:"status"`
	// Error is why the plugin is failed, or "".
	Error string `json:"error,omitempty"`
	// Tools are the names runs can call while the plugin is enabled:
	// "<id>.<tool>", or a built-in's bare tool names.
	Tools []string `json:"tools"`
	// Provided lists, per kind, what the enabled plugin adds: its tools,
	// its models, its skills, its MCP servers.
	Provided map[string][]string `json:"provided,omitempty"`
	// InterruptOn is the plugin's default approval policy for its tools.
	InterruptOn core.Policy `json:"interrupt_on,omitempty"`
	// Permissions are the lines of the consent the user gave, worded
	// from the permissions themselves (what is stored is the permission
	// set, not these words).
	Permissions []string `json:"permissions"`
	// SHA256 identifies the plugin's bytes: its entry file's sha256, or
	// for a data-only bundle the digest of its whole folder.
	SHA256 string `json:"sha256"`
	// Digest is the digest of the plugin's whole installed folder
	// (plugins/integrity.Tree), what a marketplace publishes and the lock
	// file records; "" for built-ins. For a data-only bundle it equals
	// SHA256.
	Digest string `json:"digest,omitempty"`
	// Dir is the folder the plugin is loaded from:
	// <data root>/plugins/<id>/<version> ("" for built-ins).
	Dir         string    `json:"dir,omitempty"`
	InstalledAt time.Time `json:"installed_at,omitzero"`
	// Source is the marketplace the installed version came from; nil for
	// a plugin installed from a folder.
	Source *Source `json:"source,omitempty"`
	// Previous is the version kept on disk to roll back to, or "" when
	// there is none (kiln plugin rollback).
	Previous string `json:"previous,omitempty"`
	// Pinned is the version the user holds the plugin at, or "" when it
	// is not pinned: `kiln plugin upgrade` leaves a pinned plugin alone,
	// and the registry refuses to install another version of it or roll
	// it back until it is unpinned.
	Pinned string `json:"pinned,omitempty"`
	// Restarts and PID report a process plugin's health.
	Restarts int `json:"restarts,omitempty"`
	PID      int `json:"pid,omitempty"`
}

// Preview is what installing a plugin folder would do, shown before the
// user consents: the manifest's identity and the permissions it asks for.
type Preview struct {
	ID          string      `json:"id"`
	Version     string      `json:"version"`
	Description string      `json:"description"`
	Runtime     string      `json:"runtime"`
	Provides    []string    `json:"provides"`
	SHA256      string      `json:"sha256"`
	InterruptOn core.Policy `json:"interrupt_on,omitempty"`
	// Permissions are the consent lines of everything the plugin asks
	// for.
	Permissions []string `json:"permissions"`
	// Installed is the version of this plugin already installed, or "".
	Installed string `json:"installed,omitempty"`
	// Added are the consent lines of what this version asks for beyond
	// what the user consented to for the installed one ("adds network
	// api.example.com"); empty when it asks for nothing more. Only for an
	// upgrade (Installed set).
	Added []string `json:"added,omitempty"`
	// NeedsConsent is false only for an upgrade that asks for nothing
	// more than the consent already given.
	NeedsConsent bool `json:"needs_consent"`
	// Downgrade is true when Version is older (by semantic version) than
	// the installed one: installing it needs InstallRequest.AllowDowngrade.
	Downgrade bool `json:"downgrade,omitempty"`
	// Pinned is the version the installed plugin is pinned at, or "":
	// installing another version is refused until it is unpinned.
	Pinned string `json:"pinned,omitempty"`
	// Changes are the files that differ between the installed version's
	// folder and this one; nil unless another version is installed.
	Changes *Changes `json:"changes,omitempty"`
}

// Changes compares two versions of a plugin folder file by file (their
// plugins/integrity listings): every path, slash-separated and sorted.
type Changes struct {
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	Changed []string `json:"changed"`
	// Summary says it in one line: "3 files changed, 1 added",
	// "no files changed", or why the installed folder could not be
	// compared (the lists are then empty).
	Summary string `json:"summary"`
}

// Source is where a plugin version came from when a marketplace
// installed it: what the marketplace client verified before it handed
// the unpacked folder to the registry.
type Source struct {
	// Marketplace is the name the marketplace was added under.
	Marketplace string `json:"marketplace"`
	// Version is the plugin version the marketplace published; it must
	// be the manifest's.
	Version string `json:"version"`
	// ArchiveSHA256 is the sha256 of the archive downloaded, hex.
	ArchiveSHA256 string `json:"archive_sha256"`
	// Digest is the folder digest the marketplace published for the
	// unpacked plugin (plugins/integrity.Tree), hex; the registry checks
	// its copy against it.
	Digest string `json:"digest"`
	// IndexVersion is the version of the signed index it was found in.
	IndexVersion uint64 `json:"index_version"`
	// Commit is, for a plugin converted from an unsigned Claude Code
	// marketplace, the git commit the marketplace was read at (40 or 64
	// hex digits): the pin a lock file reproduces it from. Such a plugin
	// has no archive: its ArchiveSHA256 is the converted folder's digest.
	// "" for a Kiln marketplace, or a Claude one read from a folder.
	Commit string `json:"commit,omitempty"`
}

// InstallRequest asks to install the plugin folder at Path (on the
// server's machine).
type InstallRequest struct {
	Path string `json:"path"`
	// Consent must be true when the plugin asks for anything the user has
	// not consented to (Preview.NeedsConsent): the caller showed the user
	// the permissions (Preview.Permissions, or for an upgrade
	// Preview.Added) and the user accepted them.
	Consent bool `json:"consent"`
	// SHA256, when set, must equal the previewed sha256: it binds the
	// consent to the bytes that were previewed.
	SHA256 string `json:"sha256,omitempty"`
	// Disabled installs without enabling.
	Disabled bool `json:"disabled,omitempty"`
	// AllowDowngrade allows installing a version older than the installed
	// one; without it that is refused.
	AllowDowngrade bool `json:"allow_downgrade,omitempty"`
	// Move, for a caller in the same process that gives the folder up
	// (the marketplace client's verified download), lets the registry
	// rename it into place instead of copying it (it copies across
	// filesystems): after the call, installed or refused, the caller must
	// not use the folder again. The manifest is read and checked again
	// there. Never sent over the API.
	Move bool `json:"-"`
	// Listing, with Move, is the moved folder's integrity listing (the
	// lines plugins/integrity.Tree hashes) as the caller computed it while
	// writing the folder: the registry trusts it instead of reading the
	// folder again, and checks that it hashes to Source's digest. Never
	// sent over the API.
	Listing []byte `json:"-"`
	// Source, when the marketplace client (in the same process) installs
	// the folder, says where it came from; the registry records it and
	// checks the folder against its digest and version. Never taken from
	// the API: an API caller cannot label a folder as a marketplace's.
	Source *Source `json:"-"`
}

// PinRequest is the body of POST /plugins/{id}/pin: the version to hold
// the plugin at, which must be the installed one.
type PinRequest struct {
	Version string `json:"version"`
}

// Provider states.
const (
	ProviderReady         = "ready"          // configured and enabled
	ProviderNotConfigured = "not_configured" // no credentials found
	ProviderDisabled      = "disabled"       // its plugin is disabled
	ProviderError         = "error"          // ProviderStatus.Error says why
)

// ProviderStatus is a model provider as the API and the CLI show it.
// Secrets never appear: only whether each is set and where from.
type ProviderStatus struct {
	ID   string `json:"id"`   // "openai", "anthropic", "gemini", "bedrock", "openrouter", "ollama"
	Name string `json:"name"` // "OpenAI"
	// State is "ready" (configured and enabled), "not_configured" (no
	// credentials found), "disabled" (its plugin is disabled) or "error"
	// (Error says why: a stored environment reference whose variable is
	// not set, the model list failed, the server cannot be reached).
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// Settings are the provider's settings with secrets redacted: each
	// secret is "set (env OPENAI_API_KEY)", "set (credentials file)" or
	// "not set"; other settings (base_url, region, api, profile, ...) as
	// they are, with their source.
	Settings []ProviderSetting `json:"settings"`
	// Env lists the environment variables the provider reads, for the
	// "how to configure" hint.
	Env []string `json:"env"`
}

// ProviderSetting is one resolved setting.
type ProviderSetting struct {
	Name   string `json:"name"` // "api_key", "base_url", "region", ...
	Secret bool   `json:"secret"`
	// Value is the value, or for a secret "set" or "not set".
	Value string `json:"value"`
	// Source is where the value comes from: "env OPENAI_API_KEY",
	// "config", "config (env ref ${OPENAI_API_KEY})", "credentials file",
	// "default", or "" when not set. A stored environment reference keeps
	// its source when its variable is not set (see Error).
	Source string `json:"source,omitempty"`
	// Error says why a stored value cannot be used: "${MY_OPENAI_KEY}
	// stored, but MY_OPENAI_KEY is not set in the server's environment"
	// (the reference names a variable, it is not a secret). Value is then
	// "not set" for a secret, "" otherwise, and the provider is in state
	// "error". Empty when the setting is fine.
	Error string `json:"error,omitempty"`
}

// ProviderConfig sets a provider's configuration (PUT /providers/{id},
// kiln providers set). A secret value is either an environment reference
// "${NAME}" (stored as the reference) or a literal (stored in the
// credentials file, mode 0600, never in the database); "" removes the
// setting. Settings not named are kept.
type ProviderConfig struct {
	Settings map[string]string `json:"settings"`
}

// Model is one model a provider offers.
type Model struct {
	Ref         string `json:"ref"` // "openai:gpt-4o", what KILN_MODEL and runs take
	Provider    string `json:"provider"`
	ID          string `json:"id"`
	Name        string `json:"name,omitempty"`
	ContextSize int    `json:"context_size,omitempty"` // in tokens, 0 when unknown
}

// Models is GET /models: every configured provider's models (live where
// the API lists them, cached) and every provider's status.
type Models struct {
	Models    []Model          `json:"models"`
	Providers []ProviderStatus `json:"providers"`
	Default   string           `json:"default"` // the server's default model
}

// MCPState is the state of an MCP server's connection.
type MCPState string

// MCP connection states.
const (
	MCPConnecting MCPState = "connecting"
	MCPConnected  MCPState = "connected"
	MCPError      MCPState = "error"
	MCPDisabled   MCPState = "disabled"
)

// MCPServerStatus is an MCP server's connection at one moment, as
// GET /api/v1/mcp-servers shows it.
type MCPServerStatus struct {
	ID    string   `json:"id"`
	State MCPState `json:"state"`
	// Error says why the last attempt failed or the connection was lost,
	// with the last lines the server wrote to stderr (stdio), values of
	// variables and headers redacted.
	Error string `json:"error,omitempty"`
	// Protocol is the negotiated MCP protocol version.
	Protocol string `json:"protocol,omitempty"`
	// Tools are the registered tools' names, "mcp.<server>.<tool>".
	Tools []string `json:"tools,omitempty"`
	// Transport is "stdio", "http" or "sse".
	Transport string `json:"transport"`
	// Plugin is the plugin whose mcp-servers bundle defines the server
	// (it goes with the plugin); empty for a server of the user's own
	// .mcp.json, which the API can remove.
	Plugin string `json:"plugin,omitempty"`
}

// MCPServerConfig is one server to add to the user's .mcp.json
// (POST /api/v1/mcp-servers): its ID and the fields of its entry in
// "mcpServers", as that file holds them. "${NAME}" references are kept as
// written and expanded at connect time. A stdio server has Command (Args,
// Env, Cwd); an HTTP one has URL (Type "http" or "sse", Headers).
type MCPServerConfig struct {
	ID       string            `json:"id"`
	Type     string            `json:"type,omitempty"`
	Command  string            `json:"command,omitempty"`
	Args     []string          `json:"args,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Cwd      string            `json:"cwd,omitempty"`
	URL      string            `json:"url,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	Trust    string            `json:"trust,omitempty"`
	Disabled bool              `json:"disabled,omitempty"`
	// Timeout is a tool call's deadline in milliseconds, 1 to 86400000
	// (a day); nil: the server's default.
	Timeout *int64 `json:"timeout,omitempty"`
}
