package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/sdk/client"
)

// TestToolResultCapEndToEnd: with KILN_MAX_TOOL_RESULT_KB=8, a built-in
// tool's and a process plugin's 40 KiB answers are stored as 8 KiB, their
// head and tail with the cut stated between.
func TestToolResultCapEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	srv := startProc(t, procAddr(t), t.TempDir(), "KILN_MAX_TOOL_RESULT_KB=8")
	c := srv.client()
	ctx := context.Background()
	if _, err := c.InstallPlugin(ctx, client.InstallPluginRequest{Path: examplePlugin(t, "calcp", plugins.RuntimeProcess), Consent: true}); err != nil {
		t.Fatal(err)
	}
	args := fmt.Sprintf(`{"s":"BEGIN%sEND"}`, strings.Repeat("x", 40<<10))
	r, res := runScript(t, c, "tool echo "+args+"\ntool calcp.echo "+args+"\ntext done", nil)
	if r.Status != core.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	for _, name := range []string{"echo", "calcp.echo"} {
		m := res[name]
		if m == nil || m.IsError || m.Text != core.CapText(args, 8<<10) || len(m.Text) != 8<<10 ||
			!strings.HasPrefix(m.Text, `{"s":"BEGINxxx`) || !strings.HasSuffix(m.Text, `xxxEND"}`) || !strings.Contains(m.Text, " bytes of output left out ...]") {
			t.Errorf("%s stored %d bytes, want %d: %.60q", name, len(m.Text), 8<<10, m.Text)
		}
	}
}
