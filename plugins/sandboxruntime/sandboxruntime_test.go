package sandboxruntime_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/registry"
	"github.com/kilnhq/kiln/plugins/sandboxruntime"
	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/sandboxtest"
)

// host is a sandboxruntime.Host that records what it is given.
type host struct {
	fail error

	mu       sync.Mutex
	calls    []string
	runtimes map[string]sandbox.Runtime
}

func (h *host) AddRuntime(name string, r sandbox.Runtime) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, "add "+name)
	if h.fail != nil {
		return h.fail
	}
	if h.runtimes == nil {
		h.runtimes = map[string]sandbox.Runtime{}
	}
	h.runtimes[name] = r
	return nil
}

func (h *host) RemoveRuntime(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, "remove "+name)
	delete(h.runtimes, name)
}

func (h *host) runtime(name string) sandbox.Runtime {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.runtimes[name]
}

func (h *host) names() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Keys(h.runtimes))
}

var _ sandboxruntime.Host = (*host)(nil)

// builtin is a built-in plugin id providing sandbox-runtime whose Load
// hands out client(), a new value each time it loads.
func builtin(t *testing.T, id string, client func() any) plugins.Builtin {
	t.Helper()
	m, err := plugins.ParseBuiltinManifest([]byte(`{"apiVersion":"kiln.dev/v1","id":"` + id + `","version":"1.0.0",
		"description":"Sandboxes in memory.","provides":["sandbox-runtime"],"runtime":"builtin"}`))
	if err != nil {
		t.Fatal(err)
	}
	return plugins.Builtin{Manifest: m, Load: func(context.Context, plugins.LoadRequest) (plugins.Instance, error) {
		return plugins.Clients{ByKind: map[plugins.Capability]any{sandboxruntime.Name: client()}}, nil
	}}
}

