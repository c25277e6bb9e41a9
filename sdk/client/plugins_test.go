package client

import (
	"context"
	"net/http"
	"slices"
	"testing"
)

func TestPluginRoutes(t *testing.T) {
	ctx := context.Background()
	const info = `{"id":"weather","version":"1.0.0","runtime":"wasm","provides":["toolset"],"enabled":true,"status":"enabled","tools":["weather.now"],"permissions":["connect to api.example.com:443"],"sha256":"ab"}`
	tests := []struct {
		name, respond string
		call          func(c *Client) (any, error)
		method, path  string
		body          string
		check         func(t *testing.T, got any)
	}{
		{
			name: "Plugins", respond: `{"plugins":[` + info + `,{"id":"z","builtin":true,"status":"failed","error":"boom"}]}`,
			call:   func(c *Client) (any, error) { return c.Plugins(ctx) },
			method: "GET", path: "/api/v1/plugins",
			check: func(t *testing.T, got any) {
				ps := got.([]*PluginInfo)
				if len(ps) != 2 || ps[0].ID != "weather" || !slices.Equal(ps[0].Tools, []string{"weather.now"}) ||
					!ps[1].Builtin || ps[1].Status != PluginFailed || ps[1].Error != "boom" {
					t.Errorf("plugins = %+v", ps)
				}
			},
		},
		{
			name: "Plugin", respond: info,
			call:   func(c *Client) (any, error) { return c.Plugin(ctx, "weather") },
			method: "GET", path: "/api/v1/plugins/weather",
			check: func(t *testing.T, got any) {
				if p := got.(*PluginInfo); p.Status != PluginEnabled || p.Runtime != "wasm" || !p.Enabled {
					t.Errorf("plugin = %+v", p)
				}
			},
		},
		{
			name: "PluginEscapes", respond: info,
			call:   func(c *Client) (any, error) { return c.Plugin(ctx, "a/b") },
			method: "GET", path: "/api/v1/plugins/a%2Fb",
		},
		{
			name: "PreviewPlugin", respond: `{"id":"weather","version":"1.0.0","sha256":"ab","permissions":["x"],"installed":"0.9.0"}`,
			call:   func(c *Client) (any, error) { return c.PreviewPlugin(ctx, "/srv/weather") },
			method: "POST", path: "/api/v1/plugins/preview", body: `{"path":"/srv/weather"}`,
			check: func(t *testing.T, got any) {
				if p := got.(*PluginPreview); p.ID != "weather" || p.SHA256 != "ab" || p.Installed != "0.9.0" {
					t.Errorf("preview = %+v", p)
				}
			},
		},
		{
			name: "InstallPlugin", respond: info,
			call: func(c *Client) (any, error) {
				return c.InstallPlugin(ctx, InstallPluginRequest{Path: "/srv/weather", Consent: true, SHA256: "ab"})
			},
			method: "POST", path: "/api/v1/plugins", body: `{"path":"/srv/weather","consent":true,"sha256":"ab"}`,
		},
		{
			name: "InstallPluginDisabled", respond: info,
			call: func(c *Client) (any, error) {
				return c.InstallPlugin(ctx, InstallPluginRequest{Path: "/srv/weather", Consent: true, Disabled: true})
			},
			method: "POST", path: "/api/v1/plugins", body: `{"path":"/srv/weather","consent":true,"disabled":true}`,
		},
		{
			name: "EnablePlugin", respond: info,
			call:   func(c *Client) (any, error) { return c.EnablePlugin(ctx, "weather") },
			method: "POST", path: "/api/v1/plugins/weather/enable",
		},
		{
			name: "DisablePlugin", respond: info,
			call:   func(c *Client) (any, error) { return c.DisablePlugin(ctx, "weather") },
			method: "POST", path: "/api/v1/plugins/weather/disable",
		},
		{
			name: "InstallPluginDowngrade", respond: info,
			call: func(c *Client) (any, error) {
				return c.InstallPlugin(ctx, InstallPluginRequest{Path: "/srv/weather", Consent: true, AllowDowngrade: true})
			},
			method: "POST", path: "/api/v1/plugins",
			body: `{"path":"/srv/weather","consent":true,"allow_downgrade":true}`,
		},
		{
			name: "RollbackPlugin", respond: `{"id":"weather","version":"0.9.0","previous":"1.0.0","status":"enabled"}`,
			call:   func(c *Client) (any, error) { return c.RollbackPlugin(ctx, "weather") },
			method: "POST", path: "/api/v1/plugins/weather/rollback",
			check: func(t *testing.T, got any) {
				if p := got.(*PluginInfo); p.Version != "0.9.0" || p.Previous != "1.0.0" {
					t.Errorf("rolled back = %+v", p)
				}
			},
		},
		{
			name: "PinPlugin", respond: `{"id":"weather","version":"1.0.0","pinned":"1.0.0"}`,
			call:   func(c *Client) (any, error) { return c.PinPlugin(ctx, "weather", "1.0.0") },
			method: "POST", path: "/api/v1/plugins/weather/pin", body: `{"version":"1.0.0"}`,
			check: func(t *testing.T, got any) {
				if p := got.(*PluginInfo); p.Pinned != "1.0.0" {
					t.Errorf("pinned = %+v", p)
				}
			},
		},
		{
			name: "UnpinPlugin", respond: info,
			call:   func(c *Client) (any, error) { return c.UnpinPlugin(ctx, "weather") },
			method: "DELETE", path: "/api/v1/plugins/weather/pin",
		},
		{
			name: "PreviewPluginUpgrade", respond: `{"id":"weather","version":"0.9.0","installed":"1.0.0","downgrade":true,"changes":{"added":[],"removed":["a"],"changed":["kiln-plugin.json"],"summary":"1 file changed, 1 removed"}}`,
			call:   func(c *Client) (any, error) { return c.PreviewPlugin(ctx, "/srv/weather") },
			method: "POST", path: "/api/v1/plugins/preview", body: `{"path":"/srv/weather"}`,
			check: func(t *testing.T, got any) {
				if p := got.(*PluginPreview); !p.Downgrade || p.Changes == nil || p.Changes.Summary != "1 file changed, 1 removed" || !slices.Equal(p.Changes.Removed, []string{"a"}) {
					t.Errorf("preview = %+v", p)
				}
			},
		},
		{
			name:   "RemovePlugin",
			call:   func(c *Client) (any, error) { return nil, c.RemovePlugin(ctx, "weather") },
			method: "DELETE", path: "/api/v1/plugins/weather",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status := http.StatusOK
			if tt.respond == "" {
				status = http.StatusNoContent
			}
			c, reqs := fakeAPI(t, status, tt.respond)
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
			if r.header.Get("Authorization") != "Bearer s3cret" {
				t.Errorf("Authorization %q", r.header.Get("Authorization"))
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

func TestPluginErrors(t *testing.T) {
	ctx := context.Background()
	c, _ := fakeAPI(t, http.StatusServiceUnavailable, `{"error":{"code":"unavailable","message":"plugin broken is installed but failed to start: exit status 1"}}`)
	_, err := c.InstallPlugin(ctx, InstallPluginRequest{Path: "/srv/broken", Consent: true})
	if !IsUnavailable(err) || err.Error() != "plugin broken is installed but failed to start: exit status 1" {
		t.Fatalf("install of a failing plugin: %v", err)
	}
	c, _ = fakeAPI(t, http.StatusConflict, `{"error":{"code":"conflict","message":"installed already"}}`)
	if _, err := c.InstallPlugin(ctx, InstallPluginRequest{Path: "/p", Consent: true}); !IsConflict(err) {
		t.Fatalf("conflict: %v", err)
	}
	c, _ = fakeAPI(t, http.StatusNotFound, `{"error":{"code":"not_found","message":"plugins are not available on this server"}}`)
	if _, err := c.Plugins(ctx); !IsNotFound(err) || err.Error() != "plugins are not available on this server" {
		t.Fatalf("no plugins: %v", err)
	}
	c, reqs := fakeAPI(t, http.StatusOK, `{}`)
	for name, call := range map[string]func() error{
		"Plugin":         func() error { _, err := c.Plugin(ctx, ""); return err },
		"EnablePlugin":   func() error { _, err := c.EnablePlugin(ctx, ""); return err },
		"DisablePlugin":  func() error { _, err := c.DisablePlugin(ctx, ""); return err },
		"RollbackPlugin": func() error { _, err := c.RollbackPlugin(ctx, ""); return err },
		"PinPlugin":      func() error { _, err := c.PinPlugin(ctx, "", "1.0.0"); return err },
		"UnpinPlugin":    func() error { _, err := c.UnpinPlugin(ctx, ""); return err },
		"RemovePlugin":   func() error { return c.RemovePlugin(ctx, "") },
	} {
		if err := call(); err == nil {
			t.Errorf("%s with an empty id succeeded", name)
		}
	}
	if len(*reqs) != 0 {
		t.Errorf("empty ids sent %d requests", len(*reqs))
	}
}
