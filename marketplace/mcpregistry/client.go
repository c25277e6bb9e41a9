package mcpregistry

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
)

// DefaultBase is the official MCP Registry.
const DefaultBase = "https://registry.modelcontextprotocol.io"

// MaxResponseSize bounds a registry's answer.
const MaxResponseSize = 16 << 20

// Client reads an MCP Registry, or a mirror of one, through its API
// (version v0.1): GET /v0.1/servers and
// /v0.1/servers/{name}/versions/{version}. It is safe for concurrent
// use.
type Client struct {
	// Base is the registry's address ("https://registry.example.com");
	// "" is DefaultBase.
	Base string
	// HTTP sends the requests; nil is a client with a 30-second timeout.
	HTTP *http.Client
}

// Entry is one server version as a registry serves it: the server.json
// and what the registry says of it.
type Entry struct {
	Server *Server
	// Status is "active", "deprecated" or "deleted" ("" when the registry
	// does not say); StatusMessage says why.
	Status        string
	StatusMessage string
	PublishedAt   time.Time
	UpdatedAt     time.Time
	IsLatest      bool
}

// Check refuses a version its publisher deleted: EINVALID with their
// reason. A deprecated version passes; its Status says so.
func (e Entry) Check() error {
	if e.Status == "deleted" {
		msg := "mcp server %s %s was deleted from the registry"
		if e.StatusMessage != "" {
			return core.Errorf(core.EINVALID, msg+" (%s): refused", e.Server.Name, e.Server.Version, e.StatusMessage)
		}
		return core.Errorf(core.EINVALID, msg+": refused", e.Server.Name, e.Server.Version)
	}
	return nil
}

// Page is one page of search results.
type Page struct {
	Servers []Entry
	// NextCursor asks for the next page; "" when this is the last.
	NextCursor string
	// Problems name the entries of the page that were not valid
	// server.json documents and were left out, and why.
	Problems []string
}

// SearchOptions narrow a search.
type SearchOptions struct {
	// Cursor continues from a previous page's NextCursor.
	Cursor string
	// Limit asks for at most this many servers (0: the registry's
	// default).
	Limit int
	// Version is "latest" for the latest version of each server, an
	// exact version, or "" for every version.
	Version string
}

// Search lists the servers whose name contains text (all of them for
// ""). A registry that cannot be reached, or answers with an error, is
// EUNAVAIL; an answer that is not the API's, EINVALID.
func (c *Client) Search(ctx context.Context, text string, opts SearchOptions) (Page, error) {
	q := url.Values{}
	if text != "" {
		q.Set("search", text)
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Version != "" {
		q.Set("version", opts.Version)
	}
	var list struct {
		Servers  []json.RawMessage `json:"servers"`
		Metadata struct {
			NextCursor string `json:"nextCursor"`
		} `json:"metadata"`
	}
	if err := c.get(ctx, "/v0.1/servers", q, &list); err != nil {
		return Page{}, err
	}
	page := Page{NextCursor: list.Metadata.NextCursor}
	for i, raw := range list.Servers {
		e, err := entry(raw)
		if err != nil {
			page.Problems = append(page.Problems, fmt.Sprintf("servers[%d]: %v", i, core.ErrorMessage(err)))
			continue
		}
		page.Servers = append(page.Servers, e)
	}
	return page, nil
}

// Get returns version of the server named name ("latest" or "" for its
// latest). ENOTFOUND when the registry has no such server or version;
// otherwise as Search.
func (c *Client) Get(ctx context.Context, name, version string) (Entry, error) {
	var raw json.RawMessage
	p := "/v0.1/servers/" + url.PathEscape(name) + "/versions/" + url.PathEscape(cmp.Or(version, "latest"))
	if err := c.get(ctx, p, nil, &raw); err != nil {
		if core.ErrorCode(err) == core.ENOTFOUND {
			return Entry{}, core.Errorf(core.ENOTFOUND, "mcp registry %s has no server %s at version %s", c.base(), name, cmp.Or(version, "latest"))
		}
		return Entry{}, err
	}
	e, err := entry(raw)
	if err != nil {
		return Entry{}, core.Errorf(core.EINVALID, "mcp registry %s: server %s: %s", c.base(), name, core.ErrorMessage(err))
	}
	if e.Server.Name != name || version != "" && version != "latest" && e.Server.Version != version {
		return Entry{}, core.Errorf(core.EINVALID, "mcp registry %s answered %s %s when asked for %s %s", c.base(), e.Server.Name, e.Server.Version, name, cmp.Or(version, "latest"))
	}
	return e, nil
}

// entry reads one ServerResponse: {"server": {...}, "_meta": {...}}.
func entry(raw json.RawMessage) (Entry, error) {
	var doc struct {
		Server json.RawMessage `json:"server"`
		Meta   struct {
			Official struct {
				Status        string    `json:"status"`
				StatusMessage string    `json:"statusMessage"`
				PublishedAt   time.Time `json:"publishedAt"`
				UpdatedAt     time.Time `json:"updatedAt"`
				IsLatest      bool      `json:"isLatest"`
			} `json:"io.modelcontextprotocol.registry/official"`
		} `json:"_meta"`
	}
	if err := decode(raw, &doc); err != nil {
		return Entry{}, err
	}
	if len(doc.Server) == 0 {
		return Entry{}, errors.New("no server")
	}
	s, err := Parse(doc.Server)
	if err != nil {
		return Entry{}, err
	}
	o := doc.Meta.Official
	return Entry{Server: s, Status: o.Status, StatusMessage: o.StatusMessage, PublishedAt: o.PublishedAt, UpdatedAt: o.UpdatedAt, IsLatest: o.IsLatest}, nil
}

func (c *Client) base() string { return strings.TrimSuffix(cmp.Or(c.Base, DefaultBase), "/") }

var defaultHTTP = &http.Client{Timeout: 30 * time.Second}

// get GETs the API path p with query q and decodes the JSON answer into v.
func (c *Client) get(ctx context.Context, p string, q url.Values, v any) error {
	u := c.base() + p
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return core.Errorf(core.EINVALID, "mcp registry %s: %v", c.base(), err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := cmp.Or(c.HTTP, defaultHTTP).Do(req)
	if err != nil {
		return core.Errorf(core.EUNAVAIL, "mcp registry %s: %v", c.base(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseSize+1))
	if err != nil {
		return core.Errorf(core.EUNAVAIL, "mcp registry %s: %v", c.base(), err)
	}
	if len(body) > MaxResponseSize {
		return core.Errorf(core.EINVALID, "mcp registry %s: the answer is larger than %d MiB", c.base(), MaxResponseSize>>20)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		json.Unmarshal(body, &e)
		msg := cmp.Or(e.Error, http.StatusText(resp.StatusCode))
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		if resp.StatusCode == http.StatusNotFound {
			return core.Errorf(core.ENOTFOUND, "mcp registry %s: %s", c.base(), msg)
		}
		return core.Errorf(core.EUNAVAIL, "mcp registry %s: %s (HTTP %d)", c.base(), msg, resp.StatusCode)
	}
	if err := plugins.StrictJSON(body); err != nil {
		return core.Errorf(core.EINVALID, "mcp registry %s: the answer is not the registry API's: %v", c.base(), err)
	}
	if err := decode(body, v); err != nil {
		return core.Errorf(core.EINVALID, "mcp registry %s: the answer is not the registry API's: %v", c.base(), err)
	}
	return nil
}
