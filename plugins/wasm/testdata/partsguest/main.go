// Command partsguest is a guest of Kiln WASM ABI version 3, built with the
// SDK, whose tools return content parts: an image, a file, JSON, the
// tool's own failure, a result that breaks the contract and a panic.
package main

import (
	"context"
	_ "embed"
	"encoding/json"

	"github.com/kilnhq/kiln/sdk/plugin"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// pixel is a PNG of one transparent pixel.
//
//go:embed pixel.png
var pixel []byte

func tool(name string, run func() (plugin.Result, error)) plugin.Tool {
	return plugin.Tool{Name: name, Description: "Returns " + name + ".", Idempotent: true,
		Handler: func(context.Context, json.RawMessage) (plugin.Result, error) { return run() }}
}

func main() {
	plugin.Serve(plugin.Toolset{Tools: []plugin.Tool{
		tool("image", func() (plugin.Result, error) {
			return wire.Result(wire.Text("a pixel:"), wire.Image("image/png", pixel)), nil
		}),
		tool("file", func() (plugin.Result, error) { return plugin.FileResult("r.txt", "text/plain", []byte("hello")), nil }),
		tool("json", func() (plugin.Result, error) { return plugin.JSONResult(map[string]int{"sum": 3}) }),
		tool("fail", func() (plugin.Result, error) {
			return plugin.Result{IsError: true, Parts: []wire.Part{wire.Text("no b")}}, nil
		}),
		tool("bad", func() (plugin.Result, error) {
			return wire.Result(wire.Part{Type: wire.PartImage, MIME: "text/plain", Data: []byte{1}}), nil
		}),
		tool("boom", func() (plugin.Result, error) { panic("boom") }),
	}})
}
