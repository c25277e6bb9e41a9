// Command guest is a plugin of the test-only "greeter" kind, defined
// outside the SDK: it serves a greeter through sdk/plugin's extension
// point (plugin.Serve of a Kind that says how to serve itself over each
// transport; process.go has the process transport's half, wasm.go the
// WASM ABI's), and emits a progress event through the host's callbacks
// for each greeting.
package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/kilnhq/kiln/sdk/plugin"
)

// greeter is the "greeter" kind as its plugin serves it.
type greeter struct {
	// name is what the greeter calls itself.
	name string
	// greet greets one person.
	greet func(ctx context.Context, name string) (string, error)
}

// KindName is "greeter".
func (greeter) KindName() string { return "greeter" }

func main() {
	plugin.Serve(greeter{name: "polite", greet: func(ctx context.Context, name string) (string, error) {
		if name == "" {
			return "", errors.New("whom should I greet?")
		}
		if err := plugin.Emit(ctx, map[string]string{"greeted": name}); err != nil {
			plugin.Log(slog.LevelWarn, "no progress event: "+err.Error())
		}
		return "Hello, " + name + "!", nil
	}})
}
