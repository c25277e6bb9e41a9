package web

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers/hub"
)

// fakeProviders is a Providers in memory with two providers: openai
// (secret api_key, base_url, api) and ollama (base_url only). It keeps
// secrets as given, literal ones included, and redacts them in every
// Status it returns, as the hub does.
type fakeProviders struct {
	mu      sync.Mutex
	config  map[string]map[string]string // provider id -> stored settings
	inputs  []hub.ConfigInput            // every Configure input
	resets  []string                     // every reset provider id
	lastOut hub.Status                   // what Configure or Reset returned last
}

var _ Providers = (*fakeProviders)(nil)

func newFakeProviders() *fakeProviders {
	return &fakeProviders{config: map[string]map[string]string{"openai": {}, "ollama": {}}}
}

// fakeSettings are the settings each fake provider has; true marks a secret.
var fakeSettings = map[string]map[string]bool{
	"openai": {"api_key": true, "base_url": false, "api": false},
	"ollama": {"base_url": false},
}

// status is the redacted status of provider id; f.mu is held.
func (f *fakeProviders) status(id string) hub.Status {
	st := hub.Status{ID: id, Name: map[string]string{"openai": "OpenAI", "ollama": "Ollama"}[id], State: "not_configured",
		Settings: []hub.Setting{}, Env: []string{strings.ToUpper(id) + "_API_KEY"}}
	cfg := f.config[id]
	for _, name := range slices.Sorted(maps.Keys(fakeSettings[id])) {
		s := hub.Setting{Name: name, Secret: fakeSettings[id][name], Value: cfg[name]}
		switch {
		case s.Value == "" && s.Secret:
			s.Value = "not set"
		case s.Value == "":
		case s.Secret && strings.HasPrefix(s.Value, "${"):
			s.Value, s.Source = "set", "config (env ref "+cfg[name]+")"
		case s.Secret:
			s.Value, s.Source = "set", "credentials file"
		default:
			s.Source = "config"
		}
		st.Settings = append(st.Settings, s)
	}
	if id == "ollama" || cfg["api_key"] != "" {
		st.State = "ready"
	}
	return st
}

func (f *fakeProviders) List(context.Context) []hub.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return []hub.Status{f.status("ollama"), f.status("openai")}
}

func (f *fakeProviders) Get(_ context.Context, id string) (hub.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.config[id]; !ok {
		return hub.Status{}, core.Errorf(core.ENOTFOUND, "no provider %q", id)
	}
	return f.status(id), nil
}

func (f *fakeProviders) Configure(_ context.Context, id string, in hub.ConfigInput) (hub.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inputs = append(f.inputs, in)
	cfg, ok := f.config[id]
	if !ok {
		return hub.Status{}, core.Errorf(core.ENOTFOUND, "no provider %q", id)
	}
	for name, v := range in.Settings {
		if _, ok := fakeSettings[id][name]; !ok {
			return hub.Status{}, core.Errorf(core.EINVALID, "provider %s has no setting %q", id, name)
		}
		if name == "api" && v != "" && v != "responses" && v != "chat" {
			return hub.Status{}, core.Errorf(core.EINVALID, "setting \"api\" must be responses or chat")
		}
	}
	for name, v := range in.Settings {
		if v == "" {
			delete(cfg, name)
		} else {
			cfg[name] = v
		}
	}
	f.lastOut = f.status(id)
	return f.lastOut, nil
}

func (f *fakeProviders) Reset(_ context.Context, id string) (hub.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.config[id]; !ok {
		return hub.Status{}, core.Errorf(core.ENOTFOUND, "no provider %q", id)
	}
	f.resets = append(f.resets, id)
	f.config[id] = map[string]string{}
	f.lastOut = f.status(id)
	return f.lastOut, nil
}

func (f *fakeProviders) Models(context.Context) hub.Models {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := hub.Models{Default: "ollama:llama3.2", Providers: []hub.Status{f.status("ollama"), f.status("openai")},
		Models: []hub.Model{{Ref: "ollama:llama3.2", Provider: "ollama", ID: "llama3.2", ContextSize: 131072}}}
	if f.config["openai"]["api_key"] != "" {
		m.Models = append(m.Models, hub.Model{Ref: "openai:gpt-4o", Provider: "openai", ID: "gpt-4o", Name: "GPT-4o", ContextSize: 128000})
	}
	return m
}

