package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/sqlite"
	"github.com/kilnhq/kiln/sandbox/service"
)

// TestNoSandboxRuntime: with no runtime's plugin enabled, a sandbox create
// on the service kiln serve opens asks for one of sandboxRuntimes'
// plugins, in their order.
func TestNoSandboxRuntime(t *testing.T) {
	t.Setenv(envSandboxRuntime, "")
	dir := t.TempDir()
	store, err := sqlite.Open(filepath.Join(dir, "kiln.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	sbx, err := openSandboxes(store, nil, sandboxRoots{data: dir, shared: dir}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sbx.Create(context.Background(), "owner", service.CreateRequest{})
	if want := "no sandbox runtime is enabled (enable the docker, wasm or js plugin)"; core.ErrorCode(err) != core.EUNAVAIL || core.ErrorMessage(err) != want {
		t.Errorf("create: %v; want %s: %s", err, core.EUNAVAIL, want)
	}
}
