package service_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/sqlite"
	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/sandboxtest"
	"github.com/kilnhq/kiln/sandbox/service"
)

const alice, bob = "alice", "bob"

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type env struct {
	t      *testing.T
	store  core.Store
	m      *sandboxtest.Machine
	clk    *clock
	key    []byte
	grants []*core.Grant
}

func newEnv(t *testing.T) *env {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "kiln.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &env{t: t, store: st, m: sandboxtest.NewMachine(), clk: &clock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}, key: bytes.Repeat([]byte("k"), 32)}
}

// service returns a Service over the env's store with the Machine's
// runtime registered as "memory", as a (re)started server has.
func (e *env) service(mod func(*service.Config)) *service.Service {
	e.t.Helper()
	cfg := service.Config{Store: e.store, Key: e.key, Now: e.clk.now, Preferred: []string{"memory"},
		Grants: func(context.Context, string) ([]*core.Grant, error) { return e.grants, nil }}
	if mod != nil {
		mod(&cfg)
	}
	s, err := service.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := s.AddRuntime("memory", e.m.Runtime(sandboxtest.Options{})); err != nil {
		e.t.Fatal(err)
	}
	return s
}

func timeout(n int) *int { return &n }

func TestCreateAndUse(t *testing.T) {
	e := newEnv(t)
	s := e.service(nil)
	ctx := context.Background()
	sb, err := s.Create(ctx, alice, service.CreateRequest{Timeout: timeout(600), Env: map[string]string{"SECRET": "hunter2"},
		Metadata: map[string]string{"team": "infra"}, Resources: map[string]string{"cpu": "500m", "memory": "256Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.State != service.StateRunning || sb.Runtime != "memory" || sb.ExpiresAt == nil || !sb.ExpiresAt.Equal(e.clk.now().Add(10*time.Minute)) {
		t.Fatalf("created %+v", sb)
	}
	if strings.Contains(string(sb.Request), "hunter2") || !strings.Contains(string(sb.Request), `"envNames":["SECRET"]`) {
		t.Errorf("the record keeps %s", sb.Request)
	}
	// The runtime got the env; commands run through the handle.
	_, r, h, err := s.Open(ctx, alice, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if st, err := r.Exec(ctx, h, sandbox.ExecRequest{Command: []string{"sh", "-c", "echo $SECRET"}}, func(ev sandbox.ExecEvent) { out.Write(ev.Data) }); err != nil || st.Code != 0 || out.String() != "hunter2\n" {
		t.Errorf("exec: %v %v %q", st, err, out.String())
	}
	if _, err := s.Get(ctx, bob, sb.ID); !core.IsNotFound(err) {
		t.Errorf("another owner's get: %v", err)
	}
	// Tokens are per sandbox, stable for a key, and checked in constant time.
	if tok := s.Token(sb.ID); tok == "" || !s.CheckToken(sb.ID, tok) || s.CheckToken(sb.ID, "") || s.CheckToken("other", tok) {
		t.Error("token checks")
	}
	if s2 := e.service(nil); s2.Token(sb.ID) != s.Token(sb.ID) {
		t.Error("the token changed with a new service over the same key")
	}
	if _, err := s.Pause(ctx, alice, sb.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, alice, sb.ID); got.State != service.StatePaused {
		t.Errorf("after pause: %s", got.State)
	}
	if _, err := s.Pause(ctx, alice, sb.ID); err != nil {
		t.Errorf("pause of a paused sandbox: %v", err)
	}
	if _, err := s.Resume(ctx, alice, sb.ID); err != nil {
		t.Fatal(err)
	}
	later := e.clk.now().Add(time.Hour)
	if got, err := s.Renew(ctx, alice, sb.ID, later); err != nil || !got.ExpiresAt.Equal(later) {
		t.Errorf("renew: %v", err)
	}
	if _, err := s.Renew(ctx, alice, sb.ID, e.clk.now().Add(-time.Second)); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("renew into the past: %v", err)
	}
	v := "web"
	got, err := s.PatchMetadata(ctx, alice, sb.ID, map[string]*string{"team": nil, "role": &v})
	if err != nil || len(got.Metadata) != 1 || got.Metadata["role"] != "web" {
		t.Errorf("patch: %+v %v", got, err)
	}
	bad := "no spaces"
	if _, err := s.PatchMetadata(ctx, alice, sb.ID, map[string]*string{"opensandbox.io/x": &v}); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("reserved key: %v", err)
	}
	if _, err := s.PatchMetadata(ctx, alice, sb.ID, map[string]*string{"ok": &bad}); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("bad value: %v", err)
	}
	if err := s.Delete(ctx, alice, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, alice, sb.ID); !core.IsNotFound(err) {
		t.Errorf("get after delete: %v", err)
	}
	if left := e.m.Sandboxes(); len(left) != 0 {
		t.Errorf("the runtime still has %v", left)
	}
}

