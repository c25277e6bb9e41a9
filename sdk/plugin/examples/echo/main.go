// Command echo is a small toolset plugin that the process host's tests
// run as a real subprocess; it builds for both targets (go build, and
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared). Its tools:
//
//	echo   returns its arguments unchanged (the call-overhead benchmark)
//	env    returns the environment as a JSON object, without go-plugin's
//	       handshake variables (the environment-scrubbing test)
//	sleep  waits {"ms": n} milliseconds or until the call is cancelled
//	fail   returns an error with {"message": "..."}
//	pid    returns the process ID
package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kilnhq/kiln/sdk/plugin"
)

func main() {
	plugin.Serve(plugin.Toolset{Tools: []plugin.Tool{
		{
			Name:        "echo",
			Description: "Return the arguments unchanged.",
			Idempotent:  true,
			Handler: func(_ context.Context, args json.RawMessage) (plugin.Result, error) {
				return plugin.TextResult(string(args)), nil
			},
		},
		{
			Name:        "env",
			Description: "Return the environment variables the plugin sees, except go-plugin's own.",
			Idempotent:  true,
			Handler:     plugin.TextHandler(env),
		},
		{
			Name:        "sleep",
			Description: "Wait ms milliseconds, or until the call is cancelled.",
			Schema:      json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer"}},"required":["ms"]}`),
			Handler:     plugin.TextHandler(sleep),
		},
		{
			Name:        "fail",
			Description: "Fail with the given message.",
			Schema:      json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}}}`),
			Handler: func(_ context.Context, args json.RawMessage) (plugin.Result, error) {
				var in struct{ Message string }
				if err := json.Unmarshal(args, &in); err != nil {
					return plugin.Result{}, err
				}
				return plugin.Result{}, errors.New(in.Message)
			},
		},
		{
			Name:        "pid",
			Description: "Return the plugin's process ID.",
			Idempotent:  true,
			Handler: func(context.Context, json.RawMessage) (plugin.Result, error) {
				return plugin.TextResult(strconv.Itoa(os.Getpid())), nil
			},
		},
	}})
}

// handshakeVar reports the variables go-plugin sets for its handshake.
func handshakeVar(name string) bool {
	return strings.HasPrefix(name, "PLUGIN_") || name == "KILN_PLUGIN_MAGIC_COOKIE"
}

func env(context.Context, json.RawMessage) (string, error) {
	out := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if !handshakeVar(k) {
			out[k] = v
		}
	}
	b, err := json.Marshal(out)
	return string(b), err
}

func sleep(ctx context.Context, args json.RawMessage) (string, error) {
	var in struct{ MS int }
	if err := json.Unmarshal(args, &in); err != nil {
		return "", err
	}
	select {
	case <-time.After(time.Duration(in.MS) * time.Millisecond):
		return "slept", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
