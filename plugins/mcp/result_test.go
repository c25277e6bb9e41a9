package mcp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/sqlite"
	"github.com/kilnhq/kiln/plugins/mcp/mcpservers"
)

// callsModel calls the tools of calls, one a turn, then answers "done".
type callsModel []core.ToolCall

func (m callsModel) Turn(_ context.Context, req core.ModelRequest, _ func(string)) (core.ModelResponse, error) {
	turn := 0
	for _, msg := range req.Messages {
		if msg.Role == core.RoleAssistant {
			turn++
		}
	}
	if turn < len(m) {
		return core.ModelResponse{ToolCalls: []core.ToolCall{m[turn]}}, nil
	}
	return core.ModelResponse{Text: "done"}, nil
}

// memory returns the heap in use after a full collection, with the freed
// memory handed back to the OS, and the process's resident set (0 where
// /proc/self/status does not say it).
func memory() (heap, rss uint64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				fmt.Sscanf(strings.TrimSpace(v), "%d kB", &rss)
				rss <<= 10
			}
		}
	}
	return ms.HeapInuse, rss
}

// TestHugeResult: an MCP server answers with 30 MiB of text and an 8 MiB
// image; the run stores the text capped (head and tail, the cut stated)
// and a line for the image, and the memory the answers took is released
// (the heap in use after the run is back near where it was before it).
func TestHugeResult(t *testing.T) {
	nodePath := node(t)
	script, err := filepath.Abs(filepath.Join("testdata", "npm", "huge-server.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	npmServer(t, "server-everything") // the SDK is installed with it
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "kiln.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	model := callsModel{
		{ID: "c1", Name: "mcp.huge.text", Args: []byte(`{"mib":30}`)},
		{ID: "c2", Name: "mcp.huge.image", Args: []byte(`{"mib":8}`)},
	}
	svc, err := core.New(core.Config{Store: store, DefaultModel: "calls", Models: func(string) (core.Model, error) { return model, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Shutdown(context.Background()) })
	m := start(t, svc, Config{Servers: []ServerConfig{{Server: mcpservers.Server{Name: "huge", Command: nodePath, Args: []string{script}}}}})
	waitState(t, m, "huge", StateConnected)
	p := core.Principal{ID: "owner"}
	th, err := svc.CreateThread(ctx, p, core.ThreadInput{Title: "huge"})
	if err != nil {
		t.Fatal(err)
	}

	before, rssBefore := memory()
	run, err := svc.StartRun(ctx, p, th.ID, core.RunRequest{Input: core.RunInput{Text: "go"}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !run.Status.Terminal() {
		if time.Now().After(deadline) {
			t.Fatalf("run is %s", run.Status)
		}
		time.Sleep(20 * time.Millisecond)
		if run, err = svc.GetRun(ctx, p, run.ID); err != nil {
			t.Fatal(err)
		}
	}
	if run.Status != core.RunSucceeded {
		t.Fatalf("run %s: %s", run.Status, run.Error)
	}
	msgs, err := svc.Messages(ctx, p, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]*core.Message{}
	for _, msg := range msgs {
		if msg.Role == core.RoleTool {
			results[msg.Name] = msg
		}
	}
	text := results["mcp.huge.text"]
	if text == nil || !capped(text.Text, 30<<20, core.DefaultMaxToolResult) {
		t.Fatalf("text result: %s", excerpt(text))
	}
	img := results["mcp.huge.image"]
	if want := "[image (image/png, 8 MiB) left out: a tool result keeps 5 MiB of inline images and files]"; img == nil || img.Text != want || len(img.Parts) != 0 {
		t.Fatalf("image result: %s, want %q", excerpt(img), want)
	}
	msgs, results, text, img = nil, nil, nil, nil

	after, rssAfter := memory()
	t.Logf("heap in use: %.1f MiB before the run, %.1f MiB after it; RSS %.1f MiB before, %.1f MiB after",
		mib(before), mib(after), mib(rssBefore), mib(rssAfter))
	if after > before+8<<20 {
		t.Errorf("heap in use grew from %.1f to %.1f MiB: the huge answers are still held", mib(before), mib(after))
	}
	// Stored whole, the 30 MiB answer keeps the RSS over 100 MiB higher.
	if rssBefore > 0 && rssAfter > rssBefore+32<<20 {
		t.Errorf("RSS grew from %.1f to %.1f MiB", mib(rssBefore), mib(rssAfter))
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// TestBridgeCapsResult: the bridge caps a result to the call's
// CallEnv.MaxResult as it converts it, before the engine sees it.
func TestBridgeCapsResult(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("testdata", "npm", "huge-server.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	host := newHost()
	m := start(t, host, Config{Servers: []ServerConfig{{Server: mcpservers.Server{Name: "huge", Command: node(t), Args: []string{script}}}}})
	waitState(t, m, "huge", StateConnected)
	ctx, cancel := context.WithTimeout(core.WithCallEnv(context.Background(), &core.CallEnv{MaxResult: 4 << 10}), 30*time.Second)
	defer cancel()
	res, err := host.tool(t, "mcp.huge", "text").Call(ctx, []byte(`{"mib":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if txt := res.Text(); !capped(txt, 1<<20, 4<<10) {
		t.Errorf("result of %d bytes: %.100q", len(txt), txt)
	}
}

// capped reports whether text is the huge server's text of size bytes
// capped to max: max bytes, its head and tail, and the line between
// saying how many bytes were left out.
func capped(text string, size, max int) bool {
	_, after, ok := strings.Cut(text, "\n[... ")
	var cut int
	if _, err := fmt.Sscanf(after, "%d bytes of output left out ...]\n", &cut); !ok || err != nil {
		return false
	}
	return len(text) == max && strings.HasPrefix(text, "BEGINxxx") && strings.HasSuffix(text, "xxxEND") &&
		len(text)-len(core.CutMarker(int64(cut)))+cut == size
}

// excerpt describes a message's text by its size and its middle, where the
// cut is.
func excerpt(m *core.Message) string {
	if m == nil {
		return "none"
	}
	mid := len(m.Text) / 2
	return fmt.Sprintf("%d bytes, around the middle %q", len(m.Text), m.Text[max(0, mid-120):min(len(m.Text), mid+120)])
}
