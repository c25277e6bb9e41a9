package process

import (
	"context"
	"fmt"
	"slices"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc"
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
	opts.Env = append(slices.Clip(opts.Env), "KILN_PLUGIN_DATA="+req.DataDir)
	ts, err := Load(ctx, req.Dir, req.Manifest, opts)
	if err != nil {
		return nil, err
	}
	return running{ts.(*Plugin)}, nil
}

func (loader) Close(context.Context) error { return nil }

// running is a process plugin as a plugins.Instance.
type running struct{ p *Plugin }

func (i running) Dispense(_ context.Context, kind plugins.Capability) (any, error) {
	if kind != plugins.CapToolset {
		return nil, fmt.Errorf("a process plugin of protocol version %d provides only %q, not %q", pluginrpc.ProtocolVersion, plugins.CapToolset, kind)
	}
	return i.p, nil
}

func (i running) Close() error { return i.p.Close() }

// Health reports the process's restarts and whether it failed for good.
func (i running) Health() plugins.Health {
	st := i.p.Health()
	return plugins.Health{Failed: st.State == StateFailed, Error: st.LastError, Restarts: st.Restarts, PID: st.PID}
}
