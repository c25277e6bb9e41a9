package plugintest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/plugins"
)

// CalcPackage is the calc example plugin (sdk/plugin/examples/calc).
const CalcPackage = "github.com/kilnhq/kiln/sdk/plugin/examples/calc"

// calcBuild is one build of calc, made at most once per test binary.
type calcBuild struct {
	once sync.Once
	code []byte
	err  error
}

var calcBuilds = map[plugins.Runtime]*calcBuild{
	plugins.RuntimeWASM:    {},
	plugins.RuntimeProcess: {},
}

// BuildCalc builds the calc example for rt — a wasip1 reactor module for
// "wasm", a native executable for "process" — once per test binary, and
// returns the file's bytes. It needs the go command.
func BuildCalc(tb testing.TB, rt plugins.Runtime) []byte {
	tb.Helper()
	bd := calcBuilds[rt]
	if bd == nil {
		tb.Fatalf("BuildCalc: unknown runtime %q", rt)
	}
	bd.once.Do(func() { bd.code, bd.err = buildCalc(rt) })
	if bd.err != nil {
		tb.Fatal(bd.err)
	}
	return bd.code
}

func buildCalc(rt plugins.Runtime) ([]byte, error) {
	dir, err := os.MkdirTemp("", "kiln-calc-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "calc")
	args := []string{"build", "-o", out}
	env := os.Environ()
	if rt == plugins.RuntimeWASM {
		args = append(args, "-buildmode=c-shared")
		env = append(env, "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	}
	cmd := exec.Command("go", append(args, CalcPackage)...)
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
