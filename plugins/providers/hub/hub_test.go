package hub_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/netguard"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/hub"

	// The built-in providers, whose definitions the tests use.
	_ "github.com/kilnhq/kiln/plugins/providers/anthropic"
	_ "github.com/kilnhq/kiln/plugins/providers/bedrock"
	_ "github.com/kilnhq/kiln/plugins/providers/gemini"
	_ "github.com/kilnhq/kiln/plugins/providers/ollama"
	_ "github.com/kilnhq/kiln/plugins/providers/openai"
	_ "github.com/kilnhq/kiln/plugins/providers/openrouter"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fake is a provider that lists models from {base_url}/models with its
// client, and answers turns with its model and API key length.
type fake struct {
	s     providers.Settings
	lists *atomic.Int32
}

func (f fake) Models(ctx context.Context) ([]providers.ModelInfo, error) {
	f.lists.Add(1)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.s.BaseURL+"/models", nil)
	resp, err := f.s.Client().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var ids []string
	if err := json.NewDecoder(resp.Body).Decode(&ids); err != nil {
		return nil, err
	}
	var out []providers.ModelInfo
	for _, id := range ids {
		out = append(out, providers.ModelInfo{ID: id})
	}
	return out, nil
}

func (f fake) Turn(_ context.Context, model string, _ core.ModelRequest, _ func(string)) (core.ModelResponse, error) {
	return core.ModelResponse{Text: model + " via " + f.s.Extra["api"]}, nil
}

type env struct {
	vars  map[string]string
	path  string
	lists atomic.Int32
	defs  []hub.Def
	made  map[string]providers.Provider // the last provider each factory made
}

// withFactories returns the registered providers' definitions, each made
// by factories[its ID] (none when it has no entry there).
func withFactories(factories map[string]providers.Factory) []hub.Def {
	defs := hub.Registered()
	for i := range defs {
		defs[i].New = factories[defs[i].ID]
	}
	return defs
}

func newEnv(t *testing.T) *env {
	return &env{vars: map[string]string{}, path: filepath.Join(t.TempDir(), "providers.json"), made: map[string]providers.Provider{}}
}

