package skills_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayering keeps skills a library: besides the standard library (less
// net/http) it may use core, yaml.v3, goldmark and what core uses, and
// never the plugin host or the web layer.
func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", "github.com/kilnhq/kiln/skills").CombinedOutput()
	if err != nil {
		t.Skipf("go list: %v\n%s", err, out)
	}
	allowed := []string{
		"github.com/kilnhq/kiln/skills",
		"github.com/kilnhq/kiln/core",
		"gopkg.in/yaml.v3",
		"github.com/yuin/goldmark",
		"github.com/mattn/go-sqlite3",
		"github.com/santhosh-tekuri/jsonschema/",
		"golang.org/x/text/",
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, std, _ := strings.Cut(line, " ")
		if std == "true" {
			if pkg == "net/http" {
				t.Errorf("skills depends on net/http")
			}
			continue
		}
		ok := false
		for _, a := range allowed {
			if pkg == a || strings.HasPrefix(pkg, strings.TrimSuffix(a, "/")+"/") {
				ok = true
			}
		}
		if !ok {
			t.Errorf("skills depends on %s, which is not in its allowlist", pkg)
		}
	}
}
