// Package sandboxruntime is the "sandbox-runtime" extension kind: a
// backend that runs sandboxes (Docker, WASM, later Kubernetes). Its
// client is a sandbox.Runtime (package sandbox holds the interface and
// its contracts, sandbox/sandboxtest the conformance suite every runtime
// passes). Attach hands the runtime to the server's sandbox service (a
// Host) under the plugin's ID, which must also be the runtime's own name
// (Capabilities.Name), so that what the service and the runtime say
// ("sandbox runtime "docker" does not support pause") names the plugin
// the user installed. A server without a sandbox service fails the
// plugin, saying so, rather than attaching a runtime nothing would use.
//
// Runtimes: built-in plugins hand out their sandbox.Runtime through
// plugins.Clients, or, like the docker one, run as a process plugin
// (plugins/process.LoadSelf); a "process" plugin hands out a
// sandbox.Runtime over gRPC (specs/proto/sandboxruntime.proto; this
// package's process.go registers the adapter), which passes
// sandboxtest.Run as a built-in does (plugins/process's tests). The
// "wasm" runtime's ABI carries no sandbox runtime, so it does not carry
// this kind.
package sandboxruntime

import (
	"context"
	"errors"
	"fmt"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/sandbox"
)

// Name is the kind's name, as manifests list it in "provides".
const Name plugins.Capability = "sandbox-runtime"

// Host takes a plugin's sandbox runtime while the plugin is enabled: the
// server's sandbox service. AddRuntime makes r available under name (the
// plugin's ID) or says why not; RemoveRuntime withdraws it, and the
// service then fails operations on the sandboxes it ran with the reason.
type Host interface {
	AddRuntime(name string, r sandbox.Runtime) error
	RemoveRuntime(name string)
}

func init() { plugins.RegisterKind(Kind{}) }

// Kind is the "sandbox-runtime" kind.
type Kind struct{}

// Name is "sandbox-runtime".
func (Kind) Name() plugins.Capability { return Name }

// Attach adds the plugin's runtime to the sandbox service.
func (Kind) Attach(_ context.Context, a plugins.Attach) (plugins.Attached, error) {
	r, ok := a.Client.(sandbox.Runtime)
	if !ok {
		return plugins.Attached{}, fmt.Errorf("the runtime handed out %T for %q, not a sandbox runtime", a.Client, Name)
	}
	host, ok := a.Host.(Host)
	if !ok {
		return plugins.Attached{}, errors.New("this server has no sandbox service yet, so it cannot use a sandbox runtime")
	}
	if name := r.Capabilities().Name; name != a.ID {
		return plugins.Attached{}, fmt.Errorf("the sandbox runtime calls itself %q; it must be the plugin's id %q", name, a.ID)
	}
	if err := host.AddRuntime(a.ID, r); err != nil {
		return plugins.Attached{}, err
	}
	return plugins.Attached{Items: []string{a.ID}, Detach: func() { host.RemoveRuntime(a.ID) }}, nil
}

// Interface guard.
var _ plugins.Kind = Kind{}
