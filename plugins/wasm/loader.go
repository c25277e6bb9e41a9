package wasm

import (
	"context"
	"fmt"

	"github.com/kilnhq/kiln/plugins"
	toolsetkind "github.com/kilnhq/kiln/plugins/toolset"
)

func init() {
	plugins.RegisterRuntime(plugins.RuntimeWASM, func(env plugins.RuntimeEnv) (plugins.Loader, error) {
		h, err := New(Config{CacheDir: env.CacheDir, Logger: env.Logger})
		if err != nil {
			return nil, err
		}
		return NewLoader(h), nil
	})
}

// NewLoader returns h as the loader of the "wasm" runtime. Closing the
// loader closes h.
func NewLoader(h *Host) plugins.Loader { return loader{h} }

type loader struct{ h *Host }

// Load loads the module and hands out its toolset: ABI version 1 guests
// provide the "toolset" kind only.
func (l loader) Load(ctx context.Context, req plugins.LoadRequest) (plugins.Instance, error) {
	ts, err := l.h.Load(ctx, req.Dir, req.Manifest, LoadOptions{
		DataDir: req.DataDir, Grants: req.Grants, Logger: req.Host.Logger, Emit: req.Host.Emit, KV: req.Host.KV,
	})
	if err != nil {
		return nil, err
	}
	return instance1{ts}, nil
}

func (l loader) Close(ctx context.Context) error { return l.h.Close(ctx) }

// instance1 is a loaded ABI version 1 module.
type instance1 struct{ ts toolsetkind.Toolset }

func (i instance1) Dispense(_ context.Context, kind plugins.Capability) (any, error) {
	if kind != plugins.CapToolset {
		return nil, fmt.Errorf("a WASM module of ABI version 1 provides only %q, not %q", plugins.CapToolset, kind)
	}
	return i.ts, nil
}

func (i instance1) Close() error { return i.ts.Close() }
