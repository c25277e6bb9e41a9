package web

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/pluginapi"
	"github.com/kilnhq/kiln/plugins/registry"
)

// fakePlugins is a Plugins in memory. Folders under /plugins/<id> preview
// and install as plugin <id> version 1.0.0; the folder /plugins/broken
// installs but fails to start, /plugins/bad has an invalid manifest.
type fakePlugins struct {
	mu        sync.Mutex
	installed map[string]registry.Info
	installs  []registry.InstallRequest // every Install request
	previews  []string                  // every previewed path
}

var _ Plugins = (*fakePlugins)(nil)

const fakeSHA = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func newFakePlugins() *fakePlugins {
	return &fakePlugins{installed: map[string]registry.Info{
		"builtin-tools": {ID: "builtin-tools", Version: "0.1.0", Description: "Built-in tools.", Builtin: true, Enabled: true,
			Status: registry.StatusEnabled, Tools: []string{"builtin-tools.echo"}, Permissions: []string{"none"}},
	}}
}

func (f *fakePlugins) List(context.Context) []registry.Info {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []registry.Info
	for _, in := range f.installed {
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b registry.Info) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (f *fakePlugins) Get(_ context.Context, id string) (registry.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.installed[id]
	if !ok {
		return registry.Info{}, core.Errorf(core.ENOTFOUND, "plugin %q is not installed", id)
	}
	return in, nil
}

func (f *fakePlugins) Preview(_ context.Context, path string) (registry.Preview, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.previews = append(f.previews, path)
	id, ok := strings.CutPrefix(path, "/plugins/")
	if !ok || id == "bad" {
		return registry.Preview{}, core.Errorf(core.EINVALID, "%s/kiln-plugin.json: invalid plugin manifest: version: is missing", path)
	}
	return registry.Preview{ID: id, Version: "1.0.0", Description: "Plugin " + id + ".", Runtime: "wasm",
		Provides: []string{"toolset"}, SHA256: fakeSHA, Permissions: []string{"connect to api.example.com:443"},
		Installed: f.installed[id].Version}, nil
}

func (f *fakePlugins) Install(ctx context.Context, req registry.InstallRequest) (registry.Info, error) {
	pv, err := f.Preview(ctx, req.Path)
	if err != nil {
		return registry.Info{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.installs = append(f.installs, req)
	switch {
	case !req.Consent:
		return registry.Info{}, core.Errorf(core.EINVALID, "plugin %s needs consent to its permissions before it is installed", pv.ID)
	case req.SHA256 != "" && req.SHA256 != pv.SHA256:
		return registry.Info{}, core.Errorf(core.EINVALID, "sha256 mismatch")
	case f.installed[pv.ID].Version == pv.Version:
		return registry.Info{}, core.Errorf(core.ECONFLICT, "plugin %s %s is installed already", pv.ID, pv.Version)
	}
	in := registry.Info{ID: pv.ID, Version: pv.Version, Description: pv.Description, Runtime: pv.Runtime, Provides: pv.Provides,
		Enabled: !req.Disabled, Status: registry.StatusEnabled, Tools: []string{pv.ID + ".run"}, Permissions: pv.Permissions,
		SHA256: pv.SHA256, Dir: "/data/plugins/" + pv.ID + "/1.0.0", Source: req.Source}
	if req.Disabled {
		in.Status = registry.StatusDisabled
	}
	if pv.ID == "broken" && !req.Disabled {
		in.Status, in.Error = registry.StatusFailed, "start: exit status 1"
		f.installed[in.ID] = in
		return in, core.Errorf(core.EUNAVAIL, "plugin broken is installed but failed to start: exit status 1")
	}
	f.installed[in.ID] = in
	return in, nil
}

func (f *fakePlugins) setEnabled(id string, on bool) (registry.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.installed[id]
	if !ok {
		return registry.Info{}, core.Errorf(core.ENOTFOUND, "plugin %q is not installed", id)
	}
	in.Enabled, in.Status, in.Error = on, registry.StatusDisabled, ""
	if on {
		in.Status = registry.StatusEnabled
	}
	if on && id == "broken" {
		in.Status, in.Error = registry.StatusFailed, "start: exit status 1"
		f.installed[id] = in
		return in, core.Errorf(core.EUNAVAIL, "plugin broken failed to start: exit status 1")
	}
	f.installed[id] = in
	return in, nil
}

func (f *fakePlugins) Enable(_ context.Context, id string) (registry.Info, error) {
	return f.setEnabled(id, true)
}

func (f *fakePlugins) Disable(_ context.Context, id string) (registry.Info, error) {
	return f.setEnabled(id, false)
}

// Rollback swaps a plugin's version and previous version.
func (f *fakePlugins) Rollback(_ context.Context, id string) (registry.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.installed[id]
	switch {
	case !ok:
		return registry.Info{}, core.Errorf(core.ENOTFOUND, "plugin %q is not installed", id)
	case in.Previous == "":
		return registry.Info{}, core.Errorf(core.ECONFLICT, "plugin %s %s has no previous version to roll back to", id, in.Version)
	}
	in.Version, in.Previous = in.Previous, in.Version
	f.installed[id] = in
	return in, nil
}

// Pin pins a plugin at its installed version.
func (f *fakePlugins) Pin(_ context.Context, id, version string) (registry.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.installed[id]
	switch {
	case !ok:
		return registry.Info{}, core.Errorf(core.ENOTFOUND, "plugin %q is not installed", id)
	case version != "" && version != in.Version:
		return registry.Info{}, core.Errorf(core.ECONFLICT, "plugin %s is at %s, not %s", id, in.Version, version)
	}
	in.Pinned = version
	f.installed[id] = in
	return in, nil
}

func (f *fakePlugins) Remove(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.installed[id]
	switch {
	case !ok:
		return core.Errorf(core.ENOTFOUND, "plugin %q is not installed", id)
	case in.Builtin:
		return core.Errorf(core.EINVALID, "plugin %s is built in: disable it instead", id)
	}
	delete(f.installed, id)
	return nil
}

func TestPluginRoutes(t *testing.T) {
	fake := newFakePlugins()
	e := newEnv(t, Options{Plugins: fake})

	var list struct{ Plugins []registry.Info }
	e.call("GET", "/api/v1/plugins", "", http.StatusOK, &list)
	if len(list.Plugins) != 1 || list.Plugins[0].ID != "builtin-tools" || !list.Plugins[0].Builtin {
		t.Fatalf("list: %+v", list)
	}

	var pv registry.Preview
	e.call("POST", "/api/v1/plugins/preview", `{"path":"/plugins/weather"}`, http.StatusOK, &pv)
	if pv.ID != "weather" || pv.SHA256 != fakeSHA || len(pv.Permissions) != 1 || pv.Runtime != "wasm" {
		t.Fatalf("preview: %+v", pv)
	}

	var in registry.Info
	e.call("POST", "/api/v1/plugins", `{"path":"/plugins/weather","consent":true,"sha256":"`+fakeSHA+`"}`, http.StatusCreated, &in)
	if in.ID != "weather" || in.Status != registry.StatusEnabled || !slices.Equal(in.Tools, []string{"weather.run"}) {
		t.Fatalf("installed: %+v", in)
	}
	if got := fake.installs[len(fake.installs)-1]; !reflect.DeepEqual(got, registry.InstallRequest{Path: "/plugins/weather", Consent: true, SHA256: fakeSHA}) {
		t.Fatalf("install request reached the registry as %+v", got)
	}
	e.call("POST", "/api/v1/plugins", `{"path":"/plugins/quiet","consent":true,"disabled":true}`, http.StatusCreated, &in)
	if in.Status != registry.StatusDisabled || in.Enabled {
		t.Fatalf("installed disabled: %+v", in)
	}

	e.call("GET", "/api/v1/plugins/weather", "", http.StatusOK, &in)
	if in.ID != "weather" || in.Dir == "" {
		t.Fatalf("get: %+v", in)
	}
	e.call("POST", "/api/v1/plugins/weather/disable", "", http.StatusOK, &in)
	if in.Status != registry.StatusDisabled || in.Enabled {
		t.Fatalf("disabled: %+v", in)
	}
	e.call("POST", "/api/v1/plugins/weather/enable", "", http.StatusOK, &in)
	if in.Status != registry.StatusEnabled || !in.Enabled {
		t.Fatalf("enabled: %+v", in)
	}

	e.call("GET", "/api/v1/plugins", "", http.StatusOK, &list)
	var ids []string
	for _, p := range list.Plugins {
		ids = append(ids, p.ID)
	}
	if !slices.Equal(ids, []string{"builtin-tools", "quiet", "weather"}) {
		t.Fatalf("list after installs: %v", ids)
	}

	r := e.call("DELETE", "/api/v1/plugins/weather", "", http.StatusNoContent, nil)
	if len(r.body) != 0 {
		t.Fatalf("DELETE body %q", r.body)
	}
	e.wantError("GET", "/api/v1/plugins/weather", "", nil, http.StatusNotFound, core.ENOTFOUND)

	// A plugin may be called "preview": only POST /plugins/preview is the preview.
	e.call("POST", "/api/v1/plugins", `{"path":"/plugins/preview","consent":true}`, http.StatusCreated, &in)
	e.call("GET", "/api/v1/plugins/preview", "", http.StatusOK, &in)
	if in.ID != "preview" {
		t.Fatalf("GET /plugins/preview: %+v", in)
	}
	e.call("POST", "/api/v1/plugins/preview/disable", "", http.StatusOK, &in)
	if in.ID != "preview" || in.Status != registry.StatusDisabled {
		t.Fatalf("disable the plugin called preview: %+v", in)
	}
	e.call("DELETE", "/api/v1/plugins/preview", "", http.StatusNoContent, nil)
}

func TestPluginErrors(t *testing.T) {
	fake := newFakePlugins()
	e := newEnv(t, Options{Plugins: fake})
	e.call("POST", "/api/v1/plugins", `{"path":"/plugins/weather","consent":true}`, http.StatusCreated, nil)

	for _, tt := range []struct {
		name, method, path, body string
		status                   int
		code, message            string
	}{
		{"get missing", "GET", "/api/v1/plugins/nope", "", 404, core.ENOTFOUND, `plugin "nope" is not installed`},
		{"enable missing", "POST", "/api/v1/plugins/nope/enable", "", 404, core.ENOTFOUND, ""},
		{"disable missing", "POST", "/api/v1/plugins/nope/disable", "", 404, core.ENOTFOUND, ""},
		{"remove missing", "DELETE", "/api/v1/plugins/nope", "", 404, core.ENOTFOUND, ""},
		{"remove built-in", "DELETE", "/api/v1/plugins/builtin-tools", "", 400, core.EINVALID, "built in"},
		{"install twice", "POST", "/api/v1/plugins", `{"path":"/plugins/weather","consent":true}`, 409, core.ECONFLICT, "installed already"},
		{"install without consent", "POST", "/api/v1/plugins", `{"path":"/plugins/other"}`, 400, core.EINVALID, "needs consent"},
		{"install bad manifest", "POST", "/api/v1/plugins", `{"path":"/plugins/bad","consent":true}`, 400, core.EINVALID, "invalid plugin manifest"},
		{"install relative path", "POST", "/api/v1/plugins", `{"path":"plugins/other","consent":true}`, 400, core.EINVALID, "absolute path"},
		{"install no path", "POST", "/api/v1/plugins", `{"consent":true}`, 400, core.EINVALID, `field "path" is required`},
		{"install bad sha256", "POST", "/api/v1/plugins", `{"path":"/plugins/other","consent":true,"sha256":"ABC"}`, 400, core.EINVALID, "64 lowercase hexadecimal"},
		{"install unknown field", "POST", "/api/v1/plugins", `{"path":"/plugins/other","consent":true,"force":true}`, 400, codeInvalidJSON, `unknown field "force"`},
		{"install wrong type", "POST", "/api/v1/plugins", `{"path":"/plugins/other","consent":"yes"}`, 400, codeInvalidJSON, `field "consent": expected boolean, got string`},
		{"install bad JSON", "POST", "/api/v1/plugins", `{"path":`, 400, codeInvalidJSON, ""},
		{"install array", "POST", "/api/v1/plugins", `[]`, 400, codeInvalidJSON, "must be a JSON object"},
		{"install empty body", "POST", "/api/v1/plugins", ``, 400, codeInvalidJSON, "empty"},
		{"install trailing data", "POST", "/api/v1/plugins", `{"path":"/plugins/x","consent":true} {}`, 400, codeInvalidJSON, "unexpected data"},
		{"install oversized", "POST", "/api/v1/plugins", `{"path":"/` + strings.Repeat("a", maxBody) + `","consent":true}`, 413, codeTooLarge, ""},
		{"preview bad manifest", "POST", "/api/v1/plugins/preview", `{"path":"/plugins/bad"}`, 400, core.EINVALID, "version: is missing"},
		{"preview relative path", "POST", "/api/v1/plugins/preview", `{"path":"."}`, 400, core.EINVALID, "absolute path"},
		{"preview unknown field", "POST", "/api/v1/plugins/preview", `{"path":"/plugins/x","sha256":""}`, 400, codeInvalidJSON, `unknown field "sha256"`},
		{"preview empty body", "POST", "/api/v1/plugins/preview", ``, 400, codeInvalidJSON, ""},
		{"preview oversized", "POST", "/api/v1/plugins/preview", `{"path":"/` + strings.Repeat("a", maxBody) + `"}`, 413, codeTooLarge, ""},
		{"method not allowed", "PUT", "/api/v1/plugins/weather", `{}`, 405, codeMethodNotAllowed, ""},
		{"GET on enable", "GET", "/api/v1/plugins/weather/enable", "", 405, codeMethodNotAllowed, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.in(t).wantError(tt.method, tt.path, tt.body, nil, tt.status, tt.code)
			if !strings.Contains(r.errorMessage(), tt.message) {
				t.Errorf("message %q does not contain %q", r.errorMessage(), tt.message)
			}
		})
	}
	if len(fake.installs) != 3 { // weather, twice, and without consent; bad manifest fails in preview
		t.Errorf("the registry saw %d install requests, want 3: %+v", len(fake.installs), fake.installs)
	}

	e.wantError("POST", "/api/v1/plugins", `{"path":"/plugins/other","consent":true}`, map[string]string{"Content-Type": "text/plain"},
		http.StatusUnsupportedMediaType, codeUnsupportedMedia)
}

// TestPluginFailsToStart: a plugin that installs or enables but does not
// start is a 503 with the reason, and lists as failed.
func TestPluginFailsToStart(t *testing.T) {
	e := newEnv(t, Options{Plugins: newFakePlugins()})
	r := e.wantError("POST", "/api/v1/plugins", `{"path":"/plugins/broken","consent":true}`, nil, http.StatusServiceUnavailable, core.EUNAVAIL)
	if msg := r.errorMessage(); !strings.Contains(msg, "failed to start: exit status 1") {
		t.Fatalf("install message %q", msg)
	}
	var in registry.Info
	e.call("GET", "/api/v1/plugins/broken", "", http.StatusOK, &in)
	if in.Status != registry.StatusFailed || in.Error == "" {
		t.Fatalf("broken plugin after install: %+v", in)
	}
	e.call("POST", "/api/v1/plugins/broken/disable", "", http.StatusOK, &in)
	r = e.wantError("POST", "/api/v1/plugins/broken/enable", "", nil, http.StatusServiceUnavailable, core.EUNAVAIL)
	if msg := r.errorMessage(); !strings.Contains(msg, "failed to start") {
		t.Fatalf("enable message %q", msg)
	}
	var list struct{ Plugins []registry.Info }
	e.call("GET", "/api/v1/plugins", "", http.StatusOK, &list)
	if i := slices.IndexFunc(list.Plugins, func(p registry.Info) bool { return p.ID == "broken" }); i < 0 || list.Plugins[i].Status != registry.StatusFailed {
		t.Fatalf("list: %+v", list.Plugins)
	}
}

// TestPluginsUnavailable: without a registry the routes exist and say so.
func TestPluginsUnavailable(t *testing.T) {
	e := newEnv(t, Options{})
	for _, rt := range [][2]string{
		{"GET", "/api/v1/plugins"}, {"POST", "/api/v1/plugins"}, {"POST", "/api/v1/plugins/preview"},
		{"GET", "/api/v1/plugins/x"}, {"DELETE", "/api/v1/plugins/x"},
		{"POST", "/api/v1/plugins/x/enable"}, {"POST", "/api/v1/plugins/x/disable"},
		{"POST", "/api/v1/plugins/x/rollback"}, {"POST", "/api/v1/plugins/x/pin"}, {"DELETE", "/api/v1/plugins/x/pin"},
	} {
		r := e.wantError(rt[0], rt[1], `{"path":"/x","consent":true}`, nil, http.StatusNotFound, core.ENOTFOUND)
		if msg := r.errorMessage(); msg != noPluginsMessage {
			t.Errorf("%s %s: message %q", rt[0], rt[1], msg)
		}
	}
}

func TestPluginsNeedToken(t *testing.T) {
	token := strings.Repeat("t", 40)
	fake := newFakePlugins()
	e := newEnv(t, Options{Token: token, Plugins: fake})
	noToken := map[string]string{"Authorization": ""}
	for _, rt := range [][2]string{
		{"GET", "/api/v1/plugins"}, {"POST", "/api/v1/plugins"}, {"POST", "/api/v1/plugins/preview"},
		{"GET", "/api/v1/plugins/builtin-tools"}, {"DELETE", "/api/v1/plugins/builtin-tools"},
		{"POST", "/api/v1/plugins/builtin-tools/enable"}, {"POST", "/api/v1/plugins/builtin-tools/disable"},
		{"POST", "/api/v1/plugins/builtin-tools/rollback"}, {"POST", "/api/v1/plugins/builtin-tools/pin"}, {"DELETE", "/api/v1/plugins/builtin-tools/pin"},
	} {
		e.wantError(rt[0], rt[1], `{"path":"/plugins/weather","consent":true}`, noToken, http.StatusUnauthorized, codeUnauthorized)
		e.wantError(rt[0], rt[1], `{"path":"/plugins/weather","consent":true}`, map[string]string{"Authorization": "Bearer wrong"},
			http.StatusUnauthorized, codeUnauthorized)
	}
	if len(fake.installs) != 0 || len(fake.previews) != 0 {
		t.Fatalf("unauthenticated requests reached the registry: %+v %+v", fake.installs, fake.previews)
	}
	e.call("GET", "/api/v1/plugins", "", http.StatusOK, nil)
}

// TestPluginRollbackAndPin: the rollback and pin routes reach the
// registry and answer with the plugin; an install passes allow_downgrade
// on and refuses a source.
func TestPluginRollbackAndPin(t *testing.T) {
	fake := newFakePlugins()
	e := newEnv(t, Options{Plugins: fake})
	var in registry.Info
	e.call("POST", "/api/v1/plugins", `{"path":"/plugins/weather","consent":true,"allow_downgrade":true}`, http.StatusCreated, &in)
	want := registry.InstallRequest{Path: "/plugins/weather", Consent: true, AllowDowngrade: true}
	if got := fake.installs[len(fake.installs)-1]; !reflect.DeepEqual(got, want) {
		t.Fatalf("install request reached the registry as %+v, want %+v", got, want)
	}
	e.wantError("POST", "/api/v1/plugins/weather/rollback", "", nil, http.StatusConflict, core.ECONFLICT)
	fake.mu.Lock()
	w := fake.installed["weather"]
	w.Previous = "0.9.0"
	fake.installed["weather"] = w
	fake.mu.Unlock()
	e.call("POST", "/api/v1/plugins/weather/rollback", "", http.StatusOK, &in)
	if in.Version != "0.9.0" || in.Previous != "1.0.0" {
		t.Fatalf("rolled back: %+v", in)
	}

	e.call("POST", "/api/v1/plugins/weather/pin", `{"version":"0.9.0"}`, http.StatusOK, &in)
	if in.Pinned != "0.9.0" {
		t.Fatalf("pinned: %+v", in)
	}
	e.call("DELETE", "/api/v1/plugins/weather/pin", "", http.StatusOK, &in)
	if in.Pinned != "" {
		t.Fatalf("unpinned: %+v", in)
	}
	for _, tt := range []struct {
		name, method, path, body string
		status                   int
		code, message            string
	}{
		{"pin another version", "POST", "/api/v1/plugins/weather/pin", `{"version":"1.0.0"}`, 409, core.ECONFLICT, "not 1.0.0"},
		{"pin without version", "POST", "/api/v1/plugins/weather/pin", `{}`, 400, core.EINVALID, `field "version" is required`},
		{"pin empty body", "POST", "/api/v1/plugins/weather/pin", ``, 400, codeInvalidJSON, "empty"},
		{"pin unknown field", "POST", "/api/v1/plugins/weather/pin", `{"version":"1.0.0","force":true}`, 400, codeInvalidJSON, `unknown field "force"`},
		{"pin missing", "POST", "/api/v1/plugins/nope/pin", `{"version":"1.0.0"}`, 404, core.ENOTFOUND, "not installed"},
		{"unpin missing", "DELETE", "/api/v1/plugins/nope/pin", "", 404, core.ENOTFOUND, "not installed"},
		{"rollback missing", "POST", "/api/v1/plugins/nope/rollback", "", 404, core.ENOTFOUND, "not installed"},
		{"GET on rollback", "GET", "/api/v1/plugins/weather/rollback", "", 405, codeMethodNotAllowed, ""},
		{"source from the API", "POST", "/api/v1/plugins", `{"path":"/plugins/x","consent":true,"source":{"marketplace":"m"}}`, 400, codeInvalidJSON, `unknown field "source"`},
		{"allow_downgrade wrong type", "POST", "/api/v1/plugins", `{"path":"/plugins/x","consent":true,"allow_downgrade":"yes"}`, 400, codeInvalidJSON, "expected boolean"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.in(t).wantError(tt.method, tt.path, tt.body, nil, tt.status, tt.code)
			if !strings.Contains(r.errorMessage(), tt.message) {
				t.Errorf("message %q does not contain %q", r.errorMessage(), tt.message)
			}
		})
	}
}

// TestPluginWireNames pins the wire names the spec documents: every JSON
// field of the plugin types is a property of its schema.
func TestPluginWireNames(t *testing.T) {
	schemas := loadSpec(t)["components"].(map[string]any)["schemas"].(map[string]any)
	src := &pluginapi.Source{Marketplace: "m", IndexVersion: 1}
	for schema, v := range map[string]any{
		"PluginInfo": registry.Info{ID: "x", Status: registry.StatusFailed, Error: "boom", InterruptOn: core.Policy{"x.*": {Interrupt: true}},
			Digest: "d", Source: src, Previous: "0.9.0", Pinned: "1.0.0", Provided: map[string][]string{}, Dir: "/d", Restarts: 1, PID: 1},
		"PluginPreview":        registry.Preview{Installed: "1.0.0", Added: []string{"x"}, Downgrade: true, Pinned: "1.0.0", Changes: &pluginapi.Changes{}, InterruptOn: core.Policy{}},
		"PluginChanges":        pluginapi.Changes{},
		"PluginSource":         *src,
		"PluginInstallRequest": registry.InstallRequest{Path: "/p", SHA256: "s", Disabled: true, AllowDowngrade: true},
		"PluginPinRequest":     pluginapi.PinRequest{Version: "1.0.0"},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		sch, _ := schemas[schema].(map[string]any)
		props, ok := sch["properties"].(map[string]any)
		if !ok {
			t.Fatalf("schema %s has no properties", schema)
		}
		for k := range m {
			if _, ok := props[k]; !ok {
				t.Errorf("%T has field %q, which the %s schema does not document", v, k, schema)
			}
		}
	}
}
