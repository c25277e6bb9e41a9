package wasm

import (
	"context"
	"fmt"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
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

// Load loads the module and checks that it serves every kind the
// manifest lists: an ABI 1 module a toolset only, an ABI 2 module the
// kinds it describes.
func (l loader) Load(ctx context.Context, req plugins.LoadRequest) (plugins.Instance, error) {
	ts, err := l.h.Load(ctx, req.Dir, req.Manifest, LoadOptions{
		DataDir: req.DataDir, Grants: req.Grants, Logger: req.Host.Logger, Emit: req.Host.Emit, KV: req.Host.KV,
	})
	if err != nil {
		return nil, err
	}
	t := ts.(*toolset)
	for _, c := range req.Manifest.Provides {
		if err := t.serves(c); err != nil {
			t.Close()
			return nil, fmt.Errorf("load plugin %s: %w", req.ID, err)
		}
	}
	return loaded{t}, nil
}

func (l loader) Close(ctx context.Context) error { return l.h.Close(ctx) }

// Carries reports whether a WASM module can provide kind: a toolset or a
// model provider.
func (loader) Carries(kind plugins.Capability) bool {
	return kind == plugins.CapToolset || kind == plugins.CapModelProvider
}

// serves says why the module does not serve kind, or nil.
func (t *toolset) serves(kind plugins.Capability) error {
	switch {
	case kind == plugins.CapToolset && (t.abi == 1 || t.tools != nil):
		return nil
	case kind == plugins.CapModelProvider && t.provider != nil:
		return nil
	case kind == plugins.CapModelProvider && t.abi == 1:
		return fmt.Errorf("the module speaks Kiln WASM ABI v1, which carries only %q; it provides %q (rebuild it with a newer sdk/plugin)", plugins.CapToolset, kind)
	case kind != plugins.CapToolset && kind != plugins.CapModelProvider:
		return fmt.Errorf("a WASM module cannot provide %q", kind)
	}
	return fmt.Errorf("the manifest says it provides %q, and the module does not describe it", kind)
}

// loaded is a loaded module as a plugins.Instance.
type loaded struct{ t *toolset }

// Dispense hands out the module itself as the toolset and its model
// provider for "model-provider".
func (i loaded) Dispense(_ context.Context, kind plugins.Capability) (any, error) {
	if err := i.t.serves(kind); err != nil {
		return nil, err
	}
	if kind == plugins.CapModelProvider {
		return modelprovider.FromRemote(i.t.id, i.t.perms, remote{i.t}), nil
	}
	return i.t, nil
}

func (i loaded) Close() error { return i.t.Close() }
