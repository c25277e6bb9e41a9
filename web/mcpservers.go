package web

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// MCPServers is the MCP bridge behind /api/v1/mcp-servers
// (plugins/mcp.Manager). Unknown IDs are ENOTFOUND.
type MCPServers interface {
	Statuses() []pluginapi.MCPServerStatus
	Status(id string) (pluginapi.MCPServerStatus, error)
	Reconnect(id string) error
	Enable(id string) error
	Disable(id string) error
}

// mcpServerRoutes registers /api/v1/mcp-servers: the MCP servers Kiln
// connects to (the bridge), their state and tools.
func (s *server) mcpServerRoutes(r chi.Router) {
	r.Get("/mcp-servers", s.api(s.listMCPServers))
	r.Get("/mcp-servers/{id}", s.api(s.getMCPServer))
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
