package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/kilnhq/kiln/plugins/pluginapi"
)

type (
	// Marketplace is a marketplace the server was told about.
	Marketplace = pluginapi.Marketplace
	// AddMarketplaceRequest adds a marketplace with the keys to trust.
	AddMarketplaceRequest = pluginapi.AddMarketplaceRequest
	// MarketplacePlugin is a plugin a marketplace offers.
	MarketplacePlugin = pluginapi.MarketplacePlugin
	// MarketplaceVersion is one published version of a plugin.
	MarketplaceVersion = pluginapi.MarketplaceVersion
	// MarketplaceInstallRequest names a plugin version to preview or
	// install.
	MarketplaceInstallRequest = pluginapi.MarketplaceInstallRequest
	// MCPRegistrySource names an MCP Registry server.json to preview or
	// install instead (MarketplaceInstallRequest.MCPRegistry).
	MCPRegistrySource = pluginapi.MCPRegistrySource
	// MarketplacePreview is what installing a version would do, after
	// its archive was downloaded and verified.
	MarketplacePreview = pluginapi.MarketplacePreview
	// OutdatedPlugin is an installed plugin with a newer version offered.
	OutdatedPlugin = pluginapi.Outdated
)

// Marketplaces returns the marketplaces added, sorted by name.
func (c *Client) Marketplaces(ctx context.Context) ([]Marketplace, error) {
	var out struct {
		Marketplaces []Marketplace `json:"marketplaces"`
	}
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/marketplaces", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Marketplaces, nil
}

// AddMarketplace adds a marketplace; the server verifies its index first
// and refuses one that does not verify.
func (c *Client) AddMarketplace(ctx context.Context, req AddMarketplaceRequest) (*Marketplace, error) {
	var out Marketplace
	if err := c.do(ctx, http.MethodPost, apiPrefix+"/marketplaces", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RefreshMarketplace fetches and verifies a marketplace's index again. A
// refusal (rollback, freeze, an inconsistent log) is the error; the
// server keeps the last verified index.
func (c *Client) RefreshMarketplace(ctx context.Context, name string) (*Marketplace, error) {
	p, err := pathID("marketplace", name)
	if err != nil {
		return nil, err
	}
	var out Marketplace
	if err := c.do(ctx, http.MethodPost, apiPrefix+"/marketplaces/"+p+"/refresh", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RemoveMarketplace forgets a marketplace; installed plugins stay.
func (c *Client) RemoveMarketplace(ctx context.Context, name string) error {
	p, err := pathID("marketplace", name)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, apiPrefix+"/marketplaces/"+p, nil, nil, nil)
}

// SearchPlugins ranks the plugins of every marketplace for text q (every
// plugin for "").
func (c *Client) SearchPlugins(ctx context.Context, q string) ([]MarketplacePlugin, error) {
	var out struct {
		Plugins []MarketplacePlugin `json:"plugins"`
	}
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/marketplace/plugins", url.Values{"q": {q}}, nil, &out); err != nil {
		return nil, err
	}
	return out.Plugins, nil
}

// MarketplacePluginInfo describes a plugin with all its versions;
// marketplace picks one when several offer the name.
func (c *Client) MarketplacePluginInfo(ctx context.Context, name, marketplace string) (*MarketplacePlugin, error) {
	p, err := pathID("plugin", name)
	if err != nil {
		return nil, err
	}
	var q url.Values
	if marketplace != "" {
		q = url.Values{"marketplace": {marketplace}}
	}
	var out MarketplacePlugin
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/marketplace/plugins/"+p, q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// OutdatedPlugins lists installed plugins with a newer version offered.
func (c *Client) OutdatedPlugins(ctx context.Context) ([]OutdatedPlugin, error) {
	var out struct {
		Plugins []OutdatedPlugin `json:"plugins"`
	}
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/marketplace/outdated", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Plugins, nil
}

// PluginUpgrade names the version upgrading an installed plugin would
// install; a pinned or up-to-date plugin is a conflict error.
func (c *Client) PluginUpgrade(ctx context.Context, id string) (*MarketplaceInstallRequest, error) {
	p, err := pathID("plugin", id)
	if err != nil {
		return nil, err
	}
	var out MarketplaceInstallRequest
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/plugins/"+p+"/upgrade", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PreviewMarketplacePlugin has the server download and verify a version
// and say what installing it would do. progress, when not nil, hears of
// the download (done and total bytes) as the server reports it.
func (c *Client) PreviewMarketplacePlugin(ctx context.Context, req MarketplaceInstallRequest, progress func(done, total int64)) (*MarketplacePreview, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hr, err := c.newRequest(ctx, http.MethodPost, apiPrefix+"/marketplace/preview", nil, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/x-ndjson")
	resp, err := c.http.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, responseError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var line struct {
			Progress *pluginapi.Progress `json:"progress"`
			Preview  *MarketplacePreview `json:"preview"`
			Error    *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return nil, fmt.Errorf("preview: decoding response: %w", err)
		}
		switch {
		case line.Progress != nil:
			if progress != nil {
				progress(line.Progress.Done, line.Progress.Total)
			}
		case line.Preview != nil:
			return line.Preview, nil
		case line.Error != nil:
			return nil, &Error{Status: statusOfCode(line.Error.Code), Code: line.Error.Code, Message: line.Error.Message}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("preview: the server's answer ended before the preview")
}

// statusOfCode is the HTTP status the server gives an error code, for an
// error that arrives inside a stream whose status was already 200.
func statusOfCode(code string) int {
	switch code {
	case "invalid", "invalid_json":
		return http.StatusBadRequest
	case "not_found":
		return http.StatusNotFound
	case "conflict":
		return http.StatusConflict
	case "forbidden":
		return http.StatusForbidden
	case "unavailable":
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// InstallMarketplacePlugin installs a version with the consent req
// carries (req.Digest binds it to the previewed bytes). When the plugin
// is installed but fails to start, the error is unavailable.
func (c *Client) InstallMarketplacePlugin(ctx context.Context, req MarketplaceInstallRequest) (*PluginInfo, error) {
	var out PluginInfo
	if err := c.do(ctx, http.MethodPost, apiPrefix+"/marketplace/install", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// LockedResult is what a locked install did, or would do, for a plugin.
type LockedResult = pluginapi.LockedResult

// InstallLocked reproduces the installation a lock file records (the
// bytes of a plugins.lock). With dryRun the server downloads and
// verifies every plugin and says what it would install and what each
// asks for; then call again with consent. A plugin the lock cannot fetch
// (installed from a folder) is skipped, with the reason in its result.
// When it fails part way, it returns the results so far with the error:
// the plugins installed before the failure stay installed.
func (c *Client) InstallLocked(ctx context.Context, lock []byte, consent, dryRun bool) ([]LockedResult, error) {
	b, err := json.Marshal(struct {
		Lock    json.RawMessage `json:"lock"`
		Consent bool            `json:"consent,omitempty"`
		DryRun  bool            `json:"dry_run,omitempty"`
	}{json.RawMessage(lock), consent, dryRun})
	if err != nil {
		return nil, err
	}
	hr, err := c.newRequest(ctx, http.MethodPost, apiPrefix+"/marketplace/install-locked", nil, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	var out struct {
		Plugins []LockedResult `json:"plugins"`
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		resp.Body = io.NopCloser(bytes.NewReader(body))
		_ = json.Unmarshal(body, &out) // the results so far, when the server sent them
		return out.Plugins, responseError(resp)
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("install-locked: decoding response: %w", err)
	}
	return out.Plugins, nil
}