func (e *env) open(t *testing.T) *hub.Hub {
	t.Helper()
	factories := map[string]providers.Factory{}
	for _, id := range []string{"openai", "anthropic", "gemini", "bedrock", "openrouter", "ollama"} {
		factories[id] = func(s providers.Settings) (providers.Provider, error) {
			e.made[id] = fake{s, &e.lists}
			return e.made[id], nil
		}
	}
	e.defs = withFactories(factories)
	h, err := hub.Open(hub.Config{Path: e.path, Defs: e.defs, Getenv: func(k string) string { return e.vars[k] },
		Logger: quiet, Default: "demo", Retry: providers.RetryPolicy{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AddModels("kiln", []hub.BareModel{{Name: "demo", Model: providers.Model(fake{}, "demo")}}); err != nil {
		t.Fatal(err)
	}
	return h
}

// def returns the definition of provider id.
func (e *env) def(t *testing.T, id string) hub.Def {
	t.Helper()
	for _, d := range e.defs {
		if d.ID == id {
			return d
		}
	}
	t.Fatalf("no provider %q", id)
	return hub.Def{}
}

// enable adds provider id again, as enabling its plugin does.
func (e *env) enable(t *testing.T, h *hub.Hub, id string) {
	t.Helper()
	if err := h.Add(e.def(t, id)); err != nil {
		t.Fatal(err)
	}
}

func setting(st hub.Status, name string) hub.Setting {
	for _, s := range st.Settings {
		if s.Name == name {
			return s
		}
	}
	return hub.Setting{}
}

func TestEnvironmentDefaults(t *testing.T) {
	e := newEnv(t)
	e.vars["OPENAI_API_KEY"] = "sk-env-secret"
	e.vars["GOOGLE_API_KEY"] = "g-secret"
	e.vars["OLLAMA_HOST"] = "localhost"
	e.vars["AWS_PROFILE"] = "work"
	h := e.open(t)
	ctx := context.Background()
	states := map[string]string{}
	for _, st := range h.List(ctx) {
		states[st.ID] = st.State
	}
	want := map[string]string{"openai": hub.StateReady, "anthropic": hub.StateNotConfigured, "gemini": hub.StateReady, "bedrock": hub.StateReady, "openrouter": hub.StateNotConfigured, "ollama": hub.StateReady}
	for id, s := range want {
		if states[id] != s {
			t.Errorf("%s: state %q, want %q", id, states[id], s)
		}
	}
	st, _ := h.Get(ctx, "openai")
	if s := setting(st, "api_key"); s.Value != "set" || s.Source != "env OPENAI_API_KEY" {
		t.Errorf("openai api_key %+v", s)
	}
	if s := setting(st, "base_url"); s.Value != "https://api.openai.com/v1" || s.Source != "default" {
		t.Errorf("openai base_url %+v", s)
	}
	if s := setting(mustGet(t, h, "gemini"), "api_key"); s.Source != "env GOOGLE_API_KEY" {
		t.Errorf("gemini api_key %+v", s)
	}
	if s := setting(mustGet(t, h, "ollama"), "base_url"); s.Value != "http://127.0.0.1:11434" {
		t.Errorf("OLLAMA_HOST=localhost gives %+v", s)
	}
	if s := setting(mustGet(t, h, "bedrock"), "region"); s.Value != "us-west-2" || s.Source != "default" {
		t.Errorf("bedrock region %+v", s)
	}
	st, _ = h.Get(ctx, "anthropic")
	if !strings.Contains(st.Error, "ANTHROPIC_API_KEY") {
		t.Errorf("not configured hint %q", st.Error)
	}
	data, _ := json.Marshal(h.List(ctx))
	if strings.Contains(string(data), "sk-env-secret") || strings.Contains(string(data), "g-secret") {
		t.Errorf("a secret leaked into the status: %s", data)
	}
}

func mustGet(t *testing.T, h *hub.Hub, id string) hub.Status {
	t.Helper()
	st, err := h.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestConfigure(t *testing.T) {
	e := newEnv(t)
	e.vars["MY_KEY"] = "sk-from-ref"
	h := e.open(t)
	ctx := context.Background()

	st, err := h.Configure(ctx, "openai", hub.ConfigInput{Settings: map[string]string{"api_key": "${MY_KEY}", "api": "responses"}})
	if err != nil || st.State != hub.StateReady || setting(st, "api_key").Source != "config (env ref ${MY_KEY})" {
		t.Fatalf("configure with a reference: %+v, %v", st, err)
	}
	m, err := h.Resolve("openai:gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := m.Turn(ctx, core.ModelRequest{}, nil); resp.Text != "gpt-4o via responses" {
		t.Errorf("turn %q", resp.Text)
	}

	const literal = "sk-ant-literal-secret-123"
	st, err = h.Configure(ctx, "anthropic", hub.ConfigInput{Settings: map[string]string{"api_key": literal}})
	if err != nil || st.State != hub.StateReady || setting(st, "api_key") != (hub.Setting{Name: "api_key", Secret: true, Value: "set", Source: "credentials file"}) {
		t.Fatalf("configure with a literal: %+v, %v", st, err)
	}
	fi, err := os.Stat(e.path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("credentials file mode %v, %v", fi.Mode(), err)
	}
	if out, _ := json.Marshal(h.List(ctx)); strings.Contains(string(out), literal) {
		t.Error("the literal secret is in the status")
	}

	before, _ := os.ReadFile(e.path)
	for _, c := range []struct {
		id   string
		in   map[string]string
		code string
		text string
	}{
		{"openai", map[string]string{"colour": "blue"}, core.EINVALID, `no setting "colour"`},
		{"openai", map[string]string{"api": "completions"}, core.EINVALID, "not one of chat, responses"},
		{"openai", map[string]string{"base_url": "ftp://x"}, core.EINVALID, "not an http(s) URL"},
		{"openai", map[string]string{"api_key": "${BAD-NAME}"}, core.EINVALID, "not an environment reference"},
		{"openai", map[string]string{"base_url": "${BAD-NAME}"}, core.EINVALID, `"${BAD-NAME}" is not an environment reference`},
		{"openai", map[string]string{"api_key": "a\nb"}, core.EINVALID, "one line"},
		{"openai", nil, core.EINVALID, "no settings"},
		{"nope", map[string]string{"api_key": "x"}, core.ENOTFOUND, "unknown provider"},
	} {
		_, err := h.Configure(ctx, c.id, hub.ConfigInput{Settings: c.in})
		if core.ErrorCode(err) != c.code || !strings.Contains(err.Error(), c.text) {
			t.Errorf("configure %s %v: %v, want %s mentioning %q", c.id, c.in, err, c.code, c.text)
		}
	}
	if _, err := h.Configure(ctx, "openai", hub.ConfigInput{Settings: map[string]string{"api_key": "${sk-secret-value"}}); err == nil || strings.Contains(err.Error(), "sk-secret-value") {
		t.Errorf("a malformed secret is echoed: %v", err)
	}
	if after, _ := os.ReadFile(e.path); string(after) != string(before) {
		t.Error("a refused configuration changed the file")
	}

	// A new hub reads the file; reset forgets it.
	h = e.open(t)
	if st := mustGet(t, h, "anthropic"); st.State != hub.StateReady {
		t.Errorf("after reopen: %+v", st)
	}
	if st, err := h.Reset(ctx, "anthropic"); err != nil || st.State != hub.StateNotConfigured {
		t.Errorf("reset: %+v, %v", st, err)
	}
	if data, _ := os.ReadFile(e.path); strings.Contains(string(data), literal) {
		t.Error("the secret stays in the file after reset")
	}
}

func TestOpenMakesTheFilePrivate(t *testing.T) {
	e := newEnv(t)
	os.WriteFile(e.path, []byte(`{"providers":{"openai":{"api_key":"sk-x"}}}`), 0o644)
	h := e.open(t)
	if fi, _ := os.Stat(e.path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v after open", fi.Mode())
	}
	if st := mustGet(t, h, "openai"); st.State != hub.StateReady {
		t.Errorf("openai %+v", st)
	}
	os.WriteFile(e.path, []byte(`{`), 0o600)
	if _, err := hub.Open(hub.Config{Path: e.path}); err == nil || !strings.Contains(err.Error(), "providers.json") {
		t.Errorf("a corrupt file: %v", err)
	}
}

func TestResolve(t *testing.T) {
	e := newEnv(t)
	e.vars["OPENAI_API_KEY"] = "k"
	h := e.open(t)
	for ref, want := range map[string]string{
		"gpt-4o":             "unknown model",
		"mistral:large":      "unknown model",
		"openai:":            "names no model",
		"anthropic:claude-x": "not configured",
	} {
		if _, err := h.Resolve(ref); core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), want) {
			t.Errorf("Resolve(%q) = %v, want %q", ref, err, want)
		}
	}
	m, err := h.Resolve("ollama:llama3.2:3b")
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := m.Turn(context.Background(), core.ModelRequest{}, nil); !strings.HasPrefix(resp.Text, "llama3.2:3b") {
		t.Errorf("a model with a colon: %q", resp.Text)
	}
	h.Remove("openai")
	if _, err := h.Resolve("openai:gpt-4o"); err == nil || !strings.Contains(err.Error(), "disabled") {
		t.Errorf("disabled provider: %v", err)
	}
	if st := mustGet(t, h, "openai"); st.State != hub.StateDisabled {
		t.Errorf("state %q", st.State)
	}
	if !h.Handles("openai:x") || !h.Handles("demo") || h.Handles("mistral:x") || h.Handles("demo2") {
		t.Error("Handles")
	}
}

func TestModels(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode([]string{"m1", "m2"})
	}))
	defer srv.Close()
	e := newEnv(t)
	e.vars["OPENAI_API_KEY"] = "k"
	e.vars["OPENAI_BASE_URL"] = srv.URL
	e.vars["ANTHROPIC_API_KEY"] = "k"
	e.vars["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:1" // nothing listens
	e.vars["OLLAMA_HOST"] = "127.0.0.1:1"
	h := e.open(t)
	ctx := context.Background()
	got := h.Models(ctx)
	refs := map[string]bool{}
	for _, m := range got.Models {
		refs[m.Ref] = true
	}
	for _, r := range []string{"demo", "openai:m1", "openai:m2", "anthropic:claude-sonnet-4-5"} {
		if !refs[r] {
			t.Errorf("models lack %s: %+v", r, got.Models)
		}
	}
	states := map[string]hub.Status{}
	for _, p := range got.Providers {
		states[p.ID] = p
	}
	if states["openai"].State != hub.StateReady || states["anthropic"].State != hub.StateError || !strings.Contains(states["anthropic"].Error, "listing models") {
		t.Errorf("states %+v", states)
	}
	if got.Default != "demo" {
		t.Errorf("default %q", got.Default)
	}
	n := e.lists.Load()
	h.Models(ctx)
	if e.lists.Load() != n {
		t.Errorf("the live lists were fetched again within the TTL: %d then %d", n, e.lists.Load())
	}
}

