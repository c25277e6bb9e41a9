// Package sandboxplugin serves a sandbox runtime from a plugin: Runtime
// is the "sandbox-runtime" kind as a plugin passes it to sdk/plugin's
// Serve, next to or instead of a toolset and a provider:
//
//	plugin.Serve(sandboxplugin.Runtime{Open: func(ctx context.Context) (sandbox.Runtime, error) {
//		return docker.New(docker.Options{})
//	}})
//
// The kind is defined here, beside package sandbox, and not in the SDK,
// which does not link package sandbox: it reaches the SDK through the
// SDK's extension point (plugin.ProcessKind), as any kind defined outside
// the SDK does.
package sandboxplugin

import (
	"context"
	"errors"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/sandboxrpc"
	"github.com/kilnhq/kiln/sdk/plugin"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc"
)

// Runtime is what a sandbox-runtime plugin serves: a backend that runs
// sandboxes (package sandbox holds the interface and its contracts,
// sandbox/sandboxtest the conformance suite to run it through). Kiln
// attaches it under the plugin's ID, which must be its
// Capabilities().Name. A runtime that is also a sandbox.Lister or a
// sandbox.ExecDialer is used as one; a sandbox.Pauser, when its
// Capabilities say Pause. It is served by a native build only: a process
// plugin, since a sandbox backend needs the OS (the Docker socket), at
// plugin protocol 3. Its calls do not name the host's callbacks, so the
// SDK's key/value functions and Emit fail in them and Log writes to
// stderr, which the host logs.
type Runtime struct {
	// Runtime is the runtime; or nil, and Open makes it.
	Runtime sandbox.Runtime
	// Open makes the runtime when the host first asks for its
	// description, as the plugin starts; an error fails that start with
	// its text (say, that no Docker engine answers).
	Open func(ctx context.Context) (sandbox.Runtime, error)
}

// KindName is "sandbox-runtime".
func (Runtime) KindName() string { return sandboxrpc.SandboxRuntimeName }

// ProcessPlugins serves the runtime at protocol 3, whose spec and
// capabilities are the contracts of package wire. A Runtime with neither
// or both of Runtime and Open cannot be served.
func (r Runtime) ProcessPlugins(plugin.ProcessHost) (map[int]goplugin.Plugin, error) {
	open, err := r.open()
	if err != nil {
		return nil, err
	}
	return map[int]goplugin.Plugin{pluginrpc.ProtocolV3: &sandboxrpc.SandboxRuntimePlugin{Impl: sandboxrpc.NewRuntimeServer(open)}}, nil
}

// open is the function that makes the runtime.
func (r Runtime) open() (func(context.Context) (sandbox.Runtime, error), error) {
	switch {
	case r.Runtime != nil && r.Open != nil:
		return nil, errors.New("the sandbox runtime has both a Runtime and an Open")
	case r.Runtime != nil:
		return func(context.Context) (sandbox.Runtime, error) { return r.Runtime, nil }, nil
	case r.Open != nil:
		return r.Open, nil
	}
	return nil, errors.New("the sandbox runtime has neither a Runtime nor an Open")
}

// Interface guard.
var _ plugin.ProcessKind = Runtime{}
