// Command parrot is an example model-provider plugin: a small,
// deterministic model that needs no network, so an agent can run through a
// third-party provider offline. Its models are "<plugin-id>:parrot-1".
//
// It answers the conversation's last message:
//
//   - a user message "use <tool> <json arguments>" becomes a call of that
//     tool (when the run offers it);
//   - a tool's result becomes the reply "<greeting>! <tool> said: <result>";
//   - a user message "system?" is answered with the system prompt:
//     "<greeting>! I was told: <system prompt>";
//   - anything else is repeated: "<greeting>! You said: <text>".
//
// Replies are streamed a word at a time. The greeting is a setting
// (`kiln providers set parrot --set greeting=Ahoy`), "Squawk" by default. The
// same source builds as a WASM module and as a native executable, like
// the calc example.
package main

import (
	"github.com/kilnhq/kiln/sdk/plugin"
	"github.com/kilnhq/kiln/sdk/plugin/examples/parrot/parrotmodel"
)

func main() {
	plugin.Serve(parrotmodel.Provider())
}
