package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// Marketplace is the marketplace client (marketplace.Client) as the API
// sees it. Errors are *core.Error values; their code picks the status.
type Marketplace interface {
	// List returns the marketplaces added, sorted by name.
	List() []pluginapi.Marketplace
	// Get returns one (ENOTFOUND when it is not added).
	Get(name string) (pluginapi.Marketplace, error)
	// Add adds a marketplace after verifying its index (EINVALID for a
	// bad request or an index that does not verify, ECONFLICT for a name
	// in use).
	Add(ctx context.Context, req pluginapi.AddMarketplaceRequest) (pluginapi.Marketplace, error)
	// Refresh fetches and verifies a marketplace's index again; a
	// refusal keeps the last verified index.
	Refresh(ctx context.Context, name string) (pluginapi.Marketplace, error)
	// Remove forgets a marketplace; installed plugins stay.
	Remove(ctx context.Context, name string) error
	// Search ranks every marketplace's plugins for a text.
	Search(ctx context.Context, q string) []pluginapi.MarketplacePlugin
	// Plugin describes one plugin with its versions.
	Plugin(ctx context.Context, name, marketplace string) (pluginapi.MarketplacePlugin, error)
	// Preview downloads and verifies a version and says what installing
	// it would do; progress hears of the download.
	Preview(ctx context.Context, req pluginapi.MarketplaceInstallRequest, progress func(done, total int64)) (pluginapi.MarketplacePreview, error)
	// Install installs a version with the consent req carries.
	Install(ctx context.Context, req pluginapi.MarketplaceInstallRequest) (pluginapi.Info, error)
	// Outdated lists installed plugins with a newer version offered.
	Outdated(ctx context.Context) []pluginapi.Outdated
	// UpgradeRequest names the version upgrading a plugin installs.
	UpgradeRequest(ctx context.Context, id string) (pluginapi.MarketplaceInstallRequest, error)
	// InstallLocked reproduces the installation a lock file records
	// (with dryRun, says what it would do). A failure is returned with
	// the results so far, which the answer carries with the error.
	InstallLocked(ctx context.Context, lock *pluginapi.Lock, consent, dryRun bool) ([]pluginapi.LockedResult, error)
}

// marketplaceRoutes registers the /marketplaces and /marketplace routes;
// without Options.Marketplace they answer 404.
func (s *server) marketplaceRoutes(r chi.Router) {
	r.Get("/marketplaces", s.marketplaceAPI(s.listMarketplaces))
	r.Post("/marketplaces", s.marketplaceAPI(s.addMarketplace))
	r.Get("/marketplaces/{name}", s.marketplaceAPI(s.getMarketplace))
	r.Delete("/marketplaces/{name}", s.marketplaceAPI(s.removeMarketplace))
	r.Post("/marketplaces/{name}/refresh", s.marketplaceAPI(s.refreshMarketplace))
	r.Get("/marketplace/plugins", s.marketplaceAPI(s.searchMarketplace))
	r.Get("/marketplace/plugins/{name}", s.marketplaceAPI(s.getMarketplacePlugin))
	r.Get("/marketplace/outdated", s.marketplaceAPI(s.outdatedPlugins))
	r.Post("/marketplace/preview", s.marketplacePreview)
	r.Post("/marketplace/install", s.marketplaceAPI(s.marketplaceInstall))
	r.Post("/marketplace/install-locked", s.installLocked)
	r.Get("/plugins/{id}/upgrade", s.marketplaceAPI(s.upgradeRequest))
}

const noMarketplaceMessage = "the marketplace is not available on this server"

type marketplaceFunc func(m Marketplace, w http.ResponseWriter, r *http.Request) (int, any, error)

func (s *server) marketplaceAPI(f marketplaceFunc) http.HandlerFunc {
	return s.api(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		if s.opts.Marketplace == nil {
			return 0, nil, errorf(core.ENOTFOUND, noMarketplaceMessage)
		}
		return f(s.opts.Marketplace, w, r)
	})
}

