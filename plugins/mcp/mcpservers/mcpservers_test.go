package mcpservers_test

import (
	"strings"
	"testing"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/mcp/mcpservers"
)

// TestParseUser parses the user's own configuration: no permissions to
// check, so any command, host and variable goes.
func TestParseUser(t *testing.T) {
	got, err := mcpservers.Parse([]byte(`{"mcpServers": {
	  "files": {"command": "npx", "args": ["-y", "srv", "${HOME}"], "env": {"K": "${KEY}"}, "cwd": "/tmp"},
	  "web": {"type": "sse", "url": "https://anywhere.example/sse", "headers": {"Authorization": "Bearer ${TOKEN}"}}
	}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Type != "stdio" || got[0].Cwd != "/tmp" || got[1].Type != "sse" {
		t.Fatalf("%+v", got)
	}
	vars := map[string]string{"HOME": "/home/me", "KEY": "k1", "TOKEN": "t1"}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	files, err := mcpservers.Expand(got[0], lookup)
	if err != nil || files.Args[2] != "/home/me" || files.Env["K"] != "k1" || got[0].Env["K"] != "${KEY}" {
		t.Errorf("expanded %+v, %v (original %+v)", files, err, got[0])
	}
	web, err := mcpservers.Expand(got[1], lookup)
	if err != nil || web.Headers["Authorization"] != "Bearer t1" {
		t.Errorf("expanded %+v, %v", web, err)
	}
	delete(vars, "TOKEN")
	if _, err := mcpservers.Expand(got[1], lookup); err == nil || !strings.Contains(err.Error(), "${TOKEN} in header Authorization") || strings.Contains(err.Error(), "Bearer") {
		t.Errorf("unset variable: %v", err)
	}
}

// TestTrustIsTheUsers: the user's own config may trust a server or
// disable it; a plugin's may not.
func TestTrustIsTheUsers(t *testing.T) {
	doc := []byte(`{"mcpServers": {"ci": {"command": "ci-mcp", "trust": "all", "disabled": true}}}`)
	got, err := mcpservers.Parse(doc, nil)
	if err != nil || got[0].Trust != "all" || !got[0].Disabled {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := mcpservers.Parse([]byte(`{"mcpServers": {"ci": {"command": "x", "trust": "some"}}}`), nil); err == nil {
		t.Error("trust \"some\" accepted")
	}
	if _, err := mcpservers.Parse(doc, &plugins.Permissions{Exec: true}); err == nil || !strings.Contains(err.Error(), "not a plugin's") {
		t.Errorf("a plugin's trust: %v", err)
	}
}
