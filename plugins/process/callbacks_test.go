//go:build unix

package process_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/process"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
)

// memKV is a plugin's key/value namespace in memory.
type memKV struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (k *memKV) Get(_ context.Context, key string) ([]byte, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[key]
	return v, ok, nil
}

func (k *memKV) Put(_ context.Context, key string, v []byte) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.m[key] = v
	return nil
}

func (k *memKV) Delete(_ context.Context, key string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.m, key)
	return nil
}

func (k *memKV) List(_ context.Context, prefix, after string, limit int) ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for key := range k.m {
		if strings.HasPrefix(key, prefix) && key > after {
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), limit)], nil
}

type ctxKey struct{}

// TestHostCallbacks: a process plugin (protocol 2) reaches the host's
// callbacks exactly as a WASM plugin reaches its host functions: its
// progress events go to the call that sent them, its logs to the host's
// log as the plugin, and its key/value namespace survives the process
// being killed and restarted.
func TestHostCallbacks(t *testing.T) {
	dir, m := plugintest.CalcPlugin(t, "calcp", plugins.RuntimeProcess, `{"filesystem":[{"path":"data:/","read":true,"write":true}],"timeout_ms":10000}`)
	var mu sync.Mutex
	var events []string
	var buf syncBuffer
	kv := &memKV{m: map[string][]byte{}}
	p, err := loadToolset(context.Background(), dir, m, process.Options{
		Logger: slog.New(slog.NewTextHandler(&buf, nil)), KV: kv, MinBackoff: time.Millisecond,
		Env: []string{"KILN_PLUGIN_DATA=" + t.TempDir()},
		Emit: func(ctx context.Context, ev json.RawMessage) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, ctx.Value(ctxKey{}).(string)+" "+string(ev))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	ctx := context.WithValue(context.Background(), ctxKey{}, "call-1")
	if out, err := text(p.Call(ctx, "note", json.RawMessage(`{"text":"hello"}`))); err != nil || out != "ok" {
		t.Fatalf("note = %q, %v", out, err)
	}
	mu.Lock()
	got := slices.Clone(events)
	mu.Unlock()
	if !slices.Equal(got, []string{`call-1 {"wrote":5}`}) {
		t.Errorf("events %q; want the note's progress event, with its call's context", got)
	}
	if log := buf.String(); !strings.Contains(log, "note written") || !strings.Contains(log, "component=process:calcp") {
		t.Errorf("the plugin's log record did not reach the host's log as the plugin:\n%s", log)
	}

	for want := 1; want <= 2; want++ {
		if out, err := text(p.Call(context.Background(), "counter", json.RawMessage(`{}`))); err != nil || out != string(rune('0'+want)) {
			t.Fatalf("counter = %q, %v; want %d", out, err, want)
		}
	}
	pid := p.Health().PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// counter is not idempotent: wait for the new process rather than
	// have a call cut off.
	for deadline := time.Now().Add(10 * time.Second); p.Health().PID == pid || p.Health().PID == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no new process: %+v", p.Health())
		}
	}
	if out, err := text(p.Call(context.Background(), "counter", json.RawMessage(`{}`))); err != nil || out != "3" {
		t.Errorf("counter after the process was killed = %q, %v; want 3", out, err)
	}
	if st := p.Health(); st.Restarts != 1 || st.PID == pid {
		t.Errorf("health after the kill: %+v", st)
	}
	if _, err := text(p.Call(context.Background(), "counter", json.RawMessage(`{"key":""}`))); !errors.As(err, new(toolFailed)) || !strings.Contains(err.Error(), "key") {
		t.Errorf("an empty key: %v; want the host's refusal", err)
	}
}

// TestProtocolVersions: a plugin built for protocol 1 still loads and
// serves its toolset; one built for a protocol this host does not speak
// (4, newer) is refused at start with both versions named; a protocol 1 plugin
// cannot provide a model provider.
func TestProtocolVersions(t *testing.T) {
	code := plugintest.Build(t, "./testdata/versioned", plugins.RuntimeProcess)
	dir, m := plugintest.WritePlugin(t, "old", plugins.RuntimeProcess, "versioned", code, "")
	p, err := loadToolset(context.Background(), dir, m, process.Options{Logger: testLogger(t), Args: []string{"1"}})
	if err != nil {
		t.Fatalf("a protocol 1 plugin: %v", err)
	}
	if out, err := text(p.Call(context.Background(), "ping", json.RawMessage(`{}`))); err != nil || out != "pong 0 0" {
		t.Errorf("ping = %q, %v; want a call without protocol 2's fields", out, err)
	}
	p.Close()

	_, err = loadToolset(context.Background(), dir, m, process.Options{Logger: testLogger(t), Args: []string{"4"}})
	if err == nil || !errors.Is(err, plugins.ErrTransport) || !strings.Contains(err.Error(), "speaks Kiln plugin protocol 4; this Kiln speaks 1, 2 and 3") {
		t.Errorf("a protocol 4 plugin: %v", err)
	}

	dir, m = plugintest.WritePluginKinds(t, "oldp", plugins.RuntimeProcess, "versioned", code, "", modelprovider.Name)
	_, err = loadToolset(context.Background(), dir, m, process.Options{Logger: testLogger(t), Args: []string{"1"}})
	if err == nil || !strings.Contains(err.Error(), `protocol 1, which carries only "toolset"`) {
		t.Errorf("a protocol 1 plugin providing a model provider: %v", err)
	}
}
