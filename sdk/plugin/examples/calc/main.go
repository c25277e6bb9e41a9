// Command calc is an example toolset plugin. The same source builds as a
// WASM module for Kiln's wazero host:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o calc.wasm .
//
// and as a native executable for the process host (go build). Besides the
// useful add, it has tools that exist to test the hosts: fetch (network
// permission), readfile and note (filesystem permission, logs, events), spin (call deadline),
// hog (memory cap) and echo (call overhead).
package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kilnhq/kiln/sdk/plugin"
)

func main() {
	plugin.Serve(toolset)
}

var toolset = plugin.Toolset{Tools: []plugin.Tool{
	{
		Name:        "add",
		Description: "Add two numbers.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`),
		Idempotent:  true,
		Handler:     add,
	},
	{
		Name:        "echo",
		Description: "Return the arguments unchanged.",
		Idempotent:  true,
		Handler: func(_ context.Context, args json.RawMessage) (string, error) {
			return string(args), nil
		},
	},
	{
		Name:        "fetch",
		Description: "GET a URL and report the status and body length.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]}`),
		Idempotent:  true,
		Handler:     fetch,
	},
	{
		Name:        "readfile",
		Description: "Read a file by its permission path (data:/...) and return its content.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		Idempotent:  true,
		Handler:     readfile,
	},
	{
		Name:        "note",
		Description: "Write text to data:/note.txt, logging and emitting a progress event.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		Handler:     note,
	},
	{
		Name:        "spin",
		Description: "Loop forever (tests the call deadline).",
		Handler: func(context.Context, json.RawMessage) (string, error) {
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
		Handler:     hog,
	},
}}

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
	status, n, err := get(ctx, in.URL)
	if err != nil {
		return "", err
	}
	out, _ := json.Marshal(map[string]int{"status": status, "length": n})
	return string(out), nil
}

func readfile(_ context.Context, args json.RawMessage) (string, error) {
	var in struct{ Path string }
	if err := json.Unmarshal(args, &in); err != nil {
		return "", fmt.Errorf("bad arguments: %w", err)
	}
	data, err := readFile(in.Path)
	if err != nil {
		return "", err
	}
	return string(data), nil
}

func note(_ context.Context, args json.RawMessage) (string, error) {
	var in struct{ Text string }
	if err := json.Unmarshal(args, &in); err != nil {
		return "", fmt.Errorf("bad arguments: %w", err)
	}
	if err := writeFile("data:/note.txt", []byte(in.Text)); err != nil {
		return "", err
	}
	progress(len(in.Text))
	return "ok", nil
}

var hoard [][]byte // keeps hog's memory reachable

func hog(_ context.Context, args json.RawMessage) (string, error) {
	var in struct{ MiB int }
	if err := json.Unmarshal(args, &in); err != nil {
		return "", fmt.Errorf("bad arguments: %w", err)
	}
	for i := 0; i < in.MiB; i++ {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		hoard = append(hoard, b)
	}
	n := len(hoard)
	hoard = nil
	return fmt.Sprintf("allocated %d MiB", n), nil
}
