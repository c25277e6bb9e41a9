package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/mcp"
	"github.com/kilnhq/kiln/plugins/mcpservers"
)

// mcpConfigFile is the user's MCP servers, in the data root, in the common
// {"mcpServers": {...}} shape.
const mcpConfigFile = ".mcp.json"

// openMCP connects the MCP servers of <data>/.mcp.json (none when the
// file is missing) and registers their tools with svc as
// mcp.<server>.<tool>. A file that does not parse stops the server with
// the reason.
func openMCP(svc *core.Service, dataRoot string) (*mcp.Manager, error) {
	path := filepath.Join(dataRoot, mcpConfigFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return mcp.New(svc, mcp.Config{Dir: dataRoot, ClientVersion: version})
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	servers, err := mcpservers.Parse(data, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cfg := mcp.Config{Dir: dataRoot, ClientVersion: version}
	for _, s := range servers {
		cfg.Servers = append(cfg.Servers, mcp.ServerConfig{Server: s, Trust: s.Trust, Disabled: s.Disabled})
	}
	m, err := mcp.New(svc, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}
