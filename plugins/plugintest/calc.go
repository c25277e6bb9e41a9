package plugintest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/plugins"
)

// CalcPackage is the calc example plugin (sdk/plugin/examples/calc).
const CalcPackage = "github.com/kilnhq/kiln/sdk/plugin/examples/calc"

// build is one build of a package for a runtime, made at most once per
// test binary.
type build struct {
	once sync.Once
	code []byte
	err  error
}

type buildKey struct {
	pkg string
	rt  plugins.Runtime
}

var builds sync.Map // buildKey -> *build

// BuildCalc builds the calc example for rt (Build).
func BuildCalc(tb testing.TB, rt plugins.Runtime) []byte {
	tb.Helper()
	return Build(tb, CalcPackage, rt)
}

// Build builds the plugin main package pkg (an import path, or a
// directory relative to the test's package such as "./testdata/guest")
// for rt — a wasip1 reactor module for "wasm", a native executable for
// "process" — once per test binary, and returns the file's bytes. It needs
// the go command.
func Build(tb testing.TB, pkg string, rt plugins.Runtime) []byte {
	tb.Helper()
	if rt != plugins.RuntimeWASM && rt != plugins.RuntimeProcess {
		tb.Fatalf("plugintest.Build: unknown runtime %q", rt)
	}
	v, _ := builds.LoadOrStore(buildKey{pkg, rt}, &build{})
	bd := v.(*build)
	bd.once.Do(func() { bd.code, bd.err = goBuild(pkg, rt) })
	if bd.err != nil {
		tb.Fatal(bd.err)
	}
	return bd.code
}

func goBuild(pkg string, rt plugins.Runtime) ([]byte, error) {
	dir, err := os.MkdirTemp("", "kiln-plugin-build-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "plugin")
	args := []string{"build", "-o", out}
	env := os.Environ()
	if rt == plugins.RuntimeWASM {
		args = append(args, "-buildmode=c-shared")
		env = append(env, "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	}
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), append(args, pkg)...)
	cmd.Env = env
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go %v: %v\n%s", cmd.Args[1:], err, b)
	}
	return os.ReadFile(out)
}

// CalcPlugin lays out a plugin folder for the calc example built for rt
// (BuildCalc) with the given id and permissions (raw JSON, "" for none);
// see WritePlugin.
func CalcPlugin(tb testing.TB, id string, rt plugins.Runtime, perms string) (string, *plugins.Manifest) {
	tb.Helper()
	entry := "calc"
	if rt == plugins.RuntimeWASM {
		entry = "calc.wasm"
	}
	return WritePlugin(tb, id, rt, entry, BuildCalc(tb, rt), perms)
}