// TestNetworkConfined: a provider reaches its base URL's host only; a
// redirect elsewhere and a direct request to another host are refused.
func TestNetworkConfined(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode([]string{"stolen"})
	}))
	defer other.Close()
	own := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/models", http.StatusFound)
	}))
	defer own.Close()
	e := newEnv(t)
	e.vars["OPENAI_API_KEY"] = "k"
	e.vars["OPENAI_BASE_URL"] = own.URL
	h := e.open(t)
	if _, err := h.Resolve("openai:gpt-4o"); err != nil {
		t.Fatal(err)
	}
	_, err := e.made["openai"].Models(context.Background())
	if !errors.Is(err, netguard.ErrDenied) || !strings.Contains(err.Error(), "redirect") {
		t.Errorf("redirect to another host: %v", err)
	}
	direct := fake{providers.Settings{BaseURL: other.URL, HTTP: netguard.NewClient(plugins.Permissions{Network: h.HostsOf(e.def(t, "openai"))})}, &e.lists}
	if _, err := direct.Models(context.Background()); !errors.Is(err, netguard.ErrDenied) {
		t.Errorf("a request to another host: %v", err)
	}
}

// TestHostsLowercase: host names are case-insensitive, so a base URL or
// a region spelled with capitals, from the environment or stored, gives
// the lowercase host:port patterns a plugin's network permission takes
// (and the provider's client is given).
func TestHostsLowercase(t *testing.T) {
	e := newEnv(t)
	e.vars["OPENAI_BASE_URL"] = "http://My-Host:8080/v1"
	e.vars["AWS_REGION"] = "EU-Central-1"
	h := e.open(t)
	check := func(id, want string) {
		t.Helper()
		hosts := h.HostsOf(e.def(t, id))
		if strings.Join(hosts, " ") != want {
			t.Errorf("%s: hosts %q, want %s", id, hosts, want)
		}
		for _, host := range hosts {
			if err := plugins.CheckNetwork(host); err != nil {
				t.Errorf("%s: %q is not a network permission: %v", id, host, err)
			}
		}
	}
	check("openai", "my-host:8080")
	check("bedrock", "bedrock-runtime.eu-central-1.amazonaws.com:443 bedrock.eu-central-1.amazonaws.com:443")
	if _, err := h.Configure(context.Background(), "openai", hub.ConfigInput{Settings: map[string]string{"base_url": "https://API.Example.COM/v1"}}); err != nil {
		t.Fatal(err)
	}
	check("openai", "api.example.com:443")
}

