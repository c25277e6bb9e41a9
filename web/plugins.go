package web

import (
	"context"
	"net/http"
	"path/filepath"
	"regexp"

	"github.com/go-chi/chi/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// Plugins manages the installed plugins: the plugin registry
// (plugins/registry) as the API sees it, an interface so that this package
// does not depend on how plugins are loaded and tests can use a fake. Errors are *core.Error values; their code picks the HTTP status.
//
// Install and Enable may return both an Info (with Status "failed" and
// Error set) and an EUNAVAIL error: the plugin is installed or enabled
// but did not start. The API then answers 503 with the error body; the
// plugin shows as failed in the list.
type Plugins interface {
	// List returns every plugin, built-ins included, sorted by id.
	List(ctx context.Context) []pluginapi.Info
	// Get returns one plugin (ENOTFOUND when it is not installed).
	Get(ctx context.Context, id string) (pluginapi.Info, error)
	// Preview describes what installing the plugin folder at path would
	// do (EINVALID for a bad manifest, a checksum mismatch or a path that
	// is not a folder).
	Preview(ctx context.Context, path string) (pluginapi.Preview, error)
	// Install installs (and unless req.Disabled enables) the plugin
	// folder at req.Path: EINVALID without consent, ECONFLICT when that
	// id and version are installed already, for an older version without
	// req.AllowDowngrade, or for a pinned plugin. An upgrade keeps the
	// version it replaces to roll back to.
	Install(ctx context.Context, req pluginapi.InstallRequest) (pluginapi.Info, error)
	// Rollback switches a plugin to the version kept before the current
	// one (ECONFLICT when there is none, it is pinned, or its folder no
	// longer matches its record; EUNAVAIL when it did not start and the
	// current one runs again).
	Rollback(ctx context.Context, id string) (pluginapi.Info, error)
	// Pin holds a plugin at version, the installed one; "" unpins
	// (EINVALID for a version that is not semver, ECONFLICT for another
	// version than the installed one).
	Pin(ctx context.Context, id, version string) (pluginapi.Info, error)
	// Enable loads a plugin and makes its tools callable.
	Enable(ctx context.Context, id string) (pluginapi.Info, error)
	// Disable unloads a plugin; it stays installed.
	Disable(ctx context.Context, id string) (pluginapi.Info, error)
	// Remove disables and deletes a plugin (EINVALID for a built-in).
	Remove(ctx context.Context, id string) error
}

// pluginRoutes registers the /plugins routes. They are mounted even when
// Options.Plugins is nil, so that the API has one shape (and one spec);
// they then answer 404 with errNoPlugins.
func (s *server) pluginRoutes(r chi.Router) {
	r.Get("/plugins", s.pluginAPI(s.listPlugins))
	r.Post("/plugins", s.pluginAPI(s.installPlugin))
	r.Post("/plugins/preview", s.pluginAPI(s.previewPlugin))
	r.Get("/plugins/{id}", s.pluginAPI(s.getPlugin))
	r.Delete("/plugins/{id}", s.pluginAPI(s.removePlugin))
	r.Post("/plugins/{id}/enable", s.pluginAPI(s.enablePlugin))
	r.Post("/plugins/{id}/disable", s.pluginAPI(s.disablePlugin))
	r.Post("/plugins/{id}/rollback", s.pluginAPI(s.rollbackPlugin))
	r.Post("/plugins/{id}/pin", s.pluginAPI(s.pinPlugin))
	r.Delete("/plugins/{id}/pin", s.pluginAPI(s.unpinPlugin))
}

// noPluginsMessage is the error of every plugin route on a server without
// a plugin registry.
const noPluginsMessage = "plugins are not available on this server"

// pluginFunc is an apiFunc that uses the plugin registry.
type pluginFunc func(p Plugins, w http.ResponseWriter, r *http.Request) (int, any, error)

// pluginAPI adapts a pluginFunc; without a registry it answers 404.
func (s *server) pluginAPI(f pluginFunc) http.HandlerFunc {
	return s.api(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		if s.opts.Plugins == nil {
			return 0, nil, errorf(core.ENOTFOUND, noPluginsMessage)
		}
		return f(s.opts.Plugins, w, r)
	})
}

func (s *server) listPlugins(p Plugins, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	list := p.List(r.Context())
	if list == nil {
		list = []pluginapi.Info{}
	}
	return http.StatusOK, map[string]any{"plugins": list}, nil
}

