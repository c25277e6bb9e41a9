package client

import (
	"context"
	"net/http"
	"slices"
	"testing"
)

func TestProviderRoutes(t *testing.T) {
	ctx := context.Background()
	const status = `{"id":"openai","name":"OpenAI","state":"ready","settings":[{"name":"api_key","secret":true,"value":"set","source":"env OPENAI_API_KEY"},{"name":"base_url","secret":false,"value":""}],"env":["OPENAI_API_KEY","OPENAI_BASE_URL"]}`
	tests := []struct {
		name, respond string
		call          func(c *Client) (any, error)
		method, path  string
		body          string
		check         func(t *testing.T, got any)
	}{
		{
			name: "Providers", respond: `{"providers":[` + status + `,{"id":"ollama","name":"Ollama","state":"error","error":"connection refused","settings":null,"env":null}]}`,
			call:   func(c *Client) (any, error) { return c.Providers(ctx) },
			method: "GET", path: "/api/v1/providers",
			check: func(t *testing.T, got any) {
				ps := got.([]*ProviderStatus)
				if len(ps) != 2 || ps[0].ID != "openai" || ps[0].State != ProviderReady || len(ps[0].Settings) != 2 ||
					ps[1].State != ProviderError || ps[1].Error != "connection refused" {
					t.Errorf("providers = %+v", ps)
				}
			},
		},
		{
			name: "Provider", respond: status,
			call:   func(c *Client) (any, error) { return c.Provider(ctx, "openai") },
			method: "GET", path: "/api/v1/providers/openai",
			check: func(t *testing.T, got any) {
				p := got.(*ProviderStatus)
				if p.Settings[0] != (ProviderSetting{Name: "api_key", Secret: true, Value: "set", Source: "env OPENAI_API_KEY"}) ||
					!slices.Equal(p.Env, []string{"OPENAI_API_KEY", "OPENAI_BASE_URL"}) {
					t.Errorf("provider = %+v", p)
				}
			},
		},
		{
			name: "ProviderEscapes", respond: status,
			call:   func(c *Client) (any, error) { return c.Provider(ctx, "a/b") },
			method: "GET", path: "/api/v1/providers/a%2Fb",
		},
		{
			name: "ConfigureProvider", respond: status,
			call: func(c *Client) (any, error) {
				return c.ConfigureProvider(ctx, "openai", ProviderConfig{Settings: map[string]string{"api_key": "${MY_KEY}", "api": "responses"}})
			},
			method: "PUT", path: "/api/v1/providers/openai", body: `{"settings":{"api":"responses","api_key":"${MY_KEY}"}}`,
			check: func(t *testing.T, got any) {
				if p := got.(*ProviderStatus); p.ID != "openai" || p.State != ProviderReady {
					t.Errorf("configured = %+v", p)
				}
			},
		},
		{
			name: "ConfigureProviderNothing", respond: status,
			call:   func(c *Client) (any, error) { return c.ConfigureProvider(ctx, "openai", ProviderConfig{}) },
			method: "PUT", path: "/api/v1/providers/openai", body: `{"settings":{}}`,
		},
		{
			name: "ResetProvider", respond: status,
			call:   func(c *Client) (any, error) { return c.ResetProvider(ctx, "openai") },
			method: "DELETE", path: "/api/v1/providers/openai",
		},
		{
			name: "Models", respond: `{"models":[{"ref":"openai:gpt-4o","provider":"openai","id":"gpt-4o","name":"GPT-4o","context_size":128000}],"providers":[` + status + `],"default":"openai:gpt-4o"}`,
			call:   func(c *Client) (any, error) { return c.Models(ctx) },
			method: "GET", path: "/api/v1/models",
			check: func(t *testing.T, got any) {
				m := got.(*Models)
				if m.Default != "openai:gpt-4o" || len(m.Models) != 1 || m.Models[0].ContextSize != 128000 || len(m.Providers) != 1 {
					t.Errorf("models = %+v", m)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, reqs := fakeAPI(t, http.StatusOK, tt.respond)
			got, err := tt.call(c)
			if err != nil {
				t.Fatal(err)
			}
			if len(*reqs) != 1 {
				t.Fatalf("%d requests", len(*reqs))
			}
			r := (*reqs)[0]
			if r.method != tt.method || r.path != tt.path || r.body != tt.body {
				t.Errorf("request %s %s %q, want %s %s %q", r.method, r.path, r.body, tt.method, tt.path, tt.body)
			}
			if tt.body != "" && r.header.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type %q", r.header.Get("Content-Type"))
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

func TestProviderErrors(t *testing.T) {
	ctx := context.Background()
	c, _ := fakeAPI(t, http.StatusBadRequest, `{"error":{"code":"invalid","message":"provider openai has no setting \"region\""}}`)
	_, err := c.ConfigureProvider(ctx, "openai", ProviderConfig{Settings: map[string]string{"region": "eu"}})
	if !IsInvalid(err) || err.Error() != `provider openai has no setting "region"` {
		t.Fatalf("unknown setting: %v", err)
	}
	c, _ = fakeAPI(t, http.StatusNotFound, `{"error":{"code":"not_found","message":"providers are not available on this server"}}`)
	if _, err := c.Models(ctx); !IsNotFound(err) || err.Error() != "providers are not available on this server" {
		t.Fatalf("no providers: %v", err)
	}
	c, reqs := fakeAPI(t, http.StatusOK, `{}`)
	for name, call := range map[string]func() error{
		"Provider":          func() error { _, err := c.Provider(ctx, ""); return err },
		"ConfigureProvider": func() error { _, err := c.ConfigureProvider(ctx, "", ProviderConfig{}); return err },
		"ResetProvider":     func() error { _, err := c.ResetProvider(ctx, ""); return err },
	} {
		if err := call(); err == nil {
			t.Errorf("%s with an empty id succeeded", name)
		}
	}
	if len(*reqs) != 0 {
		t.Errorf("empty ids sent %d requests", len(*reqs))
	}
}
