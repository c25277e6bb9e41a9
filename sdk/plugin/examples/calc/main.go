// Command calc is an example toolset plugin. The same source, with no
// build tags, builds as a WASM module for Kiln's wazero host:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o calc.wasm .
//
// and as a native executable for the process host (go build). Besides the
// useful add, it has tools that exist to test the hosts: fetch (network
// permission), readfile and note (filesystem permission, logs, events),
// counter (the key/value store, WASM only), spin (call deadline), hog
// (memory cap) and echo (call overhead). The tools live in package
// calctools, whose test calls them directly and keeps their specs equal to
// plugins/toolset/toolsettest/calc-tools.json.
package main

import (
	"github.com/kilnhq/kiln/sdk/plugin"
	"github.com/kilnhq/kiln/sdk/plugin/examples/calc/calctools"
)

func main() {
	plugin.Serve(calctools.Toolset())
}
