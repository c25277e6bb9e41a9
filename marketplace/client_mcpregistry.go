package marketplace

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/marketplace/mcpregistry"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// An MCP Registry server.json (MarketplaceInstallRequest.MCPRegistry) is
// converted into an "mcp-servers" bundle (mcpregistry.Convert: the
// package run at its exact version, an MCPB file checked against its
// fileSha256, a package at "latest", unversioned or at a range refused)
// and installed through the same preview, consent and install as a
// marketplace plugin. Nothing in the registry is signed: the user trusts
// the file or the registry it came from, and the preview says so. The
// installed plugin records no source: no marketplace published it, and a
// lock file cannot fetch it again.

// stageMCP reads the server.json req.MCPRegistry names (the document
// itself, or a version of a server of a registry), converts it into a
// new folder of Dir/.staging and describes it with the registry's
// preview, what was checked and what was passed over. Errors are
// EINVALID for a bad request or a server.json Kiln refuses (with the
// reason), ENOTFOUND for a server or version the registry does not have,
// EUNAVAIL for a registry that cannot be reached.
func (c *Client) stageMCP(ctx context.Context, req pluginapi.MarketplaceInstallRequest) (*staged, error) {
	src := req.MCPRegistry
	if req.Name != "" || req.Version != "" || req.Marketplace != "" {
		return nil, core.Errorf(core.EINVALID, "mcp_registry names the server to install: leave name, version and marketplace out")
	}
	var (
		s        *mcpregistry.Server
		verified []string
		warnings []string
		err      error
	)
	switch {
	case len(src.ServerJSON) > 0 && src.Registry == "" && src.Name == "" && src.Version == "":
		if s, err = mcpregistry.Parse(src.ServerJSON); err != nil {
			return nil, err
		}
		verified = append(verified, fmt.Sprintf("server.json of %s %s, as you gave it: unsigned, trusted as you trust the file", s.Name, s.Version))
	case len(src.ServerJSON) == 0 && src.Registry != "" && src.Name != "":
		if err := checkWebURL(src.Registry); err != nil {
			return nil, core.Errorf(core.EINVALID, "mcp registry %s: %v", redactURL(src.Registry), err)
		}
		rc := &mcpregistry.Client{Base: src.Registry, HTTP: c.webClient()}
		e, err := rc.Get(ctx, src.Name, src.Version)
		if err != nil {
			return nil, err
		}
		if err := e.Check(); err != nil {
			return nil, err
		}
		s = e.Server
		verified = append(verified, fmt.Sprintf("server.json of %s %s from the MCP registry %s: unsigned, trusted as you trust that registry", s.Name, s.Version, redactURL(src.Registry)))
		if e.Status == "deprecated" {
			warnings = append(warnings, strings.TrimSuffix(fmt.Sprintf("the registry marks %s %s deprecated: %s", s.Name, s.Version, e.StatusMessage), ": "))
		}
	default:
		return nil, core.Errorf(core.EINVALID, "mcp_registry: give server_json (a server.json document), or registry and name (with version, else the registry's latest)")
	}
	staging := filepath.Join(c.cfg.Dir, stagingDir)
	if err := os.MkdirAll(staging, 0o700); err != nil {
		return nil, err
	}
	out, err := os.MkdirTemp(staging, "mcp-")
	if err != nil {
		return nil, err
	}
	res, err := mcpregistry.Convert(ctx, s, out, mcpregistry.Options{Pick: src.Pick, Fetch: c.fetchMCPB})
	if err != nil {
		os.RemoveAll(out)
		return nil, err
	}
	pv, err := c.cfg.Plugins.Preview(ctx, out)
	if err != nil {
		os.RemoveAll(out)
		return nil, err
	}
	if pv.ID != res.ID || pv.Version != res.Version {
		os.RemoveAll(out)
		return nil, core.Errorf(core.EINVALID, "mcp server %s converted to plugin %s %s: refused", s.Name, pv.ID, pv.Version)
	}
	verified = append(verified, mcpPicked(s, res.Picked), "converted to a bundle with folder digest "+res.Digest)
	return &staged{
		version: &Version{Version: res.Version, Digest: res.Digest},
		dir:     out,
		preview: pluginapi.MarketplacePreview{Preview: pv, Digest: res.Digest, Verified: verified,
			Skipped: res.Skipped, Warnings: append(warnings, res.Warnings...)},
	}, nil
}

// mcpPicked says what pins the package or remote picked ("packages[0]").
func mcpPicked(s *mcpregistry.Server, picked string) string {
	kind, rest, _ := strings.Cut(picked, "[")
	i, err := strconv.Atoi(strings.TrimSuffix(rest, "]"))
	switch {
	case err != nil:
		return picked
	case kind == "remotes" && i < len(s.Remotes):
		return fmt.Sprintf("%s: the %s server at %s, which runs elsewhere (nothing here to pin)", picked, s.Remotes[i].Type, s.Remotes[i].URL)
	case kind != "packages" || i >= len(s.Packages):
		return picked
	}
	p := s.Packages[i]
	line := fmt.Sprintf("%s: %s package %s", picked, p.RegistryType, p.Identifier)
	if p.Version != "" {
		line += " pinned to version " + p.Version
	}
	if p.FileSHA256 != "" {
		line += ", its file's sha256 " + p.FileSHA256 + " checked on download"
	}
	return line
}

// fetchMCPB downloads an MCPB file for mcpregistry.Convert, which checks
// its sha256: from an https:// URL, or an http:// one on this machine.
func (c *Client) fetchMCPB(ctx context.Context, raw string) (io.ReadCloser, error) {
	if err := checkWebURL(raw); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.webClient().Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", redactURL(raw), resp.Status)
	}
	return resp.Body, nil
}

// webClient is the client's HTTP client, following redirects only as a
// marketplace's fetches do (checkRedirect).
func (c *Client) webClient() *http.Client {
	hc := *c.cfg.HTTP
	hc.CheckRedirect = checkRedirect
	return &hc
}

// checkWebURL refuses a URL other than https://, or http:// of this
// machine, or one carrying credentials.
func checkWebURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a URL", raw)
	case u.User != nil:
		return fmt.Errorf("%s: no credentials in the URL", u.Redacted())
	case u.Scheme == "https" && u.Hostname() != "":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%s: want an https:// URL (http:// only to this machine)", u.Redacted())
}
