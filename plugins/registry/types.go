package registry

import (
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
)

// Status is where an installed plugin is: what the user asked for
// (enabled or not) combined with what the host achieved.
type Status string

// Statuses.
const (
	StatusEnabled  Status = "enabled"  // loaded; its tools are callable
	StatusDisabled Status = "disabled" // installed, not loaded
	StatusFailed   Status = "failed"   // enabled but not serving; Info.Error says why
)

// Info describes an installed (or built-in) plugin.
type Info struct {
	ID          string               `json:"id"`
	Version     string               `json:"version"`
	Description string               `json:"description"`
	Runtime     plugins.Runtime      `json:"runtime"`
	Provides    []plugins.Capability `json:"provides"`
	// Builtin is true for the plugins that ship inside the kiln binary:
	// they cannot be removed, only disabled.
	Builtin bool `json:"builtin"`
	// Enabled is what the user asked for; Status is what holds.
	Enabled bool   `json:"enabled"`
	Status  Status `json:"status"`
	// Error is why the plugin is failed, or "".
	Error string `json:"error,omitempty"`
	// Tools are the namespaced names ("<id>.<tool>") runs can call while
	// the plugin is enabled.
	Tools []string `json:"tools"`
	// InterruptOn is the plugin's default approval policy for its tools.
	InterruptOn core.Policy `json:"interrupt_on,omitempty"`
	// Permissions are the lines of the consent prompt the user accepted
	// (plugins.Manifest.ConsentSummary).
	Permissions []string `json:"permissions"`
	SHA256      string   `json:"sha256"`
	// Dir is the folder the plugin is loaded from:
	// <data root>/plugins/<id>/<version> ("" for built-ins).
	Dir         string    `json:"dir,omitempty"`
	InstalledAt time.Time `json:"installed_at,omitzero"`
	// Restarts and PID report a process plugin's health.
	Restarts int `json:"restarts,omitempty"`
	PID      int `json:"pid,omitempty"`
}

// Preview is what installing a plugin folder would do, shown before the
// user consents: the manifest's identity and the permissions it asks for.
type Preview struct {
	ID          string               `json:"id"`
	Version     string               `json:"version"`
	Description string               `json:"description"`
	Runtime     plugins.Runtime      `json:"runtime"`
	Provides    []plugins.Capability `json:"provides"`
	SHA256      string               `json:"sha256"`
	InterruptOn core.Policy          `json:"interrupt_on,omitempty"`
	// Permissions are the consent lines (plugins.Manifest.ConsentSummary).
	Permissions []string `json:"permissions"`
	// Installed is the version of this plugin already installed, or "".
	Installed string `json:"installed,omitempty"`
}

// InstallRequest asks to install the plugin folder at Path (on the
// server's machine).
type InstallRequest struct {
	Path string `json:"path"`
	// Consent must be true: the caller showed the user the plugin's
	// permissions (Preview) and the user accepted them.
	Consent bool `json:"consent"`
	// SHA256, when set, must equal the manifest's entry sha256: it binds
	// the consent to the bytes that were previewed.
	SHA256 string `json:"sha256,omitempty"`
	// Disabled installs without enabling.
	Disabled bool `json:"disabled,omitempty"`
}