func (s *server) listMarketplaces(m Marketplace, _ http.ResponseWriter, _ *http.Request) (int, any, error) {
	return http.StatusOK, map[string]any{"marketplaces": m.List()}, nil
}

func (s *server) getMarketplace(m Marketplace, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	mp, err := m.Get(chi.URLParam(r, "name"))
	return http.StatusOK, mp, err
}

func (s *server) addMarketplace(m Marketplace, w http.ResponseWriter, r *http.Request) (int, any, error) {
	req, err := decodeBody(w, r, true, func(b []byte) (pluginapi.AddMarketplaceRequest, error) {
		var req pluginapi.AddMarketplaceRequest
		if err := unmarshalStrict(b, &req); err != nil {
			return req, err
		}
		if req.URL == "" {
			return req, errorf(core.EINVALID, "field \"url\" is required: where the marketplace's files are")
		}
		return req, nil
	})
	if err != nil {
		return 0, nil, err
	}
	mp, err := m.Add(r.Context(), req)
	return http.StatusCreated, mp, err
}

func (s *server) removeMarketplace(m Marketplace, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	return http.StatusNoContent, nil, m.Remove(r.Context(), chi.URLParam(r, "name"))
}

// refreshMarketplace answers the marketplace; a refusal is the error,
// and the marketplace keeps its last verified index.
func (s *server) refreshMarketplace(m Marketplace, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	mp, err := m.Refresh(r.Context(), chi.URLParam(r, "name"))
	return http.StatusOK, mp, err
}

func (s *server) searchMarketplace(m Marketplace, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	return http.StatusOK, map[string]any{"plugins": m.Search(r.Context(), r.URL.Query().Get("q"))}, nil
}

func (s *server) getMarketplacePlugin(m Marketplace, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	p, err := m.Plugin(r.Context(), chi.URLParam(r, "name"), r.URL.Query().Get("marketplace"))
	return http.StatusOK, p, err
}

func (s *server) outdatedPlugins(m Marketplace, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	return http.StatusOK, map[string]any{"plugins": m.Outdated(r.Context())}, nil
}

func (s *server) upgradeRequest(m Marketplace, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	req, err := m.UpgradeRequest(r.Context(), id(r))
	return http.StatusOK, req, err
}

func parseMarketplaceInstall(b []byte) (pluginapi.MarketplaceInstallRequest, error) {
	var req pluginapi.MarketplaceInstallRequest
	if err := unmarshalStrict(b, &req); err != nil {
		return req, err
	}
	switch {
	case req.MCPRegistry != nil && (req.Name != "" || req.Version != "" || req.Marketplace != ""):
		return req, errorf(core.EINVALID, "with field \"mcp_registry\", leave \"name\", \"version\" and \"marketplace\" out: it names the server to install")
	case req.MCPRegistry == nil && req.Name == "":
		return req, errorf(core.EINVALID, "field \"name\" is required: the plugin to install (or \"mcp_registry\": a server.json to install)")
	}
	if req.Digest != "" && !reSHA256.MatchString(req.Digest) {
		return req, errorf(core.EINVALID, "field \"digest\" must be 64 lowercase hexadecimal digits, got %q", clip(req.Digest, 80))
	}
	return req, nil
}

func (s *server) marketplaceInstall(m Marketplace, w http.ResponseWriter, r *http.Request) (int, any, error) {
	req, err := decodeBody(w, r, true, parseMarketplaceInstall)
	if err != nil {
		return 0, nil, err
	}
	info, err := m.Install(r.Context(), req)
	return http.StatusCreated, info, err
}

// ndjson is the media type of a preview that reports its download's
// progress: one JSON object per line, {"progress":{...}} while the
// archive downloads, then {"preview":{...}} or {"error":{...}}.
const ndjson = "application/x-ndjson"

// progressEvery is the least time between two progress lines.
const progressEvery = 100 * time.Millisecond