func TestCreateRefusals(t *testing.T) {
	e := newEnv(t)
	grant := t.TempDir()
	outside := t.TempDir()
	e.grants = []*core.Grant{{ID: "grt_1", Name: "proj", Path: grant, Writable: false}}
	s := e.service(func(c *service.Config) { c.MaxSandboxes = 2 })
	ctx := context.Background()
	for _, c := range []struct {
		name string
		req  service.CreateRequest
		code string
		msg  string
	}{
		{"unknown extension", service.CreateRequest{Extensions: map[string]string{"magic": "1"}}, core.EINVALID, "extensions.magic"},
		{"pool ref", service.CreateRequest{Extensions: map[string]string{"poolRef": "p"}}, "", "does not support pools over the API"},
		{"unknown runtime", service.CreateRequest{Extensions: map[string]string{service.ExtRuntime: "docker"}}, core.EUNAVAIL, `sandbox runtime "docker" is not enabled`},
		{"gpu", service.CreateRequest{Resources: map[string]string{"gpu": "1"}}, core.EINVALID, "resourceLimits.gpu"},
		{"bad cpu", service.CreateRequest{Resources: map[string]string{"cpu": "lots"}}, core.EINVALID, "resourceLimits.cpu"},
		{"bad memory", service.CreateRequest{Resources: map[string]string{"memory": "2TB"}}, core.EINVALID, "resourceLimits.memory"},
		{"disk under a MiB", service.CreateRequest{Resources: map[string]string{"ephemeral-storage": "512Ki"}}, core.EINVALID, "resourceLimits.ephemeral-storage \"512Ki\": want between 1 MiB and 1 TiB"},
		{"disk of 0", service.CreateRequest{Resources: map[string]string{"disk": "0"}}, core.EINVALID, "resourceLimits.disk"},
		{"bad timeout", service.CreateRequest{Timeout: timeout(0)}, core.EINVALID, "timeout 0"},
		{"bad metadata", service.CreateRequest{Metadata: map[string]string{"a b": "c"}}, core.EINVALID, "metadata key"},
		{"image on a runtime without images", service.CreateRequest{Image: "alpine"}, core.EINVALID, `has one environment`},
		{"main process on a runtime without images", service.CreateRequest{Entrypoint: []string{"nginx"}}, "", `does not support an entrypoint`},
		{"network open", service.CreateRequest{Network: service.NetworkPolicy{DefaultAction: "allow"}}, "", `does not support network mode "open"`},
		{"bad network", service.CreateRequest{Network: service.NetworkPolicy{DefaultAction: "maybe"}}, core.EINVALID, "defaultAction"},
		{"egress on a runtime without it", service.CreateRequest{Network: service.NetworkPolicy{Egress: []service.EgressRule{{Action: "allow", Target: "api.example.com"}}}}, "", `sandbox runtime "memory" does not support network mode "egress"`},
		{"malformed egress target", service.CreateRequest{Network: service.NetworkPolicy{Egress: []service.EgressRule{{Action: "allow", Target: "https://api.example.com/v1"}}}}, core.EINVALID, "without a scheme"},
		{"volume outside the grants", service.CreateRequest{Volumes: []service.Volume{{Name: "v", HostPath: outside, MountPath: "/data", ReadOnly: true}}}, core.EFORBIDDEN, "not in a folder granted"},
		{"writable volume on a read-only grant", service.CreateRequest{Volumes: []service.Volume{{Name: "v", HostPath: grant, MountPath: "/data"}}}, core.EFORBIDDEN, "read-only grant"},
		{"volumes on a runtime without mounts", service.CreateRequest{Volumes: []service.Volume{{Name: "v", HostPath: grant, MountPath: "/data", ReadOnly: true}}}, "", "does not support host volumes"},
	} {
		_, err := s.Create(ctx, alice, c.req)
		if err == nil || (c.code != "" && core.ErrorCode(err) != c.code) || (c.code == "" && !errors.Is(err, sandbox.ErrUnsupported)) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v (%s), want %s %q", c.name, err, core.ErrorCode(err), c.code, c.msg)
		}
	}
	page, err := s.List(ctx, alice, service.ListQuery{})
	if err != nil || page.TotalItems != 0 {
		t.Errorf("refused creates left %d records", page.TotalItems)
	}
	// The server's limit fails fast.
	for range 2 {
		if _, err := s.Create(ctx, alice, service.CreateRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if _, err := s.Create(ctx, alice, service.CreateRequest{}); core.ErrorCode(err) != core.ELIMIT || time.Since(start) > time.Second {
		t.Errorf("past the limit: %v after %s", err, time.Since(start))
	}
}

func TestListFilters(t *testing.T) {
	e := newEnv(t)
	s := e.service(nil)
	ctx := context.Background()
	var ids []string
	for i := range 5 {
		e.clk.add(time.Second)
		team := map[bool]string{true: "a", false: "b"}[i%2 == 0]
		sb, err := s.Create(ctx, alice, service.CreateRequest{Metadata: map[string]string{"team": team}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	if _, err := s.Create(ctx, bob, service.CreateRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pause(ctx, alice, ids[0]); err != nil {
		t.Fatal(err)
	}
	idsOf := func(p *service.Page) []string {
		var out []string
		for _, sb := range p.Items {
			out = append(out, sb.ID)
		}
		return out
	}
	p, _ := s.List(ctx, alice, service.ListQuery{})
	if p.TotalItems != 5 || !slices.Equal(idsOf(p), []string{ids[4], ids[3], ids[2], ids[1], ids[0]}) {
		t.Errorf("list %v", idsOf(p))
	}
	p, _ = s.List(ctx, alice, service.ListQuery{Metadata: map[string]string{"team": "a"}, PageSize: 2, Page: 2})
	if p.TotalItems != 3 || !slices.Equal(idsOf(p), []string{ids[0]}) {
		t.Errorf("page 2 of team a: %d %v", p.TotalItems, idsOf(p))
	}
	p, _ = s.List(ctx, alice, service.ListQuery{States: []string{service.StatePaused}})
	if !slices.Equal(idsOf(p), []string{ids[0]}) {
		t.Errorf("paused: %v", idsOf(p))
	}
	if _, err := s.List(ctx, alice, service.ListQuery{PageSize: 500}); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("page size 500: %v", err)
	}
}

// TestExpiryAcrossRestart: a sandbox's expiry holds across a restart of
// the service (a new Service over the same Store and backend); the
// record stays Terminated with the reason for an hour, then goes.
func TestExpiryAcrossRestart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb, err := e.service(nil).Create(ctx, alice, service.CreateRequest{Timeout: timeout(60)})
	if err != nil {
		t.Fatal(err)
	}
	keep, err := e.service(nil).Create(ctx, alice, service.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	e.clk.add(61 * time.Second)
	s := e.service(nil) // "restarted"
	if err := s.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, alice, sb.ID)
	if err != nil || got.State != service.StateTerminated || got.Reason != "ttl_expiry" {
		t.Fatalf("after expiry: %+v %v", got, err)
	}
	if left := e.m.Sandboxes(); !slices.Equal(left, []string{keep.ID}) {
		t.Errorf("the runtime has %v, want only the manual-cleanup one", left)
	}
	e.clk.add(service.KeepEnded + time.Second)
	if err := s.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, alice, sb.ID); !core.IsNotFound(err) {
		t.Errorf("an hour later: %v", err)
	}
	if got, _ := s.Get(ctx, alice, keep.ID); got.State != service.StateRunning {
		t.Errorf("the manual-cleanup sandbox is %s", got.State)
	}
}

// TestReconcile: after a restart, a sandbox the backend lost is Failed
// with the reason, a record left Pending by a crash is Failed and its
// sandbox destroyed, a sandbox no record knows is destroyed, and a live
// one is recovered.
func TestReconcile(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.service(nil)
	alive, err := s.Create(ctx, alice, service.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	lost, err := s.Create(ctx, alice, service.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The backend loses one sandbox, keeps one nobody recorded, and one
	// whose create was cut off before its handle was stored.
	r := e.m.Runtime(sandboxtest.Options{})
	_, _, h, err := s.Open(ctx, alice, lost.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Destroy(ctx, h); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Start(ctx, sandbox.Spec{ID: "orphan-1"}); err != nil {
		t.Fatal(err)
	}
	now := e.clk.now()
	cut := &core.Sandbox{ID: "cut-1", OwnerID: alice, Runtime: "memory", State: service.StatePending, CreatedAt: now, UpdatedAt: now, TransitionAt: now}
	if _, err := e.store.Update(ctx, func(tx core.Tx) error { return tx.(service.RecordTx).PutSandbox(cut) }); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Start(ctx, sandbox.Spec{ID: cut.ID}); err != nil {
		t.Fatal(err)
	}
	s = e.service(nil)
	if err := s.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{alive.ID: service.StateRunning, lost.ID: service.StateFailed, cut.ID: service.StateFailed} {
		got, err := s.Get(ctx, alice, id)
		if err != nil || got.State != want {
			t.Errorf("%s: %+v %v, want %s", id, got, err, want)
		} else if want == service.StateFailed && (got.Reason != "lost" || got.Message == "") {
			t.Errorf("%s failed without a reason: %+v", id, got)
		}
	}
	if left := e.m.Sandboxes(); !slices.Equal(left, []string{alive.ID}) {
		t.Errorf("the backend has %v, want only %s", left, alive.ID)
	}
}

// TestRuntimeDisabled: with its runtime withdrawn a sandbox's operations
// fail with the reason, a create asks to enable the plugin of a Preferred
// runtime, and the record stays.
func TestRuntimeDisabled(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.service(nil)
	sb, err := s.Create(ctx, alice, service.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	s.RemoveRuntime("memory")
	if err := s.Delete(ctx, alice, sb.ID); core.ErrorCode(err) != core.EUNAVAIL || !strings.Contains(err.Error(), `"memory" is not enabled`) {
		t.Errorf("delete: %v", err)
	}
	if _, err := s.Create(ctx, alice, service.CreateRequest{}); core.ErrorCode(err) != core.EUNAVAIL ||
		core.ErrorMessage(err) != "no sandbox runtime is enabled (enable the memory plugin)" {
		t.Errorf("create with no runtime: %v; want EUNAVAIL naming the Preferred runtime's plugin", err)
	}
	if _, err := s.Get(ctx, alice, sb.ID); err != nil {
		t.Errorf("the record went: %v", err)
	}
}

// needsToken is a runtime that, like docker with kiln-execd, starts no
// sandbox without an exec token.
type needsToken struct{ sandbox.Runtime }

func (n needsToken) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Handle, error) {
	if spec.ExecToken == "" {
		return sandbox.Handle{}, fmt.Errorf("%w: no exec token", sandbox.ErrInvalid)
	}
	return n.Runtime.Start(ctx, spec)
}

func (n needsToken) List(ctx context.Context) ([]string, error) {
	return n.Runtime.(sandbox.Lister).List(ctx)
}

// TestReconcileOnAdd: a runtime enabled on a running server is
// reconciled as at a start: what it lost is marked so, and a sandbox no
// record knows is destroyed (with an exec token, which such a runtime
// needs to find it by ID).
func TestReconcileOnAdd(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := e.service(nil)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	alive, err := s.Create(ctx, alice, service.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	lost, err := s.Create(ctx, alice, service.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, h, err := s.Open(ctx, alice, lost.ID)
	if err != nil {
		t.Fatal(err)
	}
	s.RemoveRuntime("memory")
	r := e.m.Runtime(sandboxtest.Options{})
	if err := r.Destroy(ctx, h); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Start(ctx, sandbox.Spec{ID: "orphan-2"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, alice, lost.ID); got.State != service.StateRunning {
		t.Fatalf("reconciled while its runtime was disabled: %+v", got)
	}
	if err := s.AddRuntime("memory", needsToken{r}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{alive.ID: service.StateRunning, lost.ID: service.StateFailed} {
		if got, err := s.Get(ctx, alice, id); err != nil || got.State != want {
			t.Errorf("%s: %+v %v, want %s", id, got, err, want)
		}
	}
	if left := e.m.Sandboxes(); !slices.Equal(left, []string{alive.ID}) {
		t.Errorf("the backend has %v; want %s alone", left, alive.ID)
	}
}

func TestLoadKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sandbox.key")
	k1, err := service.LoadKey(p)
	if err != nil || len(k1) != 32 {
		t.Fatal(err)
	}
	k2, err := service.LoadKey(p)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatal("the key changed")
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	os.WriteFile(p, []byte("short"), 0o600)
	if _, err := service.LoadKey(p); err == nil {
		t.Error("a short key was taken")
	}
}

// waitFor polls until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWarmPool: a pool is filled at start; a create that asks for exactly
// the pool's sandbox is a claim of one (no start), which is replaced; one
// that asks for more (env) starts its own; the pool's waiting sandboxes
// are nobody's to list and survive a restart.
func TestWarmPool(t *testing.T) {
	e := newEnv(t)
	pools := []service.PoolConfig{{Name: "small", Runtime: "memory", Resources: map[string]string{"memory": "64Mi"}, Size: 2}}
	s := e.service(func(c *service.Config) { c.Pools = pools })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pool to fill", func() bool { return len(e.m.Sandboxes()) == 2 })
	pooled := e.m.Sandboxes()
	sb, err := s.Create(ctx, alice, service.CreateRequest{Resources: map[string]string{"memory": "64Mi"}, Timeout: timeout(60), Metadata: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pooled, sb.ID) || sb.OwnerID != alice || sb.State != service.StateRunning || sb.Metadata["k"] != "v" ||
		sb.ExpiresAt == nil || !sb.ExpiresAt.Equal(e.clk.now().Add(time.Minute)) {
		t.Fatalf("not a claim from the pool: %+v (pool %v)", sb, pooled)
	}
	waitFor(t, "the pool to refill", func() bool { return len(e.m.Sandboxes()) == 3 })
	waitFor(t, "the refill to be ready", func() bool { return s.Pools()[0].Waiting == 2 })
	if st := s.Pools()[0]; st.Name != "small" || st.Size != 2 || st.Hits != 1 || st.Misses != 0 {
		t.Errorf("pool stats after one claim: %+v", st)
	}
	// Three claims in a row from a pool of two: the third finds none
	// waiting and starts its own (a refill waits 250 ms after a claim, and
	// these are microseconds apart; should one come between them anyway,
	// all three are hits).
	for range 3 {
		if _, err := s.Create(ctx, alice, service.CreateRequest{Resources: map[string]string{"memory": "64Mi"}}); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Pools()[0]; st.Hits+st.Misses != 4 || st.Misses > 1 {
		t.Errorf("pool stats after three claims from two: %+v, want 3 hits and 1 miss", st)
	}
	waitFor(t, "the pool to refill again", func() bool { return s.Pools()[0].Waiting == 2 })
	_, r, h, err := s.Open(ctx, alice, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := r.Exec(ctx, h, sandbox.ExecRequest{Command: []string{"true"}}, func(sandbox.ExecEvent) {}); err != nil || st.Code != 0 {
		t.Errorf("exec in a claimed sandbox: %v %v", st, err)
	}
	cold, err := s.Create(ctx, alice, service.CreateRequest{Resources: map[string]string{"memory": "64Mi"}, Env: map[string]string{"A": "b"}})
	if err != nil || slices.Contains(pooled, cold.ID) {
		t.Fatalf("a create with env came from the pool: %v", err)
	}
	page, _ := s.List(ctx, alice, service.ListQuery{})
	if page.TotalItems != 5 {
		t.Errorf("alice lists %d sandboxes, want her 5", page.TotalItems)
	}
	cancel()
	s2 := e.service(func(c *service.Config) { c.Pools = pools })
	if err := s2.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(e.m.Sandboxes()); n != 7 {
		t.Errorf("after a restart the backend has %d sandboxes, want 7 (2 pooled, 5 alice's)", n)
	}
	for _, bad := range [][]service.PoolConfig{
		{{Name: "", Runtime: "memory", Size: 1}},
		{{Name: "a", Runtime: "memory", Size: 1}, {Name: "a", Runtime: "memory", Size: 1}},
		{{Name: "a", Size: 1}},
		{{Name: "a", Runtime: "memory", Size: 500}},
		{{Name: "a", Runtime: "memory", Size: 1, Resources: map[string]string{"gpu": "1"}}},
	} {
		if _, err := service.New(service.Config{Store: e.store, Key: e.key, Pools: bad}); err == nil {
			t.Errorf("pools %+v were taken", bad)
		}
	}
}

// TestPoolSteadyClaims: claims that keep coming, each sooner than the
// refill's quiet time after the last, do not drain the pool: it refills
// once it is down to a quarter of its size.
func TestPoolSteadyClaims(t *testing.T) {
	e := newEnv(t)
	s := e.service(func(c *service.Config) {
		c.Pools = []service.PoolConfig{{Name: "p", Runtime: "memory", Size: 4}}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pool to fill", func() bool { return s.Pools()[0].Waiting == 4 })
	for range 12 {
		if _, err := s.Create(ctx, alice, service.CreateRequest{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st := s.Pools()[0]; st.Hits != 12 || st.Misses != 0 {
		t.Errorf("12 claims 100 ms apart from a pool of 4: %+v, want 12 hits", st)
	}
}

// TestPoolsTrimmedOnRestart: a start with smaller or changed pools
// destroys the waiting sandboxes the pools no longer want, and keeps the
// rest.
func TestPoolsTrimmedOnRestart(t *testing.T) {
	e := newEnv(t)
	pools := []service.PoolConfig{
		{Name: "a", Runtime: "memory", Size: 3},
		{Name: "b", Runtime: "memory", Resources: map[string]string{"memory": "64Mi"}, Size: 1},
		{Name: "c", Runtime: "memory", Size: 1},
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := e.service(func(c *service.Config) { c.Pools = pools })
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Full once every record is Pooled: a sandbox is in the runtime
	// before its record leaves Pending.
	pooledRecs := func() int {
		var recs []*core.Sandbox
		_ = e.store.View(context.Background(), func(tx core.ReadTx) (err error) {
			recs, err = tx.(service.RecordReader).Sandboxes(core.SandboxQuery{OwnerID: service.PoolOwner, States: []string{service.StatePooled}})
			return err
		})
		return len(recs)
	}
	waitFor(t, "the pools to fill", func() bool { return pooledRecs() == 5 })
	cancel()
	// a shrinks to 1, b asks for more memory, c is gone.
	smaller := []service.PoolConfig{
		{Name: "a", Runtime: "memory", Size: 1},
		{Name: "b", Runtime: "memory", Resources: map[string]string{"memory": "128Mi"}, Size: 1},
	}
	s2 := e.service(func(c *service.Config) { c.Pools = smaller })
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	if err := s2.Start(ctx2); err != nil {
		t.Fatal(err)
	}
	// 5 - 2 (a) - 1 (b) - 1 (c) = 1 kept, then b refills with its new size.
	waitFor(t, "the pools to be trimmed and b refilled", func() bool { return len(e.m.Sandboxes()) == 2 })
	var recs []*core.Sandbox
	_ = e.store.View(context.Background(), func(tx core.ReadTx) (err error) {
		recs, err = tx.(service.RecordReader).Sandboxes(core.SandboxQuery{OwnerID: service.PoolOwner})
		return err
	})
	byPool := map[string]int{}
	for _, r := range recs {
		byPool[r.Pool]++
	}
	if byPool["a"] != 1 || byPool["b"] != 1 || byPool["c"] != 0 || len(recs) != 2 {
		t.Fatalf("pool records after the restart: %v", byPool)
	}
}

// TestDiskSizes: a disk size reads as memory's does, in MiB.
func TestDiskSizes(t *testing.T) {
	for in, want := range map[string]int{"2Gi": 2048, "300Mi": 300, "300M": 300, "4194304Ki": 4096, "1073741824": 1024} {
		r, err := service.CheckResources(map[string]string{"ephemeral-storage": in})
		if err != nil || r.DiskMiB != want {
			t.Errorf("ephemeral-storage %q: %d MiB, %v; want %d", in, r.DiskMiB, err, want)
		}
	}
}

// recordless is a Store whose transactions hide the sandbox records:
// View's when view is set, Update's when update is.
type recordless struct {
	core.Store
	view, update bool
}

func (s recordless) View(ctx context.Context, fn func(core.ReadTx) error) error {
	return s.Store.View(ctx, func(tx core.ReadTx) error {
		if s.view {
			return fn(struct{ core.ReadTx }{tx})
		}
		return fn(tx)
	})
}

func (s recordless) Update(ctx context.Context, fn func(core.Tx) error) ([]core.Event, error) {
	return s.Store.Update(ctx, func(tx core.Tx) error {
		if s.update {
			return fn(struct{ core.Tx }{tx})
		}
		return fn(tx)
	})
}

// TestNewNeedsRecords: a Store whose View or Update keeps no sandbox
// records is refused by New with an error that says so.
func TestNewNeedsRecords(t *testing.T) {
	e := newEnv(t)
	for _, st := range []recordless{{view: true}, {update: true}, {view: true, update: true}} {
		st.Store = e.store
		_, err := service.New(service.Config{Store: st, Key: e.key})
		if err == nil || !strings.Contains(err.Error(), "keeps no sandbox records") {
			t.Errorf("New over a Store without records (view %v, update %v): %v", st.view, st.update, err)
		}
	}
	if _, err := service.New(service.Config{Store: recordless{Store: e.store}, Key: e.key}); err != nil {
		t.Errorf("New over a Store with records: %v", err)
	}
}

// TestReplicas: two servers' services on one Store, each with a runtime
// of its own (Machines), as replicas are. B's Reconcile and Reap leave
// A's sandbox alone while A is alive; once A is gone, B marks it Failed
// ("lost", naming A) when its runtime cannot recover it, and adopts it
// (its record then names B) when it can, as with a Docker engine both
// reach.
func TestReplicas(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	aAlive := true
	alive := func(replica string) bool { return replica != "a" || aAlive }
	a := e.service(func(c *service.Config) { c.Replica, c.Alive = "a", alive })
	held, err := a.Create(ctx, alice, service.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if held.Replica != "a" {
		t.Fatalf("the record names %q, want a", held.Replica)
	}
	other := sandboxtest.NewMachine()
	b, err := service.New(service.Config{Store: e.store, Key: e.key, Now: e.clk.now, Preferred: []string{"memory"}, Replica: "b", Alive: alive})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.AddRuntime("memory", other.Runtime(sandboxtest.Options{})); err != nil {
		t.Fatal(err)
	}
	state := func() *core.Sandbox {
		t.Helper()
		got, err := b.Get(ctx, alice, held.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if err := b.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	e.clk.add(time.Hour) // past its expiry: A's reaper's to end, not B's
	if err := b.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	if got := state(); got.State != service.StateRunning || got.Replica != "a" {
		t.Fatalf("B touched A's sandbox while A lives: %+v", got)
	}

	aAlive = false
	if err := b.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	if got := state(); got.State != service.StateFailed || got.Reason != "lost" || !strings.Contains(got.Message, "(a)") || got.Replica != "b" {
		t.Fatalf("A's sandbox after A is gone, B's runtime without it: %+v", got)
	}

	// A runtime both reach: B adopts the sandbox.
	aAlive = true
	e.clk.add(-time.Hour)
	shared, err := a.Create(ctx, alice, service.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	b2 := e.service(func(c *service.Config) { c.Replica, c.Alive = "b", alive })
	aAlive = false
	if err := b2.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := b2.Get(ctx, alice, shared.ID)
	if err != nil || got.State != service.StateRunning || got.Replica != "b" {
		t.Fatalf("A's sandbox on a runtime B reaches, after A is gone: %+v %v", got, err)
	}
}
