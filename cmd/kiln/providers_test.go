package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers/hub"
	"github.com/kilnhq/kiln/sdk/client"
	"github.com/kilnhq/kiln/web"
)

// fakeSetting describes one setting of a fake provider.
type fakeSetting struct {
	name   string
	secret bool
	def    string // the default value, "" for none
	env    string // the environment variable that sets it, "" for none
}

// fakeProvider is one provider of fakeProviderHub.
type fakeProvider struct {
	name     string
	settings []fakeSetting
	env      map[string]string // the server's environment, as the provider sees it
	err      string            // when set, the provider is in state error
	models   []hub.Model
}

// fakeProviderHub is a web.Providers in memory, redacting secrets as the hub does:
// openai has its key in the environment, anthropic is not configured,
// ollama cannot be reached and bedrock has region and profile settings
// and a secret that is not an API key.
type fakeProviderHub struct {
	mu        sync.Mutex
	providers map[string]*fakeProvider
	config    map[string]map[string]string // stored settings by provider
	inputs    []hub.ConfigInput            // every Configure input
	resets    []string
}

var _ web.Providers = (*fakeProviderHub)(nil)

func newFakeProviderHub() *fakeProviderHub {
	return &fakeProviderHub{
		providers: map[string]*fakeProvider{
			"openai": {name: "OpenAI", env: map[string]string{"OPENAI_API_KEY": "sk-from-env"},
				settings: []fakeSetting{{name: "api_key", secret: true, env: "OPENAI_API_KEY"}, {name: "base_url", env: "OPENAI_BASE_URL"}, {name: "api", def: "chat"}},
				models: []hub.Model{{Ref: "openai:gpt-4o", Provider: "openai", ID: "gpt-4o", Name: "GPT-4o", ContextSize: 128000},
					{Ref: "openai:gpt-4.1", Provider: "openai", ID: "gpt-4.1", ContextSize: 1047576}}},
			"anthropic": {name: "Anthropic", settings: []fakeSetting{{name: "api_key", secret: true, env: "ANTHROPIC_API_KEY"}},
				models: []hub.Model{{Ref: "anthropic:claude-sonnet-4", Provider: "anthropic", ID: "claude-sonnet-4", Name: "Claude Sonnet 4", ContextSize: 200000}}},
			"ollama": {name: "Ollama", err: "list models: connection refused",
				settings: []fakeSetting{{name: "base_url", def: "http://localhost:11434", env: "OLLAMA_HOST"}}},
			"bedrock": {name: "Amazon Bedrock", settings: []fakeSetting{{name: "region", def: "us-east-1", env: "AWS_REGION"},
				{name: "profile", env: "AWS_PROFILE"}, {name: "secret_access_key", secret: true, env: "AWS_SECRET_ACCESS_KEY"}}},
		},
		config: map[string]map[string]string{"openai": {}, "anthropic": {}, "ollama": {}, "bedrock": {}},
	}
}

// status is provider id's redacted status; f.mu is held.
func (f *fakeProviderHub) status(id string) hub.Status {
	p, cfg := f.providers[id], f.config[id]
	st := hub.Status{ID: id, Name: p.name, State: "not_configured", Settings: []hub.Setting{}, Env: []string{}}
	ready := true
	for _, s := range p.settings {
		if s.env != "" {
			st.Env = append(st.Env, s.env)
		}
		out := hub.Setting{Name: s.name, Secret: s.secret}
		switch v := cfg[s.name]; {
		case v != "" && strings.HasPrefix(v, "${"):
			out.Value, out.Source = v, "config (env ref "+v+")"
		case v != "":
			out.Value, out.Source = v, "config"
			if s.secret {
				out.Source = "credentials file"
			}
		case p.env[s.env] != "":
			out.Value, out.Source = p.env[s.env], "env "+s.env
		case s.def != "":
			out.Value, out.Source = s.def, "default"
		}
		if s.secret {
			if out.Value == "" {
				out.Value = "not set"
				ready = ready && s.name != "api_key"
			} else {
				out.Value = "set"
			}
		}
		st.Settings = append(st.Settings, out)
	}
	switch {
	case p.err != "":
		st.State, st.Error = "error", p.err
	case ready:
		st.State = "ready"
	}
	return st
}

