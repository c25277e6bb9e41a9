// Package providertest is the test kit of the provider packages.
//
// RunAgent runs a full agent run through a providers.Provider: a real
// core.Service on a SQLite store with the built-in echo tool, the provider
// as its only model. Provider packages point the provider at a local fake
// server that answers in the API's real wire format (first a tool call,
// then text) and check the result with CheckAgentRun.
//
// The fake server is a Server: it records every request and answers with
// recorded responses, Fixtures read from raw-HTTP files in testdata
// (ReadFixture, ServeFixtures) or made in the test (Serve), written piece
// by piece as the API streams them (Events, Lines, Chunks). Stream,
// CheckResponse, CheckModels, CheckError with tables of ErrorCase, and
// CheckCancelled with Hold check what a provider makes of the answers.
// ImageTurn (with PNG) and WithImage make the requests whose image and
// file parts a provider's request tests check.
package providertest

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/sqlite"
	"github.com/kilnhq/kiln/plugins/builtin"
	"github.com/kilnhq/kiln/plugins/providers"
)

// Result is what an agent run left.
type Result struct {
	Run      *core.Run
	Messages []*core.Message
}

// Tool returns the tool results of the run by tool name.
func (r Result) Tool(name string) []*core.Message {
	var out []*core.Message
	for _, m := range r.Messages {
		if m.Role == core.RoleTool && m.Name == name {
			out = append(out, m)
		}
	}
	return out
}

// Call returns the tool call of the run with the given ID.
func (r Result) Call(id string) (core.ToolCall, bool) {
	for _, m := range r.Messages {
		for _, c := range m.ToolCalls {
			if c.ID == id {
				return c, true
			}
		}
	}
	return core.ToolCall{}, false
}

// Final returns the text of the last assistant message.
func (r Result) Final() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == core.RoleAssistant {
			return r.Messages[i].Text
		}
	}
	return ""
}

// RunAgent runs prompt through p's model on a fresh service whose tools
// are the built-ins (echo, append_file with no approval needed, sleep),
// waits for the run to end (30 s at most) and returns it with the thread's
// messages. The model reference is "<providerID>:<model>".
func RunAgent(t testing.TB, providerID string, p providers.Provider, model, prompt string) Result {
	t.Helper()
	dir := t.TempDir()
	store, err := sqlite.Open(filepath.Join(dir, "kiln.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ref := providerID + ":" + model
	svc, err := core.New(core.Config{
		Store: store,
		Models: func(r string) (core.Model, error) {
			id, m, ok := strings.Cut(r, ":")
			if !ok || id != providerID {
				return nil, core.Errorf(core.EINVALID, "unknown model %q", r)
			}
			return providers.Model(p, m), nil
		},
		Tools:        builtin.Tools(filepath.Join(dir, "scratch")),
		DefaultModel: ref,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Shutdown(context.Background()) })
	th, err := svc.CreateThread(ctx, core.LocalOwner, core.ThreadInput{Title: "agent run"})
	if err != nil {
		t.Fatal(err)
	}
	run, err := svc.StartRun(ctx, core.LocalOwner, th.ID, core.RunRequest{Input: core.RunInput{Text: prompt}, Model: ref,
		InterruptOn: core.Policy{"append_file": {Interrupt: false}}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if run, err = svc.GetRun(ctx, core.LocalOwner, run.ID); err != nil {
			t.Fatal(err)
		}
		if run.Status != core.RunQueued && run.Status != core.RunRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still %s after 30 s", run.ID, run.Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
	msgs, err := svc.Messages(ctx, core.LocalOwner, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	return Result{Run: run, Messages: msgs}
}

// WithImage returns m, a tool result of text, with the PNG image part
// after its text, and the text a provider sends for it where its API
// takes no images in tool results (the text, then the line
// providers.StandIn stands in for the image): conversation tests use it
// to check that a provider reads a result's parts.
func WithImage(m *core.Message) (*core.Message, string) {
	c := *m
	c.SetContent([]core.Part{core.TextPart(m.Text), {Type: core.PartImage, MIME: "image/png", Data: PNG}})
	return &c, m.Text + "\n[image (image/png) not shown]"
}

// PNG is a real PNG image, one orange pixel, for the tests of image
// parts.
var PNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\b\x02\x00\x00\x00\x90wS\xde\x00\x00\x00\x10IDATx\x9cb\xfa\xdf\xc0\x00\b\x00\x00\xff\xff\x04\t\x01\x82$\xc1\x835\x00\x00\x00\x00IEND\xaeB`\x82")

// PNGBase64 is PNG in standard base64, as the APIs carry image bytes.
const PNGBase64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAAEElEQVR4nGL638AACAAA//8ECQGCJMGDNQAAAABJRU5ErkJggg=="

// The parts of ImageTurn's user message.
const (
	// ImageAsk and ImageAfter are its text parts, before and after the
	// image and the file.
	ImageAsk   = "What is in the image and the file?"
	ImageAfter = "Answer in one line."
	// CSVStandIn is the line a provider sends for its file part.
	CSVStandIn = `[file "data.csv" (text/csv) not shown]`
)

// ImageTurn is a model request of one user message of four parts: the
// text ImageAsk, the PNG image inline, a text/csv file by reference
// (data.csv at attachment://att_x, which a provider stands CSVStandIn in
// for) and the text ImageAfter.
func ImageTurn() core.ModelRequest {
	m := &core.Message{Role: core.RoleUser}
	m.SetContent([]core.Part{
		core.TextPart(ImageAsk),
		{Type: core.PartImage, MIME: "image/png", Name: "pixel.png", Data: PNG},
		{Type: core.PartFile, MIME: "text/csv", Name: "data.csv", URI: "attachment://att_x"},
		core.TextPart(ImageAfter),
	})
	return core.ModelRequest{Messages: []*core.Message{m}}
}