// setting returns the setting called name of st.
func setting(t *testing.T, st hub.Status, name string) hub.Setting {
	t.Helper()
	for _, s := range st.Settings {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("%s has no setting %q: %+v", st.ID, name, st.Settings)
	return hub.Setting{}
}

func TestProviderRoutes(t *testing.T) {
	fake := newFakeProviders()
	e := newEnv(t, Options{Providers: fake})

	var list struct{ Providers []hub.Status }
	e.call("GET", "/api/v1/providers", "", http.StatusOK, &list)
	if len(list.Providers) != 2 || list.Providers[0].ID != "ollama" || list.Providers[1].State != "not_configured" {
		t.Fatalf("list: %+v", list)
	}

	var st hub.Status
	e.call("GET", "/api/v1/providers/openai", "", http.StatusOK, &st)
	if st.Name != "OpenAI" || setting(t, st, "api_key").Value != "not set" || !slices.Equal(st.Env, []string{"OPENAI_API_KEY"}) {
		t.Fatalf("get: %+v", st)
	}

	e.call("PUT", "/api/v1/providers/openai", `{"settings":{"api_key":"${MY_KEY}","api":"responses"}}`, http.StatusOK, &st)
	if st.State != "ready" || setting(t, st, "api_key") != (hub.Setting{Name: "api_key", Secret: true, Value: "set", Source: "config (env ref ${MY_KEY})"}) ||
		setting(t, st, "api").Value != "responses" {
		t.Fatalf("configured: %+v", st)
	}
	if got := fake.inputs[len(fake.inputs)-1].Settings; !maps.Equal(got, map[string]string{"api_key": "${MY_KEY}", "api": "responses"}) {
		t.Fatalf("the hub got %v", got)
	}

	var models hub.Models
	e.call("GET", "/api/v1/models", "", http.StatusOK, &models)
	if models.Default != "ollama:llama3.2" || len(models.Models) != 2 || models.Models[1].Ref != "openai:gpt-4o" || len(models.Providers) != 2 {
		t.Fatalf("models: %+v", models)
	}

	// "" removes one setting; the others are the hub's to keep.
	e.call("PUT", "/api/v1/providers/openai", `{"settings":{"api":""}}`, http.StatusOK, &st)
	if setting(t, st, "api").Value != "" || st.State != "ready" {
		t.Fatalf("after removing api: %+v", st)
	}

	e.call("DELETE", "/api/v1/providers/openai", "", http.StatusOK, &st)
	if st.ID != "openai" || st.State != "not_configured" || setting(t, st, "api_key").Value != "not set" {
		t.Fatalf("reset: %+v", st)
	}
	if !slices.Equal(fake.resets, []string{"openai"}) {
		t.Fatalf("resets %v", fake.resets)
	}
	e.call("GET", "/api/v1/models", "", http.StatusOK, &models)
	if len(models.Models) != 1 {
		t.Fatalf("models after reset: %+v", models)
	}
}

// TestProviderResponsesCarryNoSecret: a literal secret sent to PUT never
// comes back; the answer is exactly the Status the hub returned.
func TestProviderResponsesCarryNoSecret(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	fake := newFakeProviders()
	e := newEnv(t, Options{Providers: fake})
	r := e.call("PUT", "/api/v1/providers/openai", `{"settings":{"api_key":"`+secret+`","base_url":"https://proxy.example.com/v1"}}`, http.StatusOK, nil)
	if got := fake.inputs[0].Settings["api_key"]; got != secret {
		t.Fatalf("the hub got api_key %q", got)
	}
	want, err := json.Marshal(fake.lastOut)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(r.body), want) {
		t.Fatalf("PUT answered\n%s\nnot what the hub returned\n%s", r.body, want)
	}
	bodies := [][]byte{r.body}
	for _, p := range []string{"/api/v1/providers", "/api/v1/providers/openai", "/api/v1/models"} {
		bodies = append(bodies, e.call("GET", p, "", http.StatusOK, nil).body)
	}
	// Errors after a secret was sent do not quote it either.
	bodies = append(bodies,
		e.wantError("PUT", "/api/v1/providers/openai", `{"settings":{"api_key":"`+secret+`","nope":"x"}}`, nil, 400, core.EINVALID).body,
		e.wantError("PUT", "/api/v1/providers/openai", `{"settings":{"api_key":"`+secret+`"},"x":1}`, nil, 400, codeInvalidJSON).body,
		e.wantError("PUT", "/api/v1/providers/openai", `{"settings":{"api_key":"`+secret+`",}}`, nil, 400, codeInvalidJSON).body,
		e.wantError("PUT", "/api/v1/providers/openai", `{"settings":{"`+secret+`":1}}`, nil, 400, codeInvalidJSON).body,
		e.call("DELETE", "/api/v1/providers/openai", "", http.StatusOK, nil).body,
	)
	for _, b := range bodies {
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("sk-live")) {
			t.Errorf("a response carries the secret: %s", b)
		}
	}
	if !bytes.Contains(bodies[1], []byte(`"credentials file"`)) {
		t.Errorf("list does not say where the key is from: %s", bodies[1])
	}
	if strings.Contains(e.logs.String(), secret) {
		t.Errorf("the logs carry the secret:\n%s", e.logs)
	}
}