func (s *server) getPlugin(p Plugins, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	info, err := p.Get(r.Context(), id(r))
	return http.StatusOK, info, err
}

func (s *server) previewPlugin(p Plugins, w http.ResponseWriter, r *http.Request) (int, any, error) {
	req, err := decodeBody(w, r, true, parsePreviewRequest)
	if err != nil {
		return 0, nil, err
	}
	pv, err := p.Preview(r.Context(), req.Path)
	return http.StatusOK, pv, err
}

// installPlugin answers 201 with the installed plugin, or 503 when it was
// installed but failed to start (the registry's EUNAVAIL).
func (s *server) installPlugin(p Plugins, w http.ResponseWriter, r *http.Request) (int, any, error) {
	req, err := decodeBody(w, r, true, parseInstallRequest)
	if err != nil {
		return 0, nil, err
	}
	info, err := p.Install(r.Context(), req)
	return http.StatusCreated, info, err
}

func (s *server) enablePlugin(p Plugins, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	info, err := p.Enable(r.Context(), id(r))
	return http.StatusOK, info, err
}

func (s *server) disablePlugin(p Plugins, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	info, err := p.Disable(r.Context(), id(r))
	return http.StatusOK, info, err
}

// rollbackPlugin answers 200 with the plugin at its previous version, or
// 503 when that did not start (the current version runs again).
func (s *server) rollbackPlugin(p Plugins, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	info, err := p.Rollback(r.Context(), id(r))
	return http.StatusOK, info, err
}

func (s *server) pinPlugin(p Plugins, w http.ResponseWriter, r *http.Request) (int, any, error) {
	req, err := decodeBody(w, r, true, parsePinRequest)
	if err != nil {
		return 0, nil, err
	}
	info, err := p.Pin(r.Context(), id(r), req.Version)
	return http.StatusOK, info, err
}

func (s *server) unpinPlugin(p Plugins, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	info, err := p.Pin(r.Context(), id(r), "")
	return http.StatusOK, info, err
}

// parsePinRequest parses the body of POST /plugins/{id}/pin; whether the
// version is one is the registry's to say.
func parsePinRequest(b []byte) (pluginapi.PinRequest, error) {
	var req pluginapi.PinRequest
	if err := unmarshalStrict(b, &req); err != nil {
		return pluginapi.PinRequest{}, err
	}
	if req.Version == "" {
		return pluginapi.PinRequest{}, errorf(core.EINVALID, "field \"version\" is required: the installed version to pin the plugin at (DELETE /plugins/{id}/pin unpins)")
	}
	return req, nil
}

func (s *server) removePlugin(p Plugins, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	return http.StatusNoContent, nil, p.Remove(r.Context(), id(r))
}

// previewRequest is the body of POST /plugins/preview.
type previewRequest struct {
	Path string `json:"path"`
}

// parsePreviewRequest parses the body of POST /plugins/preview.
func parsePreviewRequest(b []byte) (previewRequest, error) {
	var req previewRequest
	if err := unmarshalStrict(b, &req); err != nil {
		return previewRequest{}, err
	}
	if err := checkPluginPath(req.Path); err != nil {
		return previewRequest{}, err
	}
	return req, nil
}

// reSHA256 matches a sha256 digest as manifests write it.
var reSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// parseInstallRequest parses the body of POST /plugins. Consent is the
// registry's to check, so that its refusal reads the same everywhere.
func parseInstallRequest(b []byte) (pluginapi.InstallRequest, error) {
	var req pluginapi.InstallRequest
	if err := unmarshalStrict(b, &req); err != nil {
		return pluginapi.InstallRequest{}, err
	}
	if err := checkPluginPath(req.Path); err != nil {
		return pluginapi.InstallRequest{}, err
	}
	if req.SHA256 != "" && !reSHA256.MatchString(req.SHA256) {
		return pluginapi.InstallRequest{}, errorf(core.EINVALID, "field \"sha256\" must be 64 lowercase hexadecimal digits, got %q", clip(req.SHA256, 80))
	}
	return req, nil
}

// checkPluginPath requires the path of a plugin folder to be absolute: it
// names a folder on the server's machine, and a relative one would depend
// on the server's working directory.
func checkPluginPath(path string) error {
	switch {
	case path == "":
		return errorf(core.EINVALID, "field \"path\" is required: the absolute path of a plugin folder on the server's machine")
	case !filepath.IsAbs(path):
		return errorf(core.EINVALID, "field \"path\" must be an absolute path on the server's machine, got %q", clip(path, 200))
	}
	return nil
}
