package client

import (
	"context"
	"net/http"

	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// The plugin types are the server's own (package plugins/pluginapi,
// which depends on core and the standard library only).

// PluginStatus is where an installed plugin is.
type PluginStatus = pluginapi.Status

// Plugin statuses.
const (
	PluginEnabled  = pluginapi.StatusEnabled  // loaded; what it provides is in use
	PluginDisabled = pluginapi.StatusDisabled // installed, not loaded
	PluginFailed   = pluginapi.StatusFailed   // enabled but not serving; PluginInfo.Error says why
)

type (
	// PluginInfo describes an installed or built-in plugin.
	PluginInfo = pluginapi.Info
	// PluginPreview is what installing a plugin folder would do: the
	// manifest's identity and the permissions it asks for (for an
	// upgrade, what it adds), to show the user before they consent.
	PluginPreview = pluginapi.Preview
	// InstallPluginRequest asks to install the plugin folder at Path, an
	// absolute path on the server's machine.
	InstallPluginRequest = pluginapi.InstallRequest
	// PluginChanges are the files an upgrade changes (PluginPreview.Changes).
	PluginChanges = pluginapi.Changes
	// PluginSource is the marketplace a plugin version came from.
	PluginSource = pluginapi.Source
)

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

// RollbackPlugin switches a plugin to the version installed before the
// current one, kept on disk by the last upgrade; calling it again rolls
// forward. With no previous version, a pinned plugin or a previous
// version whose folder changed since install the error is a conflict
// (IsConflict) saying which; when the previous version does not start the
// error is unavailable (IsUnavailable) and the current version runs again.
func (c *Client) RollbackPlugin(ctx context.Context, id string) (*PluginInfo, error) {
	return c.plugin(ctx, http.MethodPost, id, "/rollback")
}

// PinPlugin holds a plugin at version, which must be the installed one
// (a conflict error otherwise): upgrades leave it alone, and installing
// another version of it or rolling it back is refused until UnpinPlugin.
func (c *Client) PinPlugin(ctx context.Context, id, version string) (*PluginInfo, error) {
	p, err := pathID("plugin", id)
	if err != nil {
		return nil, err
	}
	var out PluginInfo
	if err := c.do(ctx, http.MethodPost, apiPrefix+"/plugins/"+p+"/pin", nil, pluginapi.PinRequest{Version: version}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UnpinPlugin unpins a plugin; one that is not pinned stays so.
func (c *Client) UnpinPlugin(ctx context.Context, id string) (*PluginInfo, error) {
	return c.plugin(ctx, http.MethodDelete, id, "/pin")
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
