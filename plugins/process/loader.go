package process

import (
	"context"
	"fmt"
	"slices"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
)

func init() {
	plugins.RegisterRuntime(plugins.RuntimeProcess, func(env plugins.RuntimeEnv) (plugins.Loader, error) {
		return NewLoader(Options{Logger: env.Logger}), nil
	})
}

// NewLoader returns the loader of the "process" runtime, starting plugins
// with opts. Each plugin finds its data folder ("data:/" of the SDK's
// ReadFile and WriteFile) in KILN_PLUGIN_DATA.
func NewLoader(opts Options) plugins.Loader { return loader{opts} }

type loader struct{ opts Options }

func (l loader) Load(ctx context.Context, req plugins.LoadRequest) (plugins.Instance, error) {
	opts := l.opts
	if req.Host.Logger != nil {
		opts.Logger = req.Host.Logger
	}
	opts.KV, opts.Emit = req.Host.KV, req.Host.Emit
	opts.Env = append(slices.Clip(opts.Env), "KILN_PLUGIN_DATA="+req.DataDir)
	p, err := Load(ctx, req.Dir, req.Manifest, opts)
	if err != nil {
		return nil, err
	}
	return running{p}, nil
}

func (loader) Close(context.Context) error { return nil }

// Carries reports whether a process plugin can provide kind.
func (loader) Carries(kind plugins.Capability) bool { return slices.Contains(kinds, kind) }

// running is a process plugin as a plugins.Instance.
type running struct{ p *Plugin }

// Dispense hands out the plugin itself as the toolset, its Provider for
// the "model-provider" kind and its SandboxRuntime for the
// "sandbox-runtime" kind; Load made sure the process serves every kind
// the manifest lists.
func (i running) Dispense(_ context.Context, kind plugins.Capability) (any, error) {
	if !slices.Contains(i.p.m.Provides, kind) {
		return nil, fmt.Errorf("does not provide %q", kind)
	}
	switch kind {
	case plugins.CapToolset:
		return i.p, nil
	case plugins.CapModelProvider:
		return modelprovider.FromRemote(i.p.id, i.p.m.Permissions, i.p.Provider()), nil
	case plugins.CapSandboxRuntime:
		return i.p.SandboxRuntime(), nil
	}
	return nil, fmt.Errorf("a process plugin cannot provide %q", kind)
}

func (i running) Close() error { return i.p.Close() }

// Health reports the process's restarts and whether it failed for good.
func (i running) Health() plugins.Health {
	st := i.p.Health()
	return plugins.Health{Failed: st.State == StateFailed, Error: st.LastError, Restarts: st.Restarts, PID: st.PID}
}