// TestMissingEnvRef: a stored environment reference whose variable is
// not set is reported as such, on the setting and as the provider's
// error, not as "not set"; the reference is shown, it is no secret.
func TestMissingEnvRef(t *testing.T) {
	e := newEnv(t)
	e.vars["OPENAI_API_KEY"] = "sk-env-secret" // the vendor's variable does not stand in for the reference
	h := e.open(t)
	ctx := context.Background()
	const why = "${MY_OPENAI_KEY} stored, but MY_OPENAI_KEY is not set in the server's environment"

	st, err := h.Configure(ctx, "openai", hub.ConfigInput{Settings: map[string]string{"api_key": "${MY_OPENAI_KEY}"}})
	if err != nil {
		t.Fatal(err)
	}
	for what, st := range map[string]hub.Status{"Configure": st, "Get": mustGet(t, h, "openai"), "List": h.List(ctx)[0], "Models": h.Models(ctx).Providers[0]} {
		if st.ID != "openai" || st.State != hub.StateError || st.Error != "api_key: "+why {
			t.Errorf("%s: state %q, error %q", what, st.State, st.Error)
		}
		want := hub.Setting{Name: "api_key", Secret: true, Value: "not set", Source: "config (env ref ${MY_OPENAI_KEY})", Error: why}
		if got := setting(st, "api_key"); got != want {
			t.Errorf("%s: api_key %+v, want %+v", what, got, want)
		}
	}
	if out, _ := json.Marshal(h.List(ctx)); strings.Contains(string(out), "sk-env-secret") {
		t.Errorf("a secret is in the status: %s", out)
	}
	_, err = h.Resolve("openai:gpt-4o")
	if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "api_key: "+why) || !strings.Contains(err.Error(), "kiln providers set openai") {
		t.Errorf("Resolve with a missing reference: %v", err)
	}
	for _, m := range h.Models(ctx).Models {
		if m.Provider == "openai" {
			t.Errorf("models of a provider that cannot be used: %+v", m)
		}
	}

	// A setting that is not secret: the same, its value empty.
	st, err = h.Configure(ctx, "ollama", hub.ConfigInput{Settings: map[string]string{"base_url": "${GPU_BOX}"}})
	if err != nil || st.State != hub.StateError || st.Error != "base_url: ${GPU_BOX} stored, but GPU_BOX is not set in the server's environment" ||
		setting(st, "base_url") != (hub.Setting{Name: "base_url", Source: "config (env ref ${GPU_BOX})", Error: "${GPU_BOX} stored, but GPU_BOX is not set in the server's environment"}) {
		t.Errorf("ollama with a missing reference: %+v, %v", st, err)
	}

	// Once the variable is there, the provider is ready.
	e.vars["MY_OPENAI_KEY"] = "sk-ref-secret"
	st = mustGet(t, h, "openai")
	if st.State != hub.StateReady || st.Error != "" || setting(st, "api_key") != (hub.Setting{Name: "api_key", Secret: true, Value: "set", Source: "config (env ref ${MY_OPENAI_KEY})"}) {
		t.Errorf("with the variable set: %+v", st)
	}
	if _, err := h.Resolve("openai:gpt-4o"); err != nil {
		t.Errorf("Resolve with the variable set: %v", err)
	}
}

