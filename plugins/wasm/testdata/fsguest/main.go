// Command fsguest is a test plugin for the fs host functions on any
// permission path: read returns a file's content, write writes text to
// one. plugins/wasm's tests build it for wasip1.
package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kilnhq/kiln/sdk/plugin"
)

func main() {
	plugin.Serve(plugin.Toolset{Tools: []plugin.Tool{
		{Name: "read", Description: "Read the file at path.", Handler: plugin.TextHandler(read)},
		{Name: "write", Description: "Write text to the file at path.", Handler: plugin.TextHandler(write)},
	}})
}

type args struct {
	Path string
	Text string
}

func decode(raw json.RawMessage) (args, error) {
	var a args
	if err := json.Unmarshal(raw, &a); err != nil {
		return a, fmt.Errorf("bad arguments: %w", err)
	}
	return a, nil
}

func read(_ context.Context, raw json.RawMessage) (string, error) {
	a, err := decode(raw)
	if err != nil {
		return "", err
	}
	b, err := plugin.ReadFile(a.Path)
	return string(b), err
}

func write(_ context.Context, raw json.RawMessage) (string, error) {
	a, err := decode(raw)
	if err != nil {
		return "", err
	}
	if err := plugin.WriteFile(a.Path, []byte(a.Text)); err != nil {
		return "", err
	}
	return "ok", nil
}
