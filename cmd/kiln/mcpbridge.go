package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/mcp"
	"github.com/kilnhq/kiln/plugins/mcp/mcpservers"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// mcpConfigFile is the user's MCP servers, in the data root, in the common
// {"mcpServers": {...}} shape.
const mcpConfigFile = ".mcp.json"

// openMCP connects the MCP servers of <data>/.mcp.json (none when the
// file is missing or its "mcpServers" is empty) and registers their tools
// with svc as mcp.<server>.<tool>. callTimeout bounds the calls of a
// server whose entry sets no timeout (0: mcp.DefaultCallTimeout). A file
// that does not parse stops the server with the reason.
func openMCP(svc *core.Service, dataRoot string, callTimeout time.Duration) (*mcp.Manager, error) {
	path := filepath.Join(dataRoot, mcpConfigFile)
	entries, err := readMCPFile(path)
	if err != nil {
		return nil, err
	}
	cfg := mcp.Config{Dir: dataRoot, ClientVersion: version, CallTimeout: callTimeout}
	if len(entries) > 0 {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		servers, err := mcpservers.Parse(data, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, s := range servers {
			cfg.Servers = append(cfg.Servers, mcp.ServerConfig{Server: s, Trust: s.Trust, Disabled: s.Disabled})
		}
	}
	m, err := mcp.New(svc, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// mcpFile is the shape of .mcp.json: each server's entry is kept as
// written.
type mcpFile struct {
	Servers map[string]json.RawMessage `json:"mcpServers"`
}

// readMCPFile returns the entries of the file at path, nil when it is
// missing. It checks only the outer shape; mcpservers.Parse checks the
// entries.
func readMCPFile(path string) (map[string]json.RawMessage, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var doc mcpFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return doc.Servers, nil
}

// userMCP is the MCP bridge as the API serves it (web.MCPServers): the
// Manager, whose servers added or removed through it are also written to
// or removed from the user's <data>/.mcp.json.
type userMCP struct {
	*mcp.Manager
	path string
	// mu serializes the file's read-modify-write, so that concurrent
	// changes do not lose each other's entries.
	mu sync.Mutex
	// known is each server's entry as connected here (compact JSON), for
	// Sync to tell what another server sharing the file changed.
	known map[string]string
}

// newUserMCP is the bridge over m, whose user servers are those of the
// file in dataRoot.
func newUserMCP(m *mcp.Manager, dataRoot string) *userMCP {
	u := &userMCP{Manager: m, path: filepath.Join(dataRoot, mcpConfigFile)}
	entries, _ := readMCPFile(u.path) // openMCP read it already
	u.known = compactEntries(entries)
	return u
}

// compactEntries is entries as compact JSON, the form Sync compares.
func compactEntries(entries map[string]json.RawMessage) map[string]string {
	out := make(map[string]string, len(entries))
	for id, raw := range entries {
		var b bytes.Buffer
		if json.Compact(&b, raw) != nil {
			b.Reset()
			b.Write(raw)
		}
		out[id] = b.String()
	}
	return out
}

// Sync brings the user's servers here in line with the file, which
// another server sharing it may have changed: a server added there is
// connected, one removed is disconnected, one whose entry changed is
// connected again with its new entry. An entry that does not parse is
// skipped and named in the error; a file that does not parse changes
// nothing.
func (u *userMCP) Sync() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	entries, err := readMCPFile(u.path)
	if err != nil {
		return err
	}
	now := compactEntries(entries)
	var errs []error
	for id, was := range u.known {
		if is, ok := now[id]; !ok || is != was {
			if err := u.Manager.RemoveServer(id); err != nil && core.ErrorCode(err) != core.ENOTFOUND {
				errs = append(errs, err)
			}
			delete(u.known, id)
		}
	}
	for id, is := range now {
		if _, ok := u.known[id]; ok {
			continue
		}
		doc, err := json.Marshal(mcpFile{Servers: map[string]json.RawMessage{id: entries[id]}})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		servers, err := mcpservers.Parse(doc, nil)
		if err == nil {
			err = u.Manager.AddServer(mcp.ServerConfig{Server: servers[0], Trust: servers[0].Trust, Disabled: servers[0].Disabled})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u.path, err))
			continue
		}
		u.known[id] = is
	}
	return errors.Join(errs...)
}

