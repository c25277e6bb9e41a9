package greeter_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/internal/greeter"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/process"
	"github.com/kilnhq/kiln/plugins/wasm"
)

// host is a greeter.Host that keeps what is attached.
type host struct {
	mu       sync.Mutex
	greeters map[string]greeter.Greeter
}

func (h *host) AddGreeter(id string, g greeter.Greeter) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.greeters == nil {
		h.greeters = map[string]greeter.Greeter{}
	}
	h.greeters[id] = g
	return nil
}

func (h *host) RemoveGreeter(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.greeters, id)
}

type callKey struct{}

// TestProcess loads the guest, a greeter defined outside the SDK and
// served through its extension point, with the process runtime (testKind).
func TestProcess(t *testing.T) {
	testKind(t, plugins.RuntimeProcess, "guest", process.NewLoader(process.Options{Logger: quiet}))
}

// TestWASM loads the guest's WASM build with the WASM runtime (testKind).
func TestWASM(t *testing.T) {
	h, err := wasm.New(wasm.Config{CacheDir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	l := wasm.NewLoader(h)
	defer l.Close(context.Background())
	testKind(t, plugins.RuntimeWASM, "guest.wasm", l)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testKind loads the guest built for rt with l, a runtime that knows the
// kind only through its registration; attaches it; and greets: the
// greeting comes back, the guest's progress event reaches the host's
// callbacks with the call's context, and the greeter's own failure is not
// the channel's.
func testKind(t *testing.T, rt plugins.Runtime, entry string, l plugins.Loader) {
	ctx := context.Background()
	code := plugintest.Build(t, "./testdata/guest", rt)
	dir, m := plugintest.WritePluginKinds(t, "hello", rt, entry, code, "", greeter.Name)
	if c, ok := l.(plugins.Carrier); !ok || !c.Carries(greeter.Name) {
		t.Fatalf("the %s runtime does not say it carries the greeter kind", rt)
	}
	var mu sync.Mutex
	var events []string
	emit := func(ctx context.Context, ev json.RawMessage) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ctx.Value(callKey{}).(string)+" "+string(ev))
	}
	inst, err := l.Load(ctx, plugins.LoadRequest{
		ID: m.ID, Dir: dir, Manifest: m, DataDir: t.TempDir(), Host: plugins.Callbacks{Logger: quiet, Emit: emit},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	client, err := inst.Dispense(ctx, greeter.Name)
	if err != nil {
		t.Fatal(err)
	}
	h := &host{}
	att, err := greeter.Kind{}.Attach(ctx, plugins.Attach{ID: m.ID, Manifest: m, Client: client, Host: h})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(att.Items, []string{"polite"}) {
		t.Errorf("attached %q, want the greeter's name", att.Items)
	}
	g := h.greeters["hello"]
	if g == nil {
		t.Fatalf("the host holds %v, not the plugin's greeter", h.greeters)
	}
	got, err := g.Greet(context.WithValue(ctx, callKey{}, "call-1"), "Ada")
	if err != nil || got != "Hello, Ada!" {
		t.Errorf("Greet(Ada) = %q, %v", got, err)
	}
	mu.Lock()
	if want := []string{`call-1 {"greeted":"Ada"}`}; !slices.Equal(events, want) {
		t.Errorf("events %q, want %q", events, want)
	}
	mu.Unlock()
	if _, err := g.Greet(ctx, ""); err == nil || errors.Is(err, plugins.ErrTransport) || err.Error() != "greet : whom should I greet?" {
		t.Errorf("Greet of nobody: %v, want the greeter's own failure", err)
	}
	att.Detach()
	if len(h.greeters) != 0 {
		t.Errorf("after Detach the host holds %v", h.greeters)
	}
	inst.Close()
	if _, err := g.Greet(ctx, "Ada"); !errors.Is(err, plugins.ErrTransport) {
		t.Errorf("Greet after Close: %v, want a transport error", err)
	}
}