// marketplacePreview answers the preview as JSON, or, when the client
// accepts application/x-ndjson, as a stream of progress lines ending
// with the preview or the error.
func (s *server) marketplacePreview(w http.ResponseWriter, r *http.Request) {
	if s.opts.Marketplace == nil {
		s.writeError(w, r, errorf(core.ENOTFOUND, noMarketplaceMessage))
		return
	}
	req, err := decodeBody(w, r, true, parseMarketplaceInstall)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !strings.Contains(r.Header.Get("Accept"), ndjson) {
		pv, err := s.opts.Marketplace.Preview(r.Context(), req, nil)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeJSON(w, http.StatusOK, pv)
		return
	}
	w.Header().Set("Content-Type", ndjson)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	// A client that stops reading must not hold the download (and the
	// marketplace's other operations) up: a write that blocks for the
	// stream write timeout ends the preview.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	rc := http.NewResponseController(w)
	var mu sync.Mutex
	gone := false
	line := func(v any) {
		mu.Lock()
		defer mu.Unlock()
		b, err := json.Marshal(v)
		if err != nil || gone {
			return
		}
		_ = rc.SetWriteDeadline(time.Now().Add(s.opts.StreamWriteTimeout))
		_, err = w.Write(append(s.redactor.RedactBytes(b), '\n'))
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			gone = true
			cancel()
		}
	}
	var last time.Time
	pv, err := s.opts.Marketplace.Preview(ctx, req, func(done, total int64) {
		if now := time.Now(); done == total || now.Sub(last) >= progressEvery {
			last = now
			line(map[string]any{"progress": pluginapi.Progress{Done: done, Total: total}})
		}
	})
	if err != nil {
		code, message := classify(err)
		if code == core.EINTERNAL {
			s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		line(errorBody{Error: errorDetail{Code: code, Message: message}})
		return
	}
	line(map[string]any{"preview": pv})
}

// lockedRequest is the body of POST /marketplace/install-locked, the
// lock kept raw for pluginapi.ParseLock, the one reader of lock files.
type lockedRequest struct {
	Lock    json.RawMessage `json:"lock"`
	Consent bool            `json:"consent"`
	DryRun  bool            `json:"dry_run"`
}

// lockedFailure is the answer of a locked install that failed part way:
// the error, with the status its code picks, and what was done before
// it (the plugins installed stay installed).
type lockedFailure struct {
	Error   errorDetail              `json:"error"`
	Plugins []pluginapi.LockedResult `json:"plugins"`
}

// installLocked answers the results. A failure answers the error with
// the results so far (lockedFailure): the plugins installed before it
// stay installed, and the caller is told which.
func (s *server) installLocked(w http.ResponseWriter, r *http.Request) {
	if s.opts.Marketplace == nil {
		s.writeError(w, r, errorf(core.ENOTFOUND, noMarketplaceMessage))
		return
	}
	req, err := decodeBody(w, r, true, func(b []byte) (lockedRequest, error) {
		var req lockedRequest
		if err := unmarshalStrict(b, &req); err != nil {
			return req, err
		}
		if len(req.Lock) == 0 {
			return req, errorf(core.EINVALID, "field \"lock\" is required: the content of a plugins.lock file")
		}
		return req, nil
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	lock, err := pluginapi.ParseLock(req.Lock)
	if err != nil {
		s.writeError(w, r, errorf(core.EINVALID, "%s", err))
		return
	}
	results, err := s.opts.Marketplace.InstallLocked(r.Context(), lock, req.Consent, req.DryRun)
	if results == nil {
		results = []pluginapi.LockedResult{}
	}
	if err != nil {
		code, message := classify(err)
		status := statusOf(code)
		if status == http.StatusInternalServerError {
			s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		s.writeJSON(w, status, lockedFailure{Error: errorDetail{Code: code, Message: message}, Plugins: results})
		return
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"plugins": results})
}
