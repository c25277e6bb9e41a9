package jsguest_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestWasmUpToDate rebuilds js.wasm with the go build line of
// jsguest.go's go:generate lines into a temporary directory and checks
// that the committed module, once unpacked, is byte for byte the same: Go builds with -trimpath and
// -buildvcs=false are reproducible for one toolchain and one module
// graph, so a difference means the guest's sources, its dependencies or
// the Go version changed without go generate being run.
func TestWasmUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the guest")
	}
	src, err := os.ReadFile("jsguest.go")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, line := range strings.Split(string(src), "\n") {
		if rest, ok := strings.CutPrefix(line, "//go:generate "); ok && strings.Contains(rest, " go build ") {
			args = splitGenerate(t, rest)
		}
	}
	out := filepath.Join(t.TempDir(), "js.wasm")
	var env []string
	for len(args) > 0 && (args[0] == "env" || strings.Contains(args[0], "=")) {
		if args[0] != "env" {
			env = append(env, args[0])
		}
		args = args[1:]
	}
	for i, a := range args {
		if a == "-o" && i+1 < len(args) {
			args[i+1] = out
		}
	}
	if len(args) == 0 || args[0] != "go" {
		t.Fatalf("the go:generate line of jsguest.go does not run go build: %q", args)
	}
	cmd := exec.Command("go", args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, b)
	}
	built, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := unpack("js.wasm.gz")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(built, committed) {
		t.Fatalf("js.wasm (%d bytes) differs from a build of ./guest (%d bytes): run go generate ./sandbox/jsguest", len(committed), len(built))
	}
}

// unpack reads the gzipped file at path.
func unpack(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// splitGenerate splits a go:generate line into words as go generate
// does: at spaces, a word in double quotes being one word.
func splitGenerate(t *testing.T, line string) []string {
	var words []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		if line[0] == '"' {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				t.Fatalf("go:generate line: %v", err)
			}
			w, _ := strconv.Unquote(q)
			words = append(words, w)
			line = line[len(q):]
			continue
		}
		w, rest, _ := strings.Cut(line, " ")
		words = append(words, w)
		line = rest
	}
	return words
}
