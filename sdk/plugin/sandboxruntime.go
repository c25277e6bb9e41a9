//go:build !wasip1

package plugin

import (
	"context"
	"errors"

	"github.com/kilnhq/kiln/sandbox"
)

// SandboxRuntime is what a sandbox-runtime plugin serves: a backend that
// runs sandboxes (package sandbox holds the interface and its contracts,
// sandbox/sandboxtest the conformance suite to run it through). Kiln
// attaches it under the plugin's ID, which must be its
// Capabilities().Name. A runtime that is also a sandbox.Lister or a
// sandbox.ExecDialer is used as one; a sandbox.Pauser, when its
// Capabilities say Pause. It is served by a native build only: a process
// plugin, since a sandbox backend needs the OS (the Docker socket). Its
// calls do not name the host's callbacks, so the key/value functions and
// Emit fail in them and Log writes to stderr, which the host logs.
type SandboxRuntime struct {
	// Runtime is the runtime; or nil, and Open makes it.
	Runtime sandbox.Runtime
	// Open makes the runtime when the host first asks for its
	// description, as the plugin starts; an error fails that start with
	// its text (say, that no Docker engine answers).
	Open func(ctx context.Context) (sandbox.Runtime, error)
}

// KindName is "sandbox-runtime".
func (SandboxRuntime) KindName() string { return "sandbox-runtime" }

// open is the function that makes the runtime.
func (s SandboxRuntime) open() (func(context.Context) (sandbox.Runtime, error), error) {
	switch {
	case s.Runtime != nil && s.Open != nil:
		return nil, errors.New("the sandbox runtime has both a Runtime and an Open")
	case s.Runtime != nil:
		return func(context.Context) (sandbox.Runtime, error) { return s.Runtime, nil }, nil
	case s.Open != nil:
		return s.Open, nil
	}
	return nil, errors.New("the sandbox runtime has neither a Runtime nor an Open")
}
