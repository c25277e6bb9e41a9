package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/providertest"
)

// fuzzStream feeds arbitrary bytes to a stream reader: it must return a
// response or an error, never panic, and a response's tool calls must
// have valid JSON arguments.
func fuzzStream(f *testing.F, fixtures []string, read func(*client, []byte, *providers.ToolNames) (core.ModelResponse, error)) {
	for _, name := range fixtures {
		f.Add(providertest.ReadFixture(f, name).Body)
	}
	f.Add([]byte("data: [DONE]\n\n"))
	f.Add([]byte(": comment\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"{\"}}]}}]}\n\n"))
	names := providers.NewToolNames([]core.ToolSpec{echoSpec, addSpec}, nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := read(&client{id: ID}, data, names)
		if err != nil {
			return
		}
		for _, c := range resp.ToolCalls {
			if !json.Valid(c.Args) {
				t.Fatalf("invalid arguments %q", c.Args)
			}
		}
	})
}

func FuzzChatStream(f *testing.F) {
	fuzzStream(f, []string{"chat/text.http", "chat/tool_call.http", "chat/parallel_tool_calls.http", "chat/stream_error.http", "chat/truncated.http"},
		func(c *client, data []byte, names *providers.ToolNames) (core.ModelResponse, error) {
			return c.readChat(context.Background(), bytes.NewReader(data), names, func(string) {})
		})
}

func FuzzResponsesStream(f *testing.F) {
	fuzzStream(f, []string{"responses/text.http", "responses/tool_call.http", "responses/parallel_tool_calls.http", "responses/failed.http", "responses/error_event.http", "responses/truncated.http"},
		func(c *client, data []byte, names *providers.ToolNames) (core.ModelResponse, error) {
			return c.readResponses(context.Background(), bytes.NewReader(data), names, func(string) {})
		})
}
