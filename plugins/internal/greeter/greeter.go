// Package greeter is the "greeter" extension kind, which exists only for
// Kiln's tests: it shows that a kind which carries code is one package
// and its .proto, with nothing added to the runtimes (plugins/process,
// plugins/wasm), the plugin SDK (sdk/plugin) or the manifest parser. A
// server would link it with one line in cmd/kiln/imports.go; Kiln's does
// not.
//
// A greeter greets people by name. The package holds what any kind
// holds: the kind's name and client interface, its Host and Kind (Attach
// hands the greeter to the Host), and an adapter per runtime that
// carries it, registered from init — process.go for the process runtime,
// over greeterrpc (greeter.proto), and wasm.go for the WASM runtime, over
// ABI 3's generic requests. Its guest, testdata/guest, serves a greeter
// through the SDK's extension point, in either build (plugin.ProcessKind,
// plugin.WASMKind).
package greeter

import (
	"context"
	"errors"
	"fmt"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/internal/greeter/greeterrpc"
)

// Name is the kind's name, as manifests list it in "provides".
const Name plugins.Capability = greeterrpc.Name

// Greeter is the client of the kind: what a runtime dispenses for it.
type Greeter interface {
	// Name is what the greeter calls itself.
	Name() string
	// Greet returns the greeting of the person called name. An error is
	// the greeter's own failure or, wrapping plugins.ErrTransport, the
	// channel's.
	Greet(ctx context.Context, name string) (string, error)
}

// Host takes a plugin's greeter while the plugin is enabled.
type Host interface {
	AddGreeter(id string, g Greeter) error
	RemoveGreeter(id string)
}

func init() { plugins.RegisterKind(Kind{}) }

// Kind is the "greeter" kind.
type Kind struct{}

// Name is "greeter".
func (Kind) Name() plugins.Capability { return Name }

// Attach hands the plugin's greeter to the host under the plugin's ID.
func (Kind) Attach(_ context.Context, a plugins.Attach) (plugins.Attached, error) {
	g, ok := a.Client.(Greeter)
	if !ok {
		return plugins.Attached{}, fmt.Errorf("the runtime handed out %T for %q, not a greeter", a.Client, Name)
	}
	host, ok := a.Host.(Host)
	if !ok {
		return plugins.Attached{}, errors.New("this server takes no greeters")
	}
	if err := host.AddGreeter(a.ID, g); err != nil {
		return plugins.Attached{}, err
	}
	return plugins.Attached{Items: []string{g.Name()}, Detach: func() { host.RemoveGreeter(a.ID) }}, nil
}

// Interface guard.
var _ plugins.Kind = Kind{}
