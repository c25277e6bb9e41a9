package client

import (
	"context"
	"net/http"
	"time"

	"github.com/kilnhq/kiln/core"
)

// The plugin types mirror the server's (package plugins/registry) rather
// than import them, so that the SDK keeps depending on core and the
// standard library only.

// PluginStatus is where an installed plugin is.
type PluginStatus string

// Plugin statuses.
const (
	PluginEnabled  PluginStatus = "enabled"  // loaded; its tools are callable
	PluginDisabled PluginStatus = "disabled" // installed, not loaded
	PluginFailed   PluginStatus = "failed"   // enabled but not serving; PluginInfo.Error says why
)

// PluginInfo describes an installed or built-in plugin.
type PluginInfo struct {
	ID          string   `json:"id"`
	Version     string   `json:"version"`
	Description string   `json:"description"`
	Runtime     string   `json:"runtime"`  // "wasm" or "process"
	Provides    []string `json:"provides"` // "toolset", "model-provider", ...
	// Builtin plugins ship inside the kiln binary: they can be disabled,
	// not removed.
	Builtin bool `json:"builtin"`
	// Enabled is what the user asked for; Status is what holds.
	Enabled bool         `json:"enabled"`
	Status  PluginStatus `json:"status"`
	// Error is why the plugin is failed.
	Error string `json:"error,omitempty"`
	// Tools are the namespaced tool names ("<id>.<tool>") runs can call
	// while the plugin is enabled.
	Tools []string `json:"tools"`
	// InterruptOn is the plugin's default approval policy for its tools.
	InterruptOn core.Policy `json:"interrupt_on,omitempty"`
	// Permissions are the lines of the consent prompt the user accepted.
	Permissions []string `json:"permissions"`
	SHA256      string   `json:"sha256"`
	// Dir is the folder on the server the plugin is loaded from ("" for
	// built-ins).
	Dir         string    `json:"dir,omitempty"`
	InstalledAt time.Time `json:"installed_at,omitzero"`
	// Restarts and PID report a process plugin's health.
	Restarts int `json:"restarts,omitempty"`
	PID      int `json:"pid,omitempty"`
}

// PluginPreview is what installing a plugin folder would do: the
// manifest's identity and the permissions it asks for, to show the user
// before they consent.
type PluginPreview struct {
	ID          string      `json:"id"`
	Version     string      `json:"version"`
	Description string      `json:"description"`
	Runtime     string      `json:"runtime"`
	Provides    []string    `json:"provides"`
	SHA256      string      `json:"sha256"`
	InterruptOn core.Policy `json:"interrupt_on,omitempty"`
	// Permissions are the lines of the consent prompt.
	Permissions []string `json:"permissions"`
	// Installed is the version of this plugin already installed, or "".
	Installed string `json:"installed,omitempty"`
}

// InstallPluginRequest asks to install the plugin folder at Path, an
// absolute path on the server's machine.
type InstallPluginRequest struct {
	Path string `json:"path"`
	// Consent must be true: the user was shown the plugin's permissions
	// (PreviewPlugin) and accepted them.
	Consent bool `json:"consent"`
	// SHA256, when set, must equal the entry's sha256: pass the previewed
	// one to bind the consent to the bytes the user saw.
	SHA256 string `json:"sha256,omitempty"`
	// Disabled installs without enabling.
	Disabled bool `json:"disabled,omitempty"`
}

// Plugins returns every plugin, built-ins included, sorted by id. A server
// without plugin support answers with a not-found error.
func (c *Client) Plugins(ctx context.Context) ([]*PluginInfo, error) {
	var out struct {
		Plugins []*PluginInfo `json:"plugins"`
	}
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/plugins", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Plugins, nil
}

// Plugin returns an installed or built-in plugin.
func (c *Client) Plugin(ctx context.Context, id string) (*PluginInfo, error) {
	return c.plugin(ctx, http.MethodGet, id, "")
}

// PreviewPlugin describes the plugin folder at path, an absolute path on
// the server's machine, without installing it. An invalid manifest or a
// checksum mismatch is an invalid-request error saying which.
func (c *Client) PreviewPlugin(ctx context.Context, path string) (*PluginPreview, error) {
	var p PluginPreview
	in := struct {
		Path string `json:"path"`
	}{path}
	if err := c.do(ctx, http.MethodPost, apiPrefix+"/plugins/preview", nil, in, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// InstallPlugin installs (and unless req.Disabled enables) a plugin folder.
// Installing an installed id and version is a conflict error. When the
// plugin is installed but fails to start, the error is unavailable
// (IsUnavailable) with the reason; the plugin then lists as failed.
func (c *Client) InstallPlugin(ctx context.Context, req InstallPluginRequest) (*PluginInfo, error) {
	var p PluginInfo
	if err := c.do(ctx, http.MethodPost, apiPrefix+"/plugins", nil, req, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// EnablePlugin loads a plugin and makes its tools callable. When it fails
// to start the error is unavailable (IsUnavailable) with the reason.
func (c *Client) EnablePlugin(ctx context.Context, id string) (*PluginInfo, error) {
	return c.plugin(ctx, http.MethodPost, id, "/enable")
}

// DisablePlugin unloads a plugin; it stays installed.
func (c *Client) DisablePlugin(ctx context.Context, id string) (*PluginInfo, error) {
	return c.plugin(ctx, http.MethodPost, id, "/disable")
}

// RemovePlugin disables and deletes a plugin. Built-in plugins cannot be
// removed (an invalid-request error), only disabled.
func (c *Client) RemovePlugin(ctx context.Context, id string) error {
	p, err := pathID("plugin", id)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, apiPrefix+"/plugins/"+p, nil, nil, nil)
}

func (c *Client) plugin(ctx context.Context, method, id, suffix string) (*PluginInfo, error) {
	p, err := pathID("plugin", id)
	if err != nil {
		return nil, err
	}
	var out PluginInfo
	if err := c.do(ctx, method, apiPrefix+"/plugins/"+p+suffix, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
