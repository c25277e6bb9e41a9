package web

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// MCPServers is the MCP bridge behind /api/v1/mcp-servers
// (plugins/mcp.Manager with the user's .mcp.json). Unknown IDs are
// ENOTFOUND. No status shows the values of a server's variables or
// headers.
type MCPServers interface {
	Statuses() []pluginapi.MCPServerStatus
	Status(id string) (pluginapi.MCPServerStatus, error)
	Reconnect(id string) error
	Enable(id string) error
	Disable(id string) error
	// Add connects a server of the user's own configuration (in the
	// background) and keeps it in .mcp.json; it returns its status.
	// EINVALID for a definition .mcp.json would refuse, ECONFLICT when a
	// server, the user's or a plugin's, has the ID.
	Add(cfg pluginapi.MCPServerConfig) (pluginapi.MCPServerStatus, error)
	// Remove disconnects a server of the user's configuration, withdraws
	// its tools and takes it out of .mcp.json. ECONFLICT, naming the
	// plugin, for a server of a plugin's bundle.
	Remove(id string) error
}

// mcpServerRoutes registers /api/v1/mcp-servers: the MCP servers Kiln
// connects to (the bridge), their state and tools.
func (s *server) mcpServerRoutes(r chi.Router) {
	r.Get("/mcp-servers", s.api(s.listMCPServers))
	r.Post("/mcp-servers", s.api(s.addMCPServer))
	r.Get("/mcp-servers/{id}", s.api(s.getMCPServer))
	r.Delete("/mcp-servers/{id}", s.api(s.removeMCPServer))
	r.Post("/mcp-servers/{id}/reconnect", s.api(s.mcpServerAction(MCPServers.Reconnect)))
	r.Post("/mcp-servers/{id}/enable", s.api(s.mcpServerAction(MCPServers.Enable)))
	r.Post("/mcp-servers/{id}/disable", s.api(s.mcpServerAction(MCPServers.Disable)))
}

func (s *server) mcpManager() (MCPServers, error) {
	if s.opts.MCPServers == nil {
		return nil, errorf(core.ENOTFOUND, "the MCP bridge is not available on this server")
	}
	return s.opts.MCPServers, nil
}

func (s *server) listMCPServers(_ http.ResponseWriter, _ *http.Request) (int, any, error) {
	m, err := s.mcpManager()
	if err != nil {
		return 0, nil, err
	}
	list := m.Statuses()
	if list == nil {
		list = []pluginapi.MCPServerStatus{}
	}
	return http.StatusOK, map[string]any{"servers": list}, nil
}

func (s *server) getMCPServer(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	m, err := s.mcpManager()
	if err != nil {
		return 0, nil, err
	}
	st, err := m.Status(id(r))
	return http.StatusOK, st, err
}

// mcpServerAction runs one of the Manager's actions on {id} and answers
// with the server's state after it.
func (s *server) mcpServerAction(act func(MCPServers, string) error) apiFunc {
	return func(_ http.ResponseWriter, r *http.Request) (int, any, error) {
		m, err := s.mcpManager()
		if err != nil {
			return 0, nil, err
		}
		if err := act(m, id(r)); err != nil {
			return 0, nil, err
		}
		st, err := m.Status(id(r))
		return http.StatusOK, st, err
	}
}

// addMCPServer adds a server to the user's configuration from one entry
// of .mcp.json with its "id": 201 with its status (still connecting).
func (s *server) addMCPServer(w http.ResponseWriter, r *http.Request) (int, any, error) {
	m, err := s.mcpManager()
	if err != nil {
		return 0, nil, err
	}
	in, err := decodeBody(w, r, true, func(b []byte) (pluginapi.MCPServerConfig, error) {
		var in pluginapi.MCPServerConfig
		return in, unmarshalStrict(b, &in)
	})
	if err != nil {
		return 0, nil, err
	}
	st, err := m.Add(in)
	return http.StatusCreated, st, err
}

// removeMCPServer removes a server of the user's configuration: 204.
func (s *server) removeMCPServer(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	m, err := s.mcpManager()
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, m.Remove(id(r))
}
