package mcp

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/sqlite"
	"github.com/kilnhq/kiln/plugins/mcpservers"
)

// TestCoreService registers a real server's tools with a core.Service:
// they are listed as mcp.<server>.<tool>, and withdrawn on Disable.
func TestCoreService(t *testing.T) {
	nodePath, script := node(t), npmServer(t, "server-filesystem")
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "kiln.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	svc, err := core.New(core.Config{Store: store, Models: func(string) (core.Model, error) { return nil, errors.New("no models") }})
	if err != nil {
		t.Fatal(err)
	}
	m := start(t, svc, Config{Servers: []ServerConfig{{Server: mcpservers.Server{
		Name: "my_files", Command: nodePath, Args: []string{script, t.TempDir()},
	}}}})
	st := waitState(t, m, "my_files", StateConnected)
	names := func() []string {
		var out []string
		for _, sp := range svc.ToolSpecs() {
			out = append(out, sp.Name)
		}
		return out
	}
	if got := names(); !slices.Contains(got, "mcp.my-files.read_text_file") || len(got) != len(st.Tools) {
		t.Errorf("service tools %v, status tools %v", got, st.Tools)
	}
	if err := m.Disable("my_files"); err != nil {
		t.Fatal(err)
	}
	waitState(t, m, "my_files", StateDisabled)
	if got := names(); len(got) != 0 {
		t.Errorf("tools after Disable: %v", got)
	}
}
