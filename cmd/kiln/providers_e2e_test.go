package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// fakeOllama answers /api/chat like Ollama: NDJSON, first a call to echo,
// then text once the request carries the echo result; /api/tags lists one
// model.
type fakeOllama struct {
	mu       sync.Mutex
	requests []map[string]any
}

func (f *fakeOllama) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/tags":
		io.WriteString(w, `{"models":[{"name":"llama3.2:3b","model":"llama3.2:3b","details":{"parameter_size":"3.2B"}}]}`)
	case "/api/chat":
		var req map[string]any
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.requests = append(f.requests, req)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-ndjson")
		msgs, _ := req["messages"].([]any)
		last, _ := msgs[len(msgs)-1].(map[string]any)
		if last["role"] == "tool" {
			io.WriteString(w, `{"model":"llama3.2:3b","message":{"role":"assistant","content":"The echo said "},"done":false}`+"\n")
			w.(http.Flusher).Flush()
			io.WriteString(w, `{"model":"llama3.2:3b","message":{"role":"assistant","content":"hi."},"done":false}`+"\n")
			io.WriteString(w, `{"model":"llama3.2:3b","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":40,"eval_count":6}`+"\n")
			return
		}
		io.WriteString(w, `{"model":"llama3.2:3b","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"echo","arguments":{"text":"hi"}}}]},"done":false}`+"\n")
		io.WriteString(w, `{"model":"llama3.2:3b","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":30,"eval_count":9}`+"\n")
	default:
		http.NotFound(w, r)
	}
}

// TestProvidersEndToEnd: kiln serve with OLLAMA_HOST pointing at a fake
// Ollama and KILN_MODEL=ollama:<model> runs an agent through it with no
// other setup; the models endpoint lists the model; a provider whose API
// redirects to another host is refused.
func TestProvidersEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	fake := &fakeOllama{}
	ollama := httptest.NewServer(fake)
	defer ollama.Close()
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a provider reached a host that is not its own: %s", r.URL)
	}))
	defer elsewhere.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirecting.Close()

	addr, data := procAddr(t), t.TempDir()
	srv := startProc(t, addr, data,
		"OLLAMA_HOST="+strings.TrimPrefix(ollama.URL, "http://"),
		"KILN_MODEL=ollama:llama3.2:3b",
		"ANTHROPIC_API_KEY=sk-ant-test", "ANTHROPIC_BASE_URL="+redirecting.URL)
	c := srv.client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	models, err := c.Models(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range models.Models {
		found = found || m.Ref == "ollama:llama3.2:3b"
	}
	if !found || models.Default != "ollama:llama3.2:3b" {
		t.Errorf("models %+v", models)
	}

	// The default model, from the environment alone.
	first, err := c.CreateThread(ctx, core.ThreadInput{Title: "ollama"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.StartRun(ctx, first.ID, core.RunRequest{Input: core.RunInput{Text: "say hi through echo"}})
	if err == nil {
		r, err = c.WaitRun(ctx, r.ID)
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != core.RunSucceeded || r.Model != "ollama:llama3.2:3b" || r.Usage != (core.Usage{InputTokens: 70, OutputTokens: 15}) {
		t.Fatalf("run through ollama: %+v", r)
	}
	msgs, err := c.Messages(ctx, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if last := msgs[len(msgs)-1]; last.Text != "The echo said hi." || msgs[2].Role != core.RoleTool || msgs[2].Text != `{"text":"hi"}` {
		t.Errorf("messages %+v", msgs)
	}
	th, err := c.GetThread(ctx, r.ThreadID)
	if err != nil || th.Usage != r.Usage || th.Model != "ollama:llama3.2:3b" {
		t.Errorf("thread %+v, %v", th, err)
	}
	fake.mu.Lock()
	if n := len(fake.requests); n != 2 {
		t.Errorf("%d chat requests", n)
	}
	fake.mu.Unlock()

	// A provider is confined to its own host: the redirect is refused and
	// the run fails saying so.
	thr, err := c.CreateThread(ctx, core.ThreadInput{Title: "confined"})
	if err != nil {
		t.Fatal(err)
	}
	r, err = c.StartRun(ctx, thr.ID, core.RunRequest{Input: core.RunInput{Text: "hello"}, Model: "anthropic:claude-sonnet-4-5"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err = c.WaitRun(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if r.Status != core.RunFailed || !strings.Contains(r.Error, "not permitted by permissions.network") {
		t.Errorf("run through a redirecting API: %s %q", r.Status, r.Error)
	}

	// An unconfigured provider is refused up front, with what to set.
	_, err = c.StartRun(ctx, thr.ID, core.RunRequest{Input: core.RunInput{Text: "hello"}, Model: "openrouter:openai/gpt-4o"})
	if err == nil || !strings.Contains(err.Error(), "OPENROUTER_API_KEY") {
		t.Errorf("run on an unconfigured provider: %v", err)
	}
}