// checking is a fake provider that is a Checker.
type checking struct {
	fake
	checks *atomic.Int32
	answer func() error
}

func (c checking) Check(ctx context.Context) error {
	c.checks.Add(1)
	return c.answer()
}

// TestCheck: a provider that is a Checker is checked when it is
// described, not called ready until a run fails; the answer is kept
// CheckTTL for the same settings; a failed check is its error.
func TestCheck(t *testing.T) {
	e := newEnv(t)
	var checks atomic.Int32
	var mu sync.Mutex
	answer := errors.New("cannot reach Ollama at http://127.0.0.1:11434: connection refused")
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	factory := func(s providers.Settings) (providers.Provider, error) { return fake{s, &e.lists}, nil }
	factories := map[string]providers.Factory{"openai": factory, "ollama": func(s providers.Settings) (providers.Provider, error) {
		return checking{fake{s, &e.lists}, &checks, func() error { mu.Lock(); defer mu.Unlock(); return answer }}, nil
	}}
	e.vars["OPENAI_API_KEY"] = "k"
	e.defs = withFactories(factories)
	h, err := hub.Open(hub.Config{Path: e.path, Defs: e.defs, Getenv: func(k string) string { return e.vars[k] },
		Logger: quiet, Retry: providers.RetryPolicy{Attempts: 1}, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	state := func(st hub.Status) string { return st.State + " " + st.Error }
	byID := func(list []hub.Status, id string) hub.Status {
		for _, st := range list {
			if st.ID == id {
				return st
			}
		}
		t.Fatalf("no %s in %+v", id, list)
		return hub.Status{}
	}

	if got := state(byID(h.List(ctx), "ollama")); got != "error "+answer.Error() {
		t.Errorf("List: ollama %q", got)
	}
	if got := state(byID(h.List(ctx), "openai")); got != "ready " {
		t.Errorf("List: openai %q (not a Checker)", got)
	}
	if got := state(mustGet(t, h, "ollama")); got != "error "+answer.Error() || checks.Load() != 1 {
		t.Errorf("Get within the TTL: %q after %d checks", got, checks.Load())
	}
	// A failed check spares Models the list it would fail to get.
	lists := e.lists.Load()
	if got := state(byID(h.Models(ctx).Providers, "ollama")); got != "error "+answer.Error() || e.lists.Load() != lists+1 || checks.Load() != 1 {
		t.Errorf("Models: ollama %q, %d lists (openai's only), %d checks", got, e.lists.Load()-lists, checks.Load())
	}

	// After the TTL it is checked again.
	mu.Lock()
	answer, now = nil, now.Add(31*time.Second)
	mu.Unlock()
	if got := state(mustGet(t, h, "ollama")); got != "ready " || checks.Load() != 2 {
		t.Errorf("after the TTL: %q after %d checks", got, checks.Load())
	}
	// New settings are checked at once, and the answer comes with Configure's status.
	mu.Lock()
	answer = errors.New("cannot reach Ollama at http://127.0.0.1:1: connection refused")
	mu.Unlock()
	st, err := h.Configure(ctx, "ollama", hub.ConfigInput{Settings: map[string]string{"base_url": "127.0.0.1:1"}})
	if err != nil || state(st) != "error "+answer.Error() || checks.Load() != 3 {
		t.Errorf("Configure: %q, %v, after %d checks", state(st), err, checks.Load())
	}
	// A disabled provider is not checked.
	h.Remove("ollama")
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	if got := mustGet(t, h, "ollama"); got.State != hub.StateDisabled || checks.Load() != 3 {
		t.Errorf("disabled: %q after %d checks", got.State, checks.Load())
	}
	// A caller that goes away leaves no answer behind.
	e.enable(t, h, "ollama")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	h.List(cancelled)
	if got := state(mustGet(t, h, "ollama")); got != "error "+answer.Error() || checks.Load() != 5 {
		t.Errorf("after a cancelled List: %q after %d checks", got, checks.Load())
	}
}

// TestOllamaReachable: the Ollama provider, through its confined client,
// is in state error while nothing answers at its host, and ready once
// Ollama does.
func TestOllamaReachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	ollamaSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/tags" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, `{"models":[{"name":"llama3.2:3b"}]}`)
	}))
	defer ollamaSrv.Close()

	for _, tt := range []struct{ host, state, err string }{
		{closed, hub.StateError, "cannot reach Ollama at http://" + closed + ": connection refused (is it running? 'ollama serve' starts it)"},
		{strings.TrimPrefix(ollamaSrv.URL, "http://"), hub.StateReady, ""},
	} {
		e := newEnv(t)
		e.vars["OLLAMA_HOST"] = tt.host
		h, err := hub.Open(hub.Config{Path: e.path, Defs: hub.Registered(),
			Getenv: func(k string) string { return e.vars[k] }, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		st := mustGet(t, h, "ollama")
		if st.State != tt.state || st.Error != tt.err {
			t.Errorf("OLLAMA_HOST=%s: %s %q, want %s %q", tt.host, st.State, st.Error, tt.state, tt.err)
		}
		if d := time.Since(start); d > 2500*time.Millisecond {
			t.Errorf("OLLAMA_HOST=%s: describing took %s", tt.host, d)
		}
		if models := h.Models(context.Background()); tt.state == hub.StateReady && (len(models.Models) != 1 || models.Models[0].Ref != "ollama:llama3.2:3b") {
			t.Errorf("models %+v", models.Models)
		}
	}
}

// TestForget: a provider whose plugin was removed is gone from the list,
// and its stored settings, secrets included, are gone from the file.
func TestForget(t *testing.T) {
	e := newEnv(t)
	h := e.open(t)
	ctx := context.Background()
	if _, err := h.Configure(ctx, "openai", hub.ConfigInput{Settings: map[string]string{"api_key": "sk-forget-me"}}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(e.path); !strings.Contains(string(data), "sk-forget-me") {
		t.Fatalf("the secret is not stored: %s", data)
	}
	if err := h.Forget("openai"); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(e.path); strings.Contains(string(data), "sk-forget-me") || strings.Contains(string(data), `"openai"`) {
		t.Errorf("the file still has the provider: %s", data)
	}
	for _, st := range h.List(ctx) {
		if st.ID == "openai" {
			t.Errorf("listed after Forget: %+v", st)
		}
	}
	if _, err := h.Resolve("openai:gpt-4o"); err == nil {
		t.Error("resolved a forgotten provider")
	}
}

// TestReload: two hubs on one providers.json, as servers sharing it are:
// what one configures and resets, the other has after Reload, its new
// secret known to its redactor first; a file that no longer parses leaves
// the settings as they were.
func TestReload(t *testing.T) {
	e := newEnv(t)
	a, b := e.open(t), e.open(t)
	red := core.NewRedactor()
	other, err := hub.Open(hub.Config{Path: e.path, Defs: e.defs, Getenv: func(string) string { return "" }, Logger: quiet, Redactor: red})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const secret = "sk-ant-shared-secret-456"
	if _, err := a.Configure(ctx, "anthropic", hub.ConfigInput{Settings: map[string]string{"api_key": secret}}); err != nil {
		t.Fatal(err)
	}
	if st := mustGet(t, b, "anthropic"); st.State != hub.StateNotConfigured {
		t.Fatalf("before Reload: %+v", st)
	}
	for _, h := range []*hub.Hub{b, other} {
		if err := h.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	if st := mustGet(t, b, "anthropic"); st.State != hub.StateReady {
		t.Fatalf("after Reload: %+v", st)
	}
	if got := red.Redact("key " + secret); strings.Contains(got, secret) {
		t.Errorf("the reloaded secret is not redacted: %q", got)
	}
	if err := os.WriteFile(e.path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(); err == nil {
		t.Fatal("Reload of a broken file: no error")
	}
	if st := mustGet(t, b, "anthropic"); st.State != hub.StateReady {
		t.Fatalf("after a failed Reload: %+v", st)
	}
	if _, err := a.Reset(ctx, "anthropic"); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(); err != nil {
		t.Fatal(err)
	}
	if st := mustGet(t, b, "anthropic"); st.State != hub.StateNotConfigured {
		t.Fatalf("after a reset elsewhere: %+v", st)
	}
}
