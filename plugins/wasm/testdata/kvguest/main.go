// Command kvguest is a test plugin for the kv host functions: its one
// tool, kv, runs one sdk/plugin kv helper and returns what it got as
// JSON. plugins/wasm's tests build it for wasip1.
package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kilnhq/kiln/sdk/plugin"
)

func main() {
	plugin.Serve(plugin.Toolset{Tools: []plugin.Tool{{
		Name:        "kv",
		Description: "Run one kv operation: get, put, delete or list.",
		Handler:     plugin.TextHandler(kv),
	}}})
}

func kv(_ context.Context, args json.RawMessage) (string, error) {
	var in struct {
		Op, Key, Prefix, After string
		Value                  *string
		Limit                  int
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return "", fmt.Errorf("bad arguments: %w", err)
	}
	var out any
	var err error
	switch in.Op {
	case "get":
		var v []byte
		var ok bool
		v, ok, err = plugin.KVGet(in.Key)
		out = map[string]any{"found": ok, "value": string(v), "nil": v == nil}
	case "put":
		var v []byte
		if in.Value != nil {
			v = []byte(*in.Value)
		}
		err = plugin.KVPut(in.Key, v)
		out = "ok"
	case "delete":
		err = plugin.KVDelete(in.Key)
		out = "ok"
	case "list":
		var keys []string
		keys, err = plugin.KVList(in.Prefix, in.After, in.Limit)
		out = keys
	default:
		return "", fmt.Errorf("unknown op %q", in.Op)
	}
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(out)
	return string(b), err
}
