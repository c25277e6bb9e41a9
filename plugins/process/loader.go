package process

import (
	"context"
	"slices"

	"github.com/kilnhq/kiln/plugins"
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

// Carries reports whether a process plugin can provide kind: whether the
// kind is registered with RegisterKind.
func (loader) Carries(kind plugins.Capability) bool {
	_, ok := lookupKind(kind)
	return ok
}

// running is a process plugin as a plugins.Instance.
type running struct{ *Plugin }

// Health reports the process's restarts and whether it failed for good.
func (i running) Health() plugins.Health {
	st := i.Plugin.Health()
	return plugins.Health{Failed: st.State == StateFailed, Error: st.LastError, Restarts: st.Restarts, PID: st.PID}
}

// Interface guards.
var (
	_ plugins.Loader         = loader{}
	_ plugins.Carrier        = loader{}
	_ plugins.HealthReporter = running{}
)