func TestProviderErrors(t *testing.T) {
	fake := newFakeProviders()
	e := newEnv(t, Options{Providers: fake})
	for _, tt := range []struct {
		name, method, path, body string
		status                   int
		code, message            string
	}{
		{"get unknown", "GET", "/api/v1/providers/nope", "", 404, core.ENOTFOUND, `no provider "nope"`},
		{"configure unknown", "PUT", "/api/v1/providers/nope", `{"settings":{}}`, 404, core.ENOTFOUND, `no provider "nope"`},
		{"reset unknown", "DELETE", "/api/v1/providers/nope", "", 404, core.ENOTFOUND, ""},
		{"unknown setting", "PUT", "/api/v1/providers/openai", `{"settings":{"region":"eu"}}`, 400, core.EINVALID, `no setting "region"`},
		{"bad value", "PUT", "/api/v1/providers/openai", `{"settings":{"api":"soap"}}`, 400, core.EINVALID, `"api" must be responses or chat`},
		{"odd setting name", "PUT", "/api/v1/providers/openai", `{"settings":{"a b":"x"}}`, 400, core.EINVALID, `setting name "a b" is not valid`},
		{"empty setting name", "PUT", "/api/v1/providers/openai", `{"settings":{"":"x"}}`, 400, core.EINVALID, `setting name "" is not valid`},
		{"no settings", "PUT", "/api/v1/providers/openai", `{}`, 400, core.EINVALID, `field "settings" is required`},
		{"null settings", "PUT", "/api/v1/providers/openai", `{"settings":null}`, 400, core.EINVALID, `field "settings" is required`},
		{"settings not an object", "PUT", "/api/v1/providers/openai", `{"settings":["x"]}`, 400, codeInvalidJSON, `field "settings": expected object, got array`},
		{"value not a string", "PUT", "/api/v1/providers/openai", `{"settings":{"api":1}}`, 400, codeInvalidJSON, `expected string, got number`},
		{"unknown field", "PUT", "/api/v1/providers/openai", `{"settings":{},"api_key":"x"}`, 400, codeInvalidJSON, `unknown field "api_key"`},
		{"bad JSON", "PUT", "/api/v1/providers/openai", `{"settings":`, 400, codeInvalidJSON, ""},
		{"array", "PUT", "/api/v1/providers/openai", `[]`, 400, codeInvalidJSON, "must be a JSON object"},
		{"empty body", "PUT", "/api/v1/providers/openai", ``, 400, codeInvalidJSON, "empty"},
		{"trailing data", "PUT", "/api/v1/providers/openai", `{"settings":{}} {}`, 400, codeInvalidJSON, "unexpected data"},
		{"oversized", "PUT", "/api/v1/providers/openai", `{"settings":{"base_url":"` + strings.Repeat("a", maxBody) + `"}}`, 413, codeTooLarge, ""},
		{"POST providers", "POST", "/api/v1/providers", `{}`, 405, codeMethodNotAllowed, ""},
		{"POST provider", "POST", "/api/v1/providers/openai", `{}`, 405, codeMethodNotAllowed, ""},
		{"DELETE models", "DELETE", "/api/v1/models", "", 405, codeMethodNotAllowed, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.in(t).wantError(tt.method, tt.path, tt.body, nil, tt.status, tt.code)
			if !strings.Contains(r.errorMessage(), tt.message) {
				t.Errorf("message %q does not contain %q", r.errorMessage(), tt.message)
			}
		})
	}
	// Only the well-formed bodies reached the hub: unknown provider,
	// unknown setting and bad value.
	if len(fake.inputs) != 3 {
		t.Errorf("the hub saw %d inputs, want 3: %+v", len(fake.inputs), fake.inputs)
	}
	e.wantError("PUT", "/api/v1/providers/openai", `{"settings":{}}`, map[string]string{"Content-Type": "text/plain"},
		http.StatusUnsupportedMediaType, codeUnsupportedMedia)
}