// Add checks cfg by the rules of .mcp.json (mcpservers.Parse of the
// one-entry document), connects the server in the background and writes
// its entry, as given ("${NAME}" unexpanded), into the file, keeping the
// others. EINVALID for a bad definition, ECONFLICT when a server (the
// user's or a plugin's) has the ID. When the file cannot be written the
// server is removed again and nothing changes.
func (u *userMCP) Add(cfg pluginapi.MCPServerConfig) (pluginapi.MCPServerStatus, error) {
	id := cfg.ID
	entry, sv, err := parseMCPEntry(cfg)
	if err != nil {
		return pluginapi.MCPServerStatus{}, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	entries, err := readMCPFile(u.path)
	if err != nil {
		return pluginapi.MCPServerStatus{}, core.Errorf(core.ECONFLICT, "%s; fix the file first", err)
	}
	if _, ok := entries[id]; ok {
		return pluginapi.MCPServerStatus{}, core.Errorf(core.ECONFLICT, "mcp server %q exists (in %s)", id, mcpConfigFile)
	}
	if err := u.Manager.AddServer(mcp.ServerConfig{Server: sv, Trust: sv.Trust, Disabled: sv.Disabled}); err != nil {
		return pluginapi.MCPServerStatus{}, err
	}
	if entries == nil {
		entries = map[string]json.RawMessage{}
	}
	entries[id] = entry
	if err := u.write(entries); err != nil {
		_ = u.Manager.RemoveServer(id)
		return pluginapi.MCPServerStatus{}, err
	}
	u.known[id] = compactEntries(map[string]json.RawMessage{id: entry})[id]
	return u.Manager.Status(id)
}

// Remove disconnects a server of the user's configuration, withdraws its
// tools and removes its entry from the file. ENOTFOUND for an unknown ID,
// ECONFLICT (naming the plugin) for a plugin's server.
func (u *userMCP) Remove(id string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := u.Manager.RemoveServer(id); err != nil {
		return err
	}
	entries, err := readMCPFile(u.path)
	if err != nil {
		return core.Errorf(core.ECONFLICT, "mcp server %q is disconnected, but %s; remove it from the file by hand", id, err)
	}
	delete(u.known, id)
	if _, ok := entries[id]; !ok {
		return nil
	}
	delete(entries, id)
	return u.write(entries)
}

// parseMCPEntry returns cfg's entry of "mcpServers" and the server it
// defines, checked by mcpservers.Parse (the rules of the file, so that
// what is written parses at the next start).
func parseMCPEntry(cfg pluginapi.MCPServerConfig) (json.RawMessage, mcpservers.Server, error) {
	id := cfg.ID
	cfg.ID = ""
	entry, err := json.Marshal(struct {
		pluginapi.MCPServerConfig
		ID string `json:"id,omitempty"`
	}{MCPServerConfig: cfg})
	if err != nil {
		return nil, mcpservers.Server{}, err
	}
	doc, err := json.Marshal(mcpFile{Servers: map[string]json.RawMessage{id: entry}})
	if err != nil {
		return nil, mcpservers.Server{}, err
	}
	servers, err := mcpservers.Parse(doc, nil)
	if err != nil {
		return nil, mcpservers.Server{}, core.Errorf(core.EINVALID, "%s", strings.TrimPrefix(err.Error(), mcpservers.File+": "))
	}
	return entry, servers[0], nil
}

// write replaces the file with entries, atomically (a temporary file
// renamed over it), readable by the owner only: values may be secrets.
func (u *userMCP) write(entries map[string]json.RawMessage) error {
	data, err := json.MarshalIndent(mcpFile{Servers: entries}, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	tmp, err := os.CreateTemp(filepath.Dir(u.path), mcpConfigFile+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", u.path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", u.path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", u.path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", u.path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", u.path, err)
	}
	if err := os.Rename(tmp.Name(), u.path); err != nil {
		return fmt.Errorf("write %s: %w", u.path, err)
	}
	return nil
}