func (f *fakeProviderHub) ids() []string { return slices.Sorted(maps.Keys(f.providers)) }

func (f *fakeProviderHub) List(context.Context) []hub.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []hub.Status
	for _, id := range f.ids() {
		out = append(out, f.status(id))
	}
	return out
}

func (f *fakeProviderHub) Get(_ context.Context, id string) (hub.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.providers[id] == nil {
		return hub.Status{}, core.Errorf(core.ENOTFOUND, "no provider %q", id)
	}
	return f.status(id), nil
}

func (f *fakeProviderHub) Configure(_ context.Context, id string, in hub.ConfigInput) (hub.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inputs = append(f.inputs, in)
	p := f.providers[id]
	if p == nil {
		return hub.Status{}, core.Errorf(core.ENOTFOUND, "no provider %q", id)
	}
	for name := range in.Settings {
		if !slices.ContainsFunc(p.settings, func(s fakeSetting) bool { return s.name == name }) {
			return hub.Status{}, core.Errorf(core.EINVALID, "provider %s has no setting %q", id, name)
		}
	}
	for name, v := range in.Settings {
		if v == "" {
			delete(f.config[id], name)
		} else {
			f.config[id][name] = v
		}
	}
	return f.status(id), nil
}

func (f *fakeProviderHub) Reset(_ context.Context, id string) (hub.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.providers[id] == nil {
		return hub.Status{}, core.Errorf(core.ENOTFOUND, "no provider %q", id)
	}
	f.resets = append(f.resets, id)
	f.config[id] = map[string]string{}
	return f.status(id), nil
}

func (f *fakeProviderHub) Models(context.Context) hub.Models {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := hub.Models{Default: "openai:gpt-4o"}
	for _, id := range f.ids() {
		st := f.status(id)
		m.Providers = append(m.Providers, st)
		if st.State == "ready" {
			m.Models = append(m.Models, f.providers[id].models...)
		}
	}
	return m
}

// lastInput returns the settings of the latest Configure call.
func (f *fakeProviderHub) lastInput(t *testing.T) map[string]string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.inputs) == 0 {
		t.Fatal("the hub was not configured")
	}
	return f.inputs[len(f.inputs)-1].Settings
}

// resetIDs returns the providers reset so far.
func (f *fakeProviderHub) resetIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.resets)
}

func (f *fakeProviderHub) configured() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.inputs)
}

// startProvidersServer serves the API with providers (nil for a server
// without a hub) and points the client commands at it. The provider
// routes do not use the core service, so there is none.
func startProvidersServer(t *testing.T, providers web.Providers) {
	t.Helper()
	opts := web.Options{Version: "v-test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if providers != nil {
		opts.Providers = providers
	}
	srv := httptest.NewServer(web.New(nil, opts))
	t.Cleanup(srv.Close)
	useServer(t, srv.URL)
}