// TestProvidersUnavailable: without a hub the routes exist and say so.
func TestProvidersUnavailable(t *testing.T) {
	e := newEnv(t, Options{})
	for _, rt := range [][2]string{
		{"GET", "/api/v1/providers"}, {"GET", "/api/v1/providers/openai"}, {"PUT", "/api/v1/providers/openai"},
		{"DELETE", "/api/v1/providers/openai"}, {"GET", "/api/v1/models"},
	} {
		r := e.wantError(rt[0], rt[1], `{"settings":{}}`, nil, http.StatusNotFound, core.ENOTFOUND)
		if msg := r.errorMessage(); msg != noProvidersMessage {
			t.Errorf("%s %s: message %q", rt[0], rt[1], msg)
		}
	}
}

// emptyProviders is a hub that answers nil lists.
type emptyProviders struct{ fakeProviders }

func (*emptyProviders) List(context.Context) []hub.Status { return nil }
func (*emptyProviders) Models(context.Context) hub.Models { return hub.Models{} }

// TestProvidersEmptyLists: nil lists are JSON arrays, as the spec says.
func TestProvidersEmptyLists(t *testing.T) {
	e := newEnv(t, Options{Providers: &emptyProviders{}})
	if r := e.call("GET", "/api/v1/providers", "", http.StatusOK, nil); string(bytes.TrimSpace(r.body)) != `{"providers":[]}` {
		t.Errorf("providers: %s", r.body)
	}
	if r := e.call("GET", "/api/v1/models", "", http.StatusOK, nil); string(bytes.TrimSpace(r.body)) != `{"models":[],"providers":[],"default":""}` {
		t.Errorf("models: %s", r.body)
	}
}

func TestProvidersNeedToken(t *testing.T) {
	token := strings.Repeat("t", 40)
	fake := newFakeProviders()
	e := newEnv(t, Options{Token: token, Providers: fake})
	for _, rt := range [][2]string{
		{"GET", "/api/v1/providers"}, {"GET", "/api/v1/providers/openai"}, {"PUT", "/api/v1/providers/openai"},
		{"DELETE", "/api/v1/providers/openai"}, {"GET", "/api/v1/models"},
	} {
		body := `{"settings":{"api_key":"sk-x"}}`
		e.wantError(rt[0], rt[1], body, map[string]string{"Authorization": ""}, http.StatusUnauthorized, codeUnauthorized)
		e.wantError(rt[0], rt[1], body, map[string]string{"Authorization": "Bearer wrong"}, http.StatusUnauthorized, codeUnauthorized)
	}
	if len(fake.inputs) != 0 || len(fake.resets) != 0 {
		t.Fatalf("unauthenticated requests reached the hub: %+v %+v", fake.inputs, fake.resets)
	}
	e.call("GET", "/api/v1/providers", "", http.StatusOK, nil)
}

// TestProviderJSON pins the wire names the spec documents: every field of
// the hub's types is in its schema.
func TestProviderJSON(t *testing.T) {
	schemas := loadSpec(t)["components"].(map[string]any)["schemas"].(map[string]any)
	st := hub.Status{ID: "x", Name: "X", State: "error", Error: "boom", Env: []string{"X_KEY"},
		Settings: []hub.Setting{{Name: "api_key", Secret: true, Value: "set", Source: "env X_KEY"}}}
	for schema, v := range map[string]any{
		"ProviderStatus":      st,
		"ProviderSetting":     st.Settings[0],
		"ProviderConfigInput": hub.ConfigInput{Settings: map[string]string{"api_key": "${X_KEY}"}},
		"Model":               hub.Model{Ref: "x:m", Provider: "x", ID: "m", Name: "M", ContextSize: 8},
		"Models":              hub.Models{Models: []hub.Model{{}}, Providers: []hub.Status{st}, Default: "x:m"},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		props := schemas[schema].(map[string]any)["properties"].(map[string]any)
		for k := range m {
			if _, ok := props[k]; !ok {
				t.Errorf("%T has field %q, which the %s schema does not document", v, k, schema)
			}
		}
		for k := range props {
			if _, ok := m[k]; !ok {
				t.Errorf("the %s schema documents %q, which %T does not have", schema, k, v)
			}
		}
	}
}
