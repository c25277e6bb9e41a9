package web

import (
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// fakeMCP is a bridge of servers by ID; a server with a Plugin is a
// plugin's. Add refuses a definition without a command or URL.
type fakeMCP struct {
	mu      sync.Mutex
	servers map[string]pluginapi.MCPServerStatus
	added   []pluginapi.MCPServerConfig
}

func (f *fakeMCP) Statuses() []pluginapi.MCPServerStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []pluginapi.MCPServerStatus
	for _, s := range f.servers {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b pluginapi.MCPServerStatus) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (f *fakeMCP) Status(id string) (pluginapi.MCPServerStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.servers[id]
	if !ok {
		return s, core.Errorf(core.ENOTFOUND, "mcp server %q not found", id)
	}
	return s, nil
}

func (f *fakeMCP) Reconnect(id string) error { _, err := f.Status(id); return err }
func (f *fakeMCP) Enable(id string) error    { _, err := f.Status(id); return err }
func (f *fakeMCP) Disable(id string) error   { _, err := f.Status(id); return err }

func (f *fakeMCP) Add(cfg pluginapi.MCPServerConfig) (pluginapi.MCPServerStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.servers[cfg.ID]; ok {
		return pluginapi.MCPServerStatus{}, core.Errorf(core.ECONFLICT, "mcp server %q exists", cfg.ID)
	}
	if cfg.Command == "" && cfg.URL == "" {
		return pluginapi.MCPServerStatus{}, core.Errorf(core.EINVALID, "server %q: needs a command (stdio) or a url (HTTP)", cfg.ID)
	}
	f.added = append(f.added, cfg)
	st := pluginapi.MCPServerStatus{ID: cfg.ID, State: pluginapi.MCPConnecting, Transport: "stdio"}
	f.servers[cfg.ID] = st
	return st, nil
}

func (f *fakeMCP) Remove(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.servers[id]
	switch {
	case !ok:
		return core.Errorf(core.ENOTFOUND, "mcp server %q not found", id)
	case s.Plugin != "":
		return core.Errorf(core.ECONFLICT, "mcp server %q comes from the plugin %q", id, s.Plugin)
	}
	delete(f.servers, id)
	return nil
}

// TestMCPServersAPI: POST /mcp-servers decodes one .mcp.json entry with
// its id strictly and answers 201 with the status; the bridge's refusals
// are 400 and 409; DELETE is 204, 404 or 409; a body that does not decode
// never reaches the bridge.
func TestMCPServersAPI(t *testing.T) {
	f := &fakeMCP{servers: map[string]pluginapi.MCPServerStatus{
		"bundled": {ID: "bundled", State: pluginapi.MCPConnected, Transport: "stdio", Plugin: "acme"},
	}}
	e := newEnv(t, Options{MCPServers: f})
	var st pluginapi.MCPServerStatus
	e.call("POST", "/api/v1/mcp-servers", `{"id":"gh","command":"npx","args":["-y","x"],"env":{"T":"${T}"},"cwd":"w","trust":"all","disabled":true}`, http.StatusCreated, &st)
	if st.ID != "gh" || st.State != pluginapi.MCPConnecting {
		t.Fatalf("added %+v", st)
	}
	want := pluginapi.MCPServerConfig{ID: "gh", Command: "npx", Args: []string{"-y", "x"}, Env: map[string]string{"T": "${T}"}, Cwd: "w", Trust: "all", Disabled: true}
	if len(f.added) != 1 || !reflect.DeepEqual(f.added[0], want) {
		t.Fatalf("the bridge got %+v", f.added)
	}
	e.call("POST", "/api/v1/mcp-servers", `{"id":"docs","type":"sse","url":"https://h/mcp","headers":{"A":"b"}}`, http.StatusCreated, &st)
	if f.added[1].Type != "sse" || f.added[1].Headers["A"] != "b" {
		t.Fatalf("the bridge got %+v", f.added[1])
	}
	e.wantError("POST", "/api/v1/mcp-servers", `{"id":"gh","command":"x"}`, nil, http.StatusConflict, core.ECONFLICT)
	e.wantError("POST", "/api/v1/mcp-servers", `{"id":"x"}`, nil, http.StatusBadRequest, core.EINVALID)
	for _, body := range []string{`{"id":"x","command":`, `{"id":"x","cmd":"a"}`, `{"id":"x","args":"a"}`, "{\"id\":\"\xff\"}", `[]`, ``} {
		e.wantError("POST", "/api/v1/mcp-servers", body, nil, http.StatusBadRequest, codeInvalidJSON)
	}
	e.wantError("POST", "/api/v1/mcp-servers", `{"id":"x","command":"a","pad":"`+strings.Repeat("a", maxBody)+`"}`, nil, http.StatusRequestEntityTooLarge, codeTooLarge)
	if len(f.added) != 2 {
		t.Fatalf("bad bodies reached the bridge: %+v", f.added[2:])
	}
	var list struct {
		Servers []pluginapi.MCPServerStatus `json:"servers"`
	}
	e.call("GET", "/api/v1/mcp-servers", "", http.StatusOK, &list)
	if len(list.Servers) != 3 || list.Servers[0].Plugin != "acme" {
		t.Fatalf("list %+v", list.Servers)
	}
	e.call("DELETE", "/api/v1/mcp-servers/gh", "", http.StatusNoContent, nil)
	e.wantError("DELETE", "/api/v1/mcp-servers/gh", "", nil, http.StatusNotFound, core.ENOTFOUND)
	r := e.wantError("DELETE", "/api/v1/mcp-servers/bundled", "", nil, http.StatusConflict, core.ECONFLICT)
	if !strings.Contains(string(r.body), "acme") {
		t.Fatalf("the conflict does not name the plugin: %s", r.body)
	}

	// Without a bridge the routes are 404.
	e2 := newEnv(t, Options{})
	e2.wantError("POST", "/api/v1/mcp-servers", `{"id":"x","command":"a"}`, nil, http.StatusNotFound, core.ENOTFOUND)
	e2.wantError("DELETE", "/api/v1/mcp-servers/x", "", nil, http.StatusNotFound, core.ENOTFOUND)
}
