// Package calctools is the tool set of the calc example plugin
// (sdk/plugin/examples/calc) as a value, so the same author code can be
// served by a WASM module or a plugin process and checked by
// plugins/plugintest. It uses the SDK's helpers and has no build tags: in
// a WASM build fetch, readfile, note and counter go through the host,
// which enforces the manifest's permissions; in a native build fetch uses
// net/http and readfile and note the folder KILN_PLUGIN_DATA names,
// directly, while note's progress event and counter's key/value store go
// through the host's callbacks. Called directly, as a unit test does,
// there are no callbacks: note's event is not sent and counter fails.
package calctools

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/kilnhq/kiln/sdk/plugin"
)

// Toolset returns calc's tools: add, echo, fetch, readfile, note, spin, hog
// and counter, in that order. Each call returns a new value; the handlers share no
// state, so they are safe for concurrent calls.
func Toolset() plugin.Toolset {
	return plugin.Toolset{Tools: []plugin.Tool{
		{
			Name:        "add",
			Description: "Add two numbers.",
			Schema:      json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`),
			Idempotent:  true,
			Handler:     plugin.TextHandler(add),
		},
		{
			Name:        "echo",
			Description: "Return the arguments unchanged.",
			Idempotent:  true,
			Handler: func(_ context.Context, args json.RawMessage) (plugin.Result, error) {
				return plugin.TextResult(string(args)), nil
			},
		},
		{
			Name:        "fetch",
			Description: "GET a URL and report the status and body length.",
			Schema:      json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]}`),
			Idempotent:  true,
			Handler:     plugin.TextHandler(fetch),
		},
		{
			Name:        "readfile",
			Description: "Read a file by its permission path (data:/...) and return its content.",
			Schema:      json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
			Idempotent:  true,
			Handler:     plugin.TextHandler(readfile),
		},
		{
			Name:        "note",
			Description: "Write text to data:/note.txt, logging and emitting a progress event.",
			Schema:      json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
			Handler:     plugin.TextHandler(note),
		},
		{
			Name:        "spin",
			Description: "Loop forever (tests the call deadline).",
			Handler: func(context.Context, json.RawMessage) (plugin.Result, error) {
				n := 0
				for {
					n++
				}
			},
		},
		{
			Name:        "hog",
			Description: "Allocate and touch mib MiB of memory (tests the memory cap).",
			Schema:      json.RawMessage(`{"type":"object","properties":{"mib":{"type":"integer"}},"required":["mib"]}`),
			Handler:     plugin.TextHandler(hog),
		},
		{
			Name:        "counter",
			Description: "Add 1 to a counter kept in the plugin's key/value store (key, default \"counter\") and return its new value.",
			Schema:      json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"}}}`),
			Handler:     plugin.TextHandler(counter),
		},
	}}
}

func add(_ context.Context, args json.RawMessage) (string, error) {
	var in struct {
		A, B *float64
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return "", fmt.Errorf("bad arguments: %w", err)
	}
	if in.A == nil || in.B == nil {
		return "", fmt.Errorf(`bad arguments: "a" and "b" are required`)
	}
	out, _ := json.Marshal(*in.A + *in.B)
	return string(out), nil
}

func fetch(ctx context.Context, args json.RawMessage) (string, error) {
	var in struct{ URL string }
	if err := json.Unmarshal(args, &in); err != nil {
		return "", fmt.Errorf("bad arguments: %w", err)
	}
	resp, err := plugin.HTTP(ctx, plugin.HTTPRequest{Method: "GET", URL: in.URL})
	if err != nil {
		return "", err
	}
	out, _ := json.Marshal(map[string]int{"status": resp.Status, "length": len(resp.Body)})
	return string(out), nil
}

func readfile(_ context.Context, args json.RawMessage) (string, error) {
	var in struct{ Path string }
	if err := json.Unmarshal(args, &in); err != nil {
		return "", fmt.Errorf("bad arguments: %w", err)
	}
	data, err := plugin.ReadFile(in.Path)
	if err != nil {
		return "", err
	}
	return string(data), nil
}

func note(ctx context.Context, args json.RawMessage) (string, error) {
	var in struct{ Text string }
	if err := json.Unmarshal(args, &in); err != nil {
		return "", fmt.Errorf("bad arguments: %w", err)
	}
	if err := plugin.WriteFile("data:/note.txt", []byte(in.Text)); err != nil {
		return "", err
	}
	plugin.Log(slog.LevelInfo, "note written")
	if err := plugin.Emit(ctx, map[string]int{"wrote": len(in.Text)}); err != nil {
		plugin.Log(slog.LevelWarn, "progress event not sent: "+err.Error())
	}
	return "ok", nil
}

func hog(_ context.Context, args json.RawMessage) (string, error) {
	var in struct{ MiB int }
	if err := json.Unmarshal(args, &in); err != nil {
		return "", fmt.Errorf("bad arguments: %w", err)
	}
	// hoard keeps the memory reachable until the count is taken; it is
	// local so concurrent in-process calls do not share it.
	var hoard [][]byte
	for i := 0; i < in.MiB; i++ {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		hoard = append(hoard, b)
	}
	return fmt.Sprintf("allocated %d MiB", len(hoard)), nil
}

func counter(_ context.Context, args json.RawMessage) (string, error) {
	in := struct{ Key *string }{}
	if err := json.Unmarshal(args, &in); err != nil {
		return "", fmt.Errorf("bad arguments: %w", err)
	}
	key := "counter"
	if in.Key != nil {
		key = *in.Key // may be invalid: the host is the judge
	}
	n := 0
	v, ok, err := plugin.KVGet(key)
	if err != nil {
		return "", err
	}
	if ok {
		if n, err = strconv.Atoi(string(v)); err != nil {
			return "", fmt.Errorf("counter %q holds %q, not a number", key, v)
		}
	}
	n++
	if err := plugin.KVPut(key, []byte(strconv.Itoa(n))); err != nil {
		return "", err
	}
	return strconv.Itoa(n), nil
}
