package wasm

import (
	"context"
	"fmt"

	"github.com/kilnhq/kiln/plugins"
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

// Load loads the module and makes the client of every kind the manifest
// lists with the registered Kind, which checks the module's description of
// the kind. It fails for a kind not registered, one the module does
// not describe, or one its ABI version cannot carry.
func (l loader) Load(ctx context.Context, req plugins.LoadRequest) (plugins.Instance, error) {
	m, err := l.h.Load(ctx, req.Dir, req.Manifest, LoadOptions{
		DataDir: req.DataDir, Grants: req.Grants, Logger: req.Host.Logger, Emit: req.Host.Emit, KV: req.Host.KV,
	})
	if err != nil {
		return nil, err
	}
	clients := make(map[plugins.Capability]any, len(req.Manifest.Provides))
	for _, kind := range req.Manifest.Provides {
		c, err := m.dispense(kind)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("load plugin %s: %w", req.ID, err)
		}
		clients[kind] = c
	}
	return loaded{m, clients}, nil
}

func (l loader) Close(ctx context.Context) error { return l.h.Close(ctx) }

// Carries reports whether a WASM module can provide kind: whether the
// kind is registered with RegisterKind.
func (loader) Carries(kind plugins.Capability) bool {
	_, ok := lookupKind(kind)
	return ok
}

// dispense makes the client of kind with its registered Kind, or says why the
// module does not serve kind.
func (t *Module) dispense(kind plugins.Capability) (any, error) {
	k, ok := lookupKind(kind)
	if !ok {
		return nil, fmt.Errorf("a WASM module cannot provide %q", kind)
	}
	d, ok := t.kinds[string(kind)]
	switch {
	case !ok && t.abi < 3 && !legacyCarries(t.abi, string(kind)):
		return nil, fmt.Errorf("the module speaks Kiln WASM ABI v%d, which carries only %s; it provides %q (rebuild it with a newer sdk/plugin)", t.abi, legacyKinds(t.abi), kind)
	case !ok:
		return nil, fmt.Errorf("the manifest says it provides %q, and the module does not describe it", kind)
	}
	c, err := k.Client(t, d)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	return c, nil
}

// loaded is a loaded module as a plugins.Instance: the clients Load made.
type loaded struct {
	m       *Module
	clients map[plugins.Capability]any
}

// Dispense returns the client of kind Load made.
func (i loaded) Dispense(_ context.Context, kind plugins.Capability) (any, error) {
	c, ok := i.clients[kind]
	if !ok {
		return nil, fmt.Errorf("does not provide %q", kind)
	}
	return c, nil
}

func (i loaded) Close() error { return i.m.Close() }