// open opens a registry of the built-ins, with h (when not nil) as the
// server's sandbox service.
func open(t *testing.T, h sandboxruntime.Host, bi ...plugins.Builtin) *registry.Registry {
	t.Helper()
	cfg := registry.Config{Root: t.TempDir(), DataRoot: t.TempDir(), Builtins: bi, Hosts: map[plugins.Capability]any{}}
	if h != nil {
		cfg.Hosts[sandboxruntime.Name] = h
	}
	r, err := registry.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestRegistered(t *testing.T) {
	k, ok := plugins.LookupKind(sandboxruntime.Name)
	if !ok || k.Name() != sandboxruntime.Name {
		t.Fatalf("the %q kind is not registered (%v)", sandboxruntime.Name, k)
	}
}

// TestAttach enables a built-in runtime: the sandbox service gets it
// under the plugin's ID and it runs sandboxes; disabling withdraws it and
// enabling gives it back.
func TestAttach(t *testing.T) {
	ctx := context.Background()
	m := sandboxtest.NewMachine()
	h := &host{}
	r := open(t, h, builtin(t, "memory", func() any { return m.Runtime(sandboxtest.Options{Name: "memory"}) }))
	in, err := r.Get(ctx, "memory")
	if err != nil || in.Status != registry.StatusEnabled || !slices.Equal(in.Provided[string(sandboxruntime.Name)], []string{"memory"}) {
		t.Fatalf("the built-in runtime: %+v, %v", in, err)
	}
	rt := h.runtime("memory")
	if rt == nil {
		t.Fatalf("the sandbox service has %q, not the runtime", h.names())
	}
	sb, err := rt.Start(ctx, sandbox.Spec{ID: "sbx-1"})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	st, err := rt.Exec(ctx, sb, sandbox.ExecRequest{Command: []string{"echo", "hi"}}, func(e sandbox.ExecEvent) { out.Write(e.Data) })
	if err != nil || st.Code != 0 || out.String() != "hi\n" {
		t.Errorf("exec through the attached runtime = %+v, %q, %v", st, out.String(), err)
	}
	if _, err := r.Disable(ctx, "memory"); err != nil {
		t.Fatal(err)
	}
	if len(h.names()) != 0 {
		t.Errorf("after disable the sandbox service still has %q", h.names())
	}
	if _, err := r.Enable(ctx, "memory"); err != nil {
		t.Fatal(err)
	}
	// A fresh Runtime value, as after a restart, reaches the sandbox.
	if got, err := h.runtime("memory").Recover(ctx, sb); err != nil || got.Status != sandbox.StatusRunning {
		t.Errorf("Recover through the re-enabled runtime = %+v, %v", got, err)
	}
	if want := []string{"add memory", "remove memory", "add memory"}; !slices.Equal(h.calls, want) {
		t.Errorf("host calls %q; want %q", h.calls, want)
	}
}

// TestRefused: each reason the kind fails a plugin is shown as the
// plugin's error, and the other plugins go on.
func TestRefused(t *testing.T) {
	ctx := context.Background()
	m := sandboxtest.NewMachine()
	good := builtin(t, "memory", func() any { return m.Runtime(sandboxtest.Options{Name: "memory"}) })
	for _, c := range []struct {
		name   string
		host   sandboxruntime.Host
		bi     plugins.Builtin
		reason string
		// beside is a good runtime loaded with it, which stays attached.
		beside bool
	}{
		{"no sandbox service", nil, builtin(t, "docker", func() any { return m.Runtime(sandboxtest.Options{Name: "docker"}) }),
			"this server has no sandbox service yet, so it cannot use a sandbox runtime", false},
		{"another name", &host{}, builtin(t, "docker", func() any { return m.Runtime(sandboxtest.Options{Name: "dokcer"}) }),
			`the sandbox runtime calls itself "dokcer"; it must be the plugin's id "docker"`, true},
		{"not a runtime", &host{}, builtin(t, "docker", func() any { return "a runtime, honestly" }),
			`the runtime handed out string for "sandbox-runtime", not a sandbox runtime`, true},
		{"the service refuses", &host{fail: errors.New("the sandbox service is draining")}, builtin(t, "docker", func() any {
			return m.Runtime(sandboxtest.Options{Name: "docker"})
		}), "the sandbox service is draining", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			bis := []plugins.Builtin{c.bi}
			if c.beside {
				bis = append(bis, good)
			}
			r := open(t, c.host, bis...)
			in, _ := r.Get(ctx, "docker")
			if in.Status != registry.StatusFailed || !strings.Contains(in.Error, c.reason) {
				t.Errorf("docker: status %s, error %q; want failed because %q", in.Status, in.Error, c.reason)
			}
			if len(in.Provided) != 0 {
				t.Errorf("a failed plugin provides %v", in.Provided)
			}
			got, err := r.Enable(ctx, "docker")
			if core.ErrorCode(err) != core.EUNAVAIL || !strings.Contains(got.Error, c.reason) {
				t.Errorf("enable: %+v, %v; want it refused again, with the reason", got, err)
			}
			if h, ok := c.host.(*host); ok {
				if slices.Contains(h.names(), "docker") {
					t.Error("the refused runtime is on the sandbox service")
				}
				if c.beside && h.runtime("memory") == nil {
					t.Errorf("the other runtime is not attached (%q)", h.names())
				}
			}
		})
	}
}

// TestConformance runs the runtime suite over the built-in runtime as the
// kind attaches it: each new Runtime value is a fresh load of the
// built-in (as after a restart), dispensed by the "builtin" runtime and
// attached to a sandbox service, over one Machine.
func TestConformance(t *testing.T) {
	ctx := context.Background()
	m := sandboxtest.NewMachine()
	bi := builtin(t, "memory", func() any { return m.Runtime(sandboxtest.Options{Name: "memory"}) })
	f, _ := plugins.LookupRuntime(plugins.RuntimeBuiltin)
	l, err := f(plugins.RuntimeEnv{})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := plugins.LookupKind(sandboxruntime.Name)
	sandboxtest.Run(t, func(t *testing.T) sandbox.Runtime {
		inst, err := l.Load(ctx, plugins.LoadRequest{ID: "memory", Manifest: bi.Manifest, Builtin: &bi})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { inst.Close() })
		c, err := inst.Dispense(ctx, sandboxruntime.Name)
		if err != nil {
			t.Fatal(err)
		}
		h := &host{}
		att, err := k.Attach(ctx, plugins.Attach{ID: "memory", Manifest: bi.Manifest, Client: c, Host: h, Builtin: &bi})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(att.Detach)
		return h.runtime("memory")
	})
	if ids := m.Sandboxes(); len(ids) > 0 {
		t.Errorf("the suite left sandboxes behind: %q", ids)
	}
}
