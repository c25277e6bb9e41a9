package core_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayering keeps core free of HTTP, the plugin transports and vendor
// SDKs: the packages under core/ may not depend on any of these, directly
// or through another package.
func TestLayering(t *testing.T) {
	forbidden := []string{
		"net/http",
		"github.com/go-chi/",
		"github.com/tetratelabs/wazero",
		"github.com/hashicorp/go-plugin",
		"google.golang.org/grpc",
		"github.com/docker/",
		"github.com/dop251/goja",
		"github.com/mark3labs/mcp-go",
		"github.com/prometheus/",
		"gopkg.in/natefinch/lumberjack",
		"github.com/kilnhq/kiln/web",
		"github.com/kilnhq/kiln/plugins",
		"github.com/kilnhq/kiln/sandbox",
		"github.com/kilnhq/kiln/sdk",
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{if .Standard}}std{{end}}", "github.com/kilnhq/kiln/core/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list returned too little to judge: %q", out)
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == strings.TrimSuffix(f, "/") || strings.HasPrefix(d, f) {
				t.Errorf("core depends on %s (forbidden prefix %s)", d, f)
			}
		}
	}
}