// kilnOK runs kiln and requires exit status 0.
func kilnOK(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	r := kilnIn(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("kiln %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// kilnFails runs kiln and requires exit status 1 with every part in stderr.
func kilnFails(t *testing.T, stdin string, args []string, parts ...string) result {
	t.Helper()
	r := kilnIn(t, stdin, args...)
	if r.code != exitFailure {
		t.Fatalf("kiln %s: exit %d, want 1\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	mustContain(t, "kiln "+strings.Join(args, " "), r.stderr, parts...)
	return r
}

func TestProvidersList(t *testing.T) {
	startProvidersServer(t, newFakeProviderHub())
	r := kilnOK(t, "", "providers", "ls")
	mustContain(t, "ls", r.stdout, "ID", "NAME", "STATE", "CONFIGURED",
		"openai", "OpenAI", "ready", "api_key set (env OPENAI_API_KEY)",
		"anthropic", "not_configured", "nothing set (reads ANTHROPIC_API_KEY)",
		"ollama", "error: list models: connection refused",
		"bedrock", "Amazon Bedrock", "defaults: region=us-east-1")
	if strings.Contains(r.stdout, "sk-from-env") {
		t.Errorf("ls shows a secret:\n%s", r.stdout)
	}
	// Why a provider is in error is said in full below the table.
	tbl, reasons, _ := strings.Cut(r.stdout, "\n\n")
	if lines := strings.Split(tbl, "\n"); len(lines) != 5 || !strings.HasPrefix(lines[1], "anthropic") ||
		!strings.Contains(lines[3], " error ") || strings.Contains(lines[3], "connection refused") ||
		reasons != "ollama: error: list models: connection refused\n" {
		t.Errorf("ls:\n%s", r.stdout)
	}

	r = kilnOK(t, "", "providers", "list", "-o", "json")
	var out struct{ Providers []hub.Status }
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Providers) != 4 || out.Providers[3].ID != "openai" ||
		out.Providers[3].Settings[0] != (hub.Setting{Name: "api_key", Secret: true, Value: "set", Source: "env OPENAI_API_KEY"}) {
		t.Fatalf("ls -o json: %v %s", err, r.stdout)
	}
}

func TestProvidersShow(t *testing.T) {
	startProvidersServer(t, newFakeProviderHub())
	r := kilnOK(t, "", "providers", "show", "openai")
	mustContain(t, "show openai", r.stdout,
		"ID:", "openai", "Name:", "OpenAI", "State:", "ready",
		"NAME", "VALUE", "SOURCE",
		"api_key", "secret, set", "env OPENAI_API_KEY",
		"base_url", "api ", "chat", "default",
		"Environment:", "OPENAI_API_KEY, OPENAI_BASE_URL",
		"kiln providers set openai --api-key-env OPENAI_API_KEY",
		"kiln providers set openai --api-key-stdin",
		"kiln providers set openai --base-url URL",
		"kiln providers set openai --set api=VALUE",
		"kiln providers reset openai")
	if strings.Contains(r.stdout, "sk-from-env") {
		t.Errorf("show displays a secret:\n%s", r.stdout)
	}

	r = kilnOK(t, "", "providers", "show", "bedrock")
	mustContain(t, "show bedrock", r.stdout, "region", "us-east-1", "secret_access_key", "secret, not set",
		"--set region=VALUE", "--set profile=VALUE", "--set secret_access_key='${ENV_NAME}'", "AWS_SECRET_ACCESS_KEY")
	if strings.Contains(r.stdout, "--api-key") {
		t.Errorf("bedrock has no api_key, yet show suggests --api-key flags:\n%s", r.stdout)
	}

	r = kilnOK(t, "", "providers", "show", "ollama")
	mustContain(t, "show ollama", r.stdout, "error: list models: connection refused")

	r = kilnOK(t, "", "providers", "show", "anthropic", "-o", "json")
	var st hub.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.ID != "anthropic" || st.State != "not_configured" {
		t.Fatalf("show -o json: %v %s", err, r.stdout)
	}

	kilnFails(t, "", []string{"providers", "show", "nope"}, `error: no provider "nope"`)
	r = kiln(t, "providers", "show")
	if r.code != exitFailure || !strings.Contains(r.stderr, "missing ID") {
		t.Fatalf("show without ID: %d %q", r.code, r.stderr)
	}
}

func TestProvidersSet(t *testing.T) {
	fake := newFakeProviderHub()
	startProvidersServer(t, fake)

	r := kilnOK(t, "", "providers", "set", "anthropic", "--api-key-env", "MY_ANTHROPIC_KEY")
	if got := fake.lastInput(t); !maps.Equal(got, map[string]string{"api_key": "${MY_ANTHROPIC_KEY}"}) {
		t.Fatalf("--api-key-env sent %v", got)
	}
	mustContain(t, "set --api-key-env", r.stdout, "State:", "ready", "config (env ref ${MY_ANTHROPIC_KEY})")

	// --api-key-stdin: the key travels in the request only, and is never printed.
	const key = "sk-ant-piped-0123456789"
	r = kilnOK(t, "  "+key+"\n", "providers", "set", "anthropic", "--api-key-stdin")
	if got := fake.lastInput(t); !maps.Equal(got, map[string]string{"api_key": key}) {
		t.Fatalf("--api-key-stdin sent %v", got)
	}
	mustContain(t, "set --api-key-stdin", r.stdout, "secret, set", "credentials file")
	if strings.Contains(r.stdout+r.stderr, key) {
		t.Errorf("set --api-key-stdin printed the key:\n%s%s", r.stdout, r.stderr)
	}

	t.Run("from a terminal", func(t *testing.T) {
		// It asks, on standard error, and reads one line.
		withTerminal(t)
		r := kilnOK(t, key+"\nnot read\n", "providers", "set", "anthropic", "--api-key-stdin", "-o", "json")
		if got := fake.lastInput(t); got["api_key"] != key {
			t.Fatalf("--api-key-stdin from a terminal sent %v", got)
		}
		mustContain(t, "terminal prompt", r.stderr, "API key")
		var st hub.Status
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.ID != "anthropic" || st.State != "ready" {
			t.Fatalf("set -o json: %v %q", err, r.stdout)
		}
	})

	r = kilnOK(t, "", "providers", "set", "openai", "--base-url", "https://proxy.example.com/v1", "--set", "api=responses")
	if got := fake.lastInput(t); !maps.Equal(got, map[string]string{"base_url": "https://proxy.example.com/v1", "api": "responses"}) {
		t.Fatalf("--base-url --set sent %v", got)
	}
	mustContain(t, "set --base-url", r.stdout, "https://proxy.example.com/v1", "responses", "config")

	kilnOK(t, "", "providers", "set", "bedrock", "--set", "region=eu-central-1", "--set", "profile=work", "--set", "secret_access_key=${AWS_SECRET}")
	if got := fake.lastInput(t); !maps.Equal(got, map[string]string{"region": "eu-central-1", "profile": "work", "secret_access_key": "${AWS_SECRET}"}) {
		t.Fatalf("--set sent %v", got)
	}
	// An empty value removes a setting, a secret one included.
	kilnOK(t, "", "providers", "set", "bedrock", "--set", "secret_access_key=", "--set", "profile=")
	if got := fake.lastInput(t); !maps.Equal(got, map[string]string{"secret_access_key": "", "profile": ""}) {
		t.Fatalf("removal sent %v", got)
	}

	// The server's refusals come through.
	kilnFails(t, "", []string{"providers", "set", "openai", "--set", "region=eu"}, `error: provider openai has no setting "region"`)
	kilnFails(t, "", []string{"providers", "set", "nope", "--base-url", "http://x"}, `error: no provider "nope"`)
	// An unknown provider is reported before a key is read.
	kilnFails(t, key, []string{"providers", "set", "nope", "--api-key-stdin"}, `error: no provider "nope"`)

	sent := fake.configured()
	for _, tt := range []struct {
		args  []string
		stdin string
		parts []string
	}{
		{[]string{"openai", "--set", "api_key=" + key}, "", []string{"api_key is a secret", "shell history", "--api-key-stdin", "--api-key-env"}},
		{[]string{"openai", "--set", "api_key=$" + "{X} and more"}, "", []string{"api_key is a secret", "--api-key-stdin"}},
		{[]string{"bedrock", "--set", "secret_access_key=" + key}, "", []string{"secret_access_key is a secret", "--set secret_access_key='${NAME}'"}},
		{[]string{"openai", "--set", "client_secret=" + key}, "", []string{"client_secret is a secret"}},
		{[]string{"openai"}, "", []string{"nothing to set"}},
		{[]string{"openai", "--api-key-env", "A", "--api-key-stdin"}, key, []string{"give one"}},
		{[]string{"openai", "--api-key-env", "A", "--set", "api_key=${B}"}, "", []string{"give one"}},
		{[]string{"openai", "--api-key-stdin", "--set", "api_key="}, key, []string{"give one"}},
		{[]string{"openai", "--base-url", "http://a", "--set", "base_url=http://b"}, "", []string{"give one"}},
		{[]string{"openai", "--api-key-env", "$OPENAI_API_KEY"}, "", []string{"name of an environment variable"}},
		{[]string{"openai", "--set", "api"}, "", []string{"expected name=value"}},
		{[]string{"openai", "--set", "api=a", "--set", "api=b"}, "", []string{"given twice"}},
		{[]string{"openai", "--api-key-stdin"}, "", []string{"standard input is empty"}},
		{[]string{"openai", "--api-key-stdin"}, "\n \n", []string{"standard input is empty"}},
		{[]string{"openai", "--api-key-stdin"}, "line one\nline two\n", []string{"several lines"}},
	} {
		args := append([]string{"providers", "set"}, tt.args...)
		r := kilnFails(t, tt.stdin, args, tt.parts...)
		if strings.Contains(r.stdout+r.stderr, key) {
			t.Errorf("kiln %s printed the key:\n%s%s", strings.Join(args, " "), r.stdout, r.stderr)
		}
	}
	if n := fake.configured(); n != sent {
		t.Errorf("refused commands reached the hub: %d more inputs", n-sent)
	}
	r = kiln(t, "providers", "set", "--help")
	mustContain(t, "set --help", r.stdout, "never taken as a command-line argument", "shell history", "--api-key-stdin", "--api-key-env")
}

func TestProvidersReset(t *testing.T) {
	fake := newFakeProviderHub()
	startProvidersServer(t, fake)
	kilnOK(t, "", "providers", "set", "anthropic", "--api-key-env", "K")
	r := kilnOK(t, "", "providers", "reset", "anthropic", "--yes")
	mustContain(t, "reset", r.stdout, "Forgot the stored configuration of anthropic.", "State:", "not_configured", "secret, not set")
	r = kilnOK(t, "", "providers", "reset", "openai", "-o", "json", "--yes")
	var st hub.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.ID != "openai" || st.State != "ready" {
		t.Fatalf("reset -o json: %v %q", err, r.stdout)
	}
	if got := fake.resetIDs(); !slices.Equal(got, []string{"anthropic", "openai"}) {
		t.Fatalf("resets %v", got)
	}
	kilnFails(t, "", []string{"providers", "reset", "nope", "-y"}, `error: no provider "nope"`)
}

func TestModels(t *testing.T) {
	startProvidersServer(t, newFakeProviderHub())
	r := kilnOK(t, "", "models")
	mustContain(t, "models", r.stdout, "REF", "PROVIDER", "NAME", "CONTEXT",
		"openai:gpt-4o *", "GPT-4o", "128k", "openai:gpt-4.1", "1M",
		"anthropic: not_configured (see 'kiln providers show anthropic')",
		"ollama: error: list models: connection refused",
		"* default model: openai:gpt-4o\n")
	for _, not := range []string{"claude", "bedrock"} {
		if strings.Contains(r.stdout, not) {
			t.Errorf("models lists %s:\n%s", not, r.stdout)
		}
	}

	r = kilnOK(t, "", "models", "--provider", "anthropic")
	mustContain(t, "models --provider anthropic", r.stdout, "No models.", "anthropic: not_configured", "* default model: openai:gpt-4o (not in the list above)")
	if strings.Contains(r.stdout, "ollama") {
		t.Errorf("--provider anthropic shows ollama:\n%s", r.stdout)
	}

	r = kilnOK(t, "", "models", "--provider", "openai", "-o", "json")
	var m hub.Models
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil || len(m.Models) != 2 || len(m.Providers) != 1 || m.Default != "openai:gpt-4o" {
		t.Fatalf("models -o json: %v %s", err, r.stdout)
	}
	r = kilnOK(t, "", "models", "--provider", "ollama", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil || m.Models == nil || len(m.Models) != 0 || !strings.Contains(r.stdout, `"models": []`) {
		t.Fatalf("models --provider ollama -o json: %v %s", err, r.stdout)
	}
	kilnFails(t, "", []string{"models", "--provider", "nope"}, `no provider "nope"`, "kiln providers ls")
}

func TestContextSize(t *testing.T) {
	for n, want := range map[int]string{0: "-", 512: "512", 8192: "8k", 128000: "128k", 131072: "131k", 1000000: "1M", 1047576: "1M", 1500000: "1.5M", 2097152: "2.1M"} {
		if got := contextSize(n); got != want {
			t.Errorf("contextSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestProvidersWithoutHub(t *testing.T) {
	startProvidersServer(t, nil)
	for _, args := range [][]string{{"providers", "ls"}, {"providers", "show", "openai"}, {"providers", "reset", "openai", "--yes"},
		{"providers", "set", "openai", "--base-url", "http://x"}, {"models"}} {
		kilnFails(t, "", args, "error: providers are not available on this server")
	}
}

func TestProvidersCompletion(t *testing.T) {
	startProvidersServer(t, newFakeProviderHub())
	r := kiln(t, "__complete", "providers", "show", "")
	mustContain(t, "show completion", r.stdout, "openai\tOpenAI ready\n", "ollama\tOllama error\n", ":4\n")
	r = kiln(t, "__complete", "providers", "set", "bedrock", "--set", "")
	mustContain(t, "--set completion", r.stdout, "region=\t", "secret_access_key=\tsecret", ":6\n")
	r = kiln(t, "__complete", "models", "--provider", "")
	mustContain(t, "--provider completion", r.stdout, "anthropic\tAnthropic not_configured\n", ":4\n")
}

func TestKeyEnv(t *testing.T) {
	for _, tt := range []struct {
		p    client.ProviderStatus
		want string
	}{
		{client.ProviderStatus{Env: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"},
			Settings: []client.ProviderSetting{{Name: "api_key", Secret: true, Value: "set", Source: "env GOOGLE_API_KEY"}}}, "GOOGLE_API_KEY"},
		{client.ProviderStatus{Env: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}}, "GEMINI_API_KEY"},
		{client.ProviderStatus{Env: []string{"AWS_REGION", "AWS_BEARER_TOKEN_BEDROCK", "AWS_ACCESS_KEY_ID"}}, "AWS_BEARER_TOKEN_BEDROCK"},
		{client.ProviderStatus{Env: []string{"OLLAMA_HOST"}}, "NAME"},
	} {
		if got := keyEnv(&tt.p); got != tt.want {
			t.Errorf("keyEnv(%+v) = %q, want %q", tt.p, got, tt.want)
		}
	}
}

// TestProvidersMissingEnvRef: with the server's own hub, a stored
// environment reference whose variable the server does not have is shown
// as such by providers show, ls and models and in the API, never as "not
// set".
func TestProvidersMissingEnvRef(t *testing.T) {
	env := map[string]string{"OPENAI_API_KEY": "sk-vendor-secret", "OLLAMA_HOST": "127.0.0.1:1"}
	h, err := hub.Open(hub.Config{Path: filepath.Join(t.TempDir(), "providers.json"), Defs: hub.Registered(),
		Getenv: func(k string) string { return env[k] }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	startProvidersServer(t, h)
	const why = "${MY_OPENAI_KEY} stored, but MY_OPENAI_KEY is not set in the server's environment"

	r := kilnOK(t, "", "providers", "set", "openai", "--api-key-env", "MY_OPENAI_KEY")
	mustContain(t, "set", r.stdout, "State:        error: api_key: "+why+"\n")
	r = kilnOK(t, "", "providers", "show", "openai")
	mustContain(t, "show", r.stdout,
		"State:        error: api_key: "+why+"\n",
		"api_key   secret, missing: MY_OPENAI_KEY is not set in the server's environment  config (env ref ${MY_OPENAI_KEY})\n",
		"set MY_OPENAI_KEY where the server runs, and restart it   # api_key refers to it\n")
	r = kilnOK(t, "", "providers", "ls")
	mustContain(t, "ls", r.stdout, "api_key ${MY_OPENAI_KEY} (MY_OPENAI_KEY unset)", "\nopenai: error: api_key: "+why+"\n")
	r = kilnOK(t, "", "models")
	mustContain(t, "models", r.stdout, "openai: error: api_key: "+why+"\n")
	if r := kilnOK(t, "", "providers", "show", "openai"); strings.Contains(r.stdout, "secret, not set") {
		t.Errorf("show says the key is not set:\n%s", r.stdout)
	}

	// The API: the setting says it too; no secret is shown.
	resp, err := http.Get(os.Getenv(envServer) + "/api/v1/providers/openai")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var st hub.Status
	if err := json.Unmarshal(raw, &st); err != nil || st.State != "error" || st.Error != "api_key: "+why ||
		st.Settings[0] != (hub.Setting{Name: "api_key", Secret: true, Value: "not set", Source: "config (env ref ${MY_OPENAI_KEY})", Error: why}) {
		t.Errorf("GET /providers/openai: %v %s", err, raw)
	}
	if strings.Contains(string(raw), "sk-vendor-secret") {
		t.Errorf("the API shows a secret: %s", raw)
	}
}

// TestProvidersOllamaReachable: with the server's own hub, Ollama is in
// state error while nothing answers at its host, with why, and ready
// once it does; listing stays fast.
func TestProvidersOllamaReachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	running := httptest.NewServer(&fakeOllama{})
	defer running.Close()
	open := func(host string) {
		h, err := hub.Open(hub.Config{Path: filepath.Join(t.TempDir(), "providers.json"), Defs: hub.Registered(),
			Getenv: func(k string) string { return map[string]string{"OLLAMA_HOST": host}[k] }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		startProvidersServer(t, h)
	}

	open(closed)
	why := "cannot reach Ollama at http://" + closed + ": connection refused (is it running? 'ollama serve' starts it)"
	start := time.Now()
	r := kilnOK(t, "", "providers", "ls")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("providers ls took %s", d)
	}
	mustContain(t, "ls", r.stdout, "\nollama: error: "+why+"\n")
	if !regexp.MustCompile(`\nollama +Ollama +error +base_url=http://` + regexp.QuoteMeta(closed) + `\n`).MatchString(r.stdout) {
		t.Errorf("ls does not show ollama in error:\n%s", r.stdout)
	}
	mustContain(t, "show", kilnOK(t, "", "providers", "show", "ollama").stdout, "State:        error: "+why+"\n")
	mustContain(t, "models", kilnOK(t, "", "models").stdout, "ollama: error: "+why+"\n")
	var st hub.Status
	if err := json.Unmarshal([]byte(kilnOK(t, "", "providers", "show", "ollama", "-o", "json").stdout), &st); err != nil || st.State != "error" || st.Error != why {
		t.Errorf("show -o json: %+v %v", st, err)
	}

	open(strings.TrimPrefix(running.URL, "http://"))
	if r := kilnOK(t, "", "providers", "show", "ollama"); !strings.Contains(r.stdout, "State:        ready\n") {
		t.Errorf("show with Ollama running:\n%s", r.stdout)
	}
	mustContain(t, "models", kilnOK(t, "", "models", "--provider", "ollama").stdout, "ollama:llama3.2:3b")
}
