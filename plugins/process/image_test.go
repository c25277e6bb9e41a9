//go:build unix

package process_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/sqlite"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/process"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/anthropic"
	"github.com/kilnhq/kiln/plugins/toolset"
)

// fakeAnthropic answers /v1/messages as Anthropic's API streams: first a
// call of the tool it was offered, then, once a tool result came back,
// text. It keeps every request.
type fakeAnthropic struct {
	mu       sync.Mutex
	requests []map[string]any
}

func (f *fakeAnthropic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/messages" {
		http.NotFound(w, r)
		return
	}
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	n := len(f.requests)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	event := func(name, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data) }
	event("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}`)
	if n == 1 {
		tools, _ := req["tools"].([]any)
		tool, _ := tools[0].(map[string]any)
		name, _ := json.Marshal(tool["name"])
		event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":`+string(name)+`,"input":{}}}`)
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"color\": \"#ff8800\", \"size\": 4}"}}`)
		event("content_block_stop", `{"type":"content_block_stop","index":0}`)
		event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":20}}`)
	} else {
		event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"An orange square."}}`)
		event("content_block_stop", `{"type":"content_block_stop","index":0}`)
		event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}`)
	}
	event("message_stop", `{"type":"message_stop"}`)
}

// TestImageReachesProvider runs Kiln's engine (core on SQLite) with the
// built-in anthropic provider, pointed at a fake Anthropic API, and the
// swatch example, a protocol 3 process plugin whose tool answers with an
// image: the model calls the tool, and the next request to the API
// carries the tool's text and its image, the PNG's bytes as the plugin
// drew them, as an image block of the tool result.
func TestImageReachesProvider(t *testing.T) {
	fake := &fakeAnthropic{}
	api := httptest.NewServer(fake)
	defer api.Close()
	p, err := anthropic.New(providers.Settings{APIKey: "sk-ant-test", BaseURL: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "kiln.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	svc, err := core.New(core.Config{Store: store, DefaultModel: "anthropic:claude-test", Models: func(string) (core.Model, error) {
		return providers.Model(p, "claude-test"), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Shutdown(context.Background()) })

	code := plugintest.Build(t, "github.com/kilnhq/kiln/sdk/plugin/examples/swatch", plugins.RuntimeProcess)
	dir, m := plugintest.WritePlugin(t, "swatch", plugins.RuntimeProcess, "swatch", code, "")
	inst, err := process.NewLoader(process.Options{Logger: testLogger(t)}).Load(ctx, plugins.LoadRequest{ID: m.ID, Dir: dir, Manifest: m, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	client, err := inst.Dispense(ctx, toolset.Name)
	if err != nil {
		t.Fatal(err)
	}
	att, err := toolset.Kind{}.Attach(ctx, plugins.Attach{ID: m.ID, Manifest: m, Client: client, Host: svc})
	if err != nil {
		t.Fatal(err)
	}
	defer att.Detach()

	owner := core.Principal{ID: "owner"}
	th, err := svc.CreateThread(ctx, owner, core.ThreadInput{Title: "swatch"})
	if err != nil {
		t.Fatal(err)
	}
	run, err := svc.StartRun(ctx, owner, th.ID, core.RunRequest{Input: core.RunInput{Text: "Draw me an orange swatch."}})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); !run.Status.Terminal(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the run is still %s after a minute", run.Status)
		}
		if run, err = svc.GetRun(ctx, owner, run.ID); err != nil {
			t.Fatal(err)
		}
	}
	if run.Status != core.RunSucceeded {
		t.Fatalf("run %s: %s", run.Status, run.Error)
	}

	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.requests) != 2 {
		t.Fatalf("the API got %d requests, want 2", len(fake.requests))
	}
	msgs, _ := fake.requests[1]["messages"].([]any)
	last, _ := msgs[len(msgs)-1].(map[string]any)
	blocks, _ := last["content"].([]any)
	result, _ := blocks[0].(map[string]any)
	content, _ := result["content"].([]any)
	if last["role"] != "user" || result["type"] != "tool_result" || result["tool_use_id"] != "toolu_1" || len(content) != 2 {
		t.Fatalf("the last message of the second request is %s; want the tool's result, its text and its image", pretty(last))
	}
	text, _ := content[0].(map[string]any)
	img, _ := content[1].(map[string]any)
	source, _ := img["source"].(map[string]any)
	if text["type"] != "text" || text["text"] != "A 4×4 swatch of #ff8800." || img["type"] != "image" || source["type"] != "base64" || source["media_type"] != "image/png" {
		t.Fatalf("the tool result's content is %s; want its text and a base64 PNG image block", pretty(content))
	}
	data, err := base64.StdEncoding.DecodeString(source["data"].(string))
	if err != nil {
		t.Fatal(err)
	}
	drawn, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the image block's bytes are not a PNG: %v", err)
	}
	if b := drawn.Bounds(); b.Dx() != 4 || b.Dy() != 4 || color.NRGBAModel.Convert(drawn.At(3, 3)) != (color.NRGBA{R: 0xff, G: 0x88, B: 0x00, A: 0xff}) {
		t.Errorf("the image is %v with %v at (3,3); want the plugin's 4×4 #ff8800 square", b, drawn.At(3, 3))
	}
}

func pretty(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	if len(b) > 2000 {
		b = append(b[:2000], "…"...)
	}
	return string(b)
}
