//go:build unix

package execapi

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/wasm"
)

// POST /directories and /files/permissions reach the folders mounted in
// a wasm sandbox (they run its shell's mkdir -m and chmod): a writable
// mount takes the modes, a read-only one refuses them.
func TestRuntimeBackendWasmMounts(t *testing.T) {
	rt, err := wasm.New(wasm.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	ro, rw := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := rt.Start(context.Background(), sandbox.Spec{ID: "box", Mounts: []sandbox.Mount{{HostPath: ro, Path: "/skills", ReadOnly: true}, {HostPath: rw, Path: "/out"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, RuntimeBackend{Runtime: rt, Handle: h})
	want(t, do(t, srv, "POST", "/directories", strings.NewReader(`{"/out/d/e":{"mode":750}}`)), 200)
	want(t, do(t, srv, "POST", "/files/permissions", strings.NewReader(`{"/out/d":{"mode":700}}`)), 200)
	var infos map[string]fileJSON
	json.Unmarshal([]byte(want(t, do(t, srv, "GET", "/files/info?path=/out/d/e&path=/out/d", nil), 200)), &infos)
	if infos["/out/d/e"].Mode != 750 || infos["/out/d"].Mode != 700 {
		t.Fatalf("modes in the writable mount: %+v", infos)
	}
	if fi, err := os.Stat(filepath.Join(rw, "d", "e")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("the host folder: %v, %v", fi.Mode(), err)
	}
	resp := do(t, srv, "POST", "/files/permissions", strings.NewReader(`{"/skills/data":{"mode":600}}`))
	if body := read(t, resp); resp.StatusCode < 400 || !strings.Contains(strings.ToLower(body), "read-only file system") {
		t.Errorf("chmod in the read-only mount: %d %s", resp.StatusCode, body)
	}
	if fi, err := os.Stat(filepath.Join(ro, "data")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the read-only host file: %v, %v", fi.Mode(), err)
	}
}
