package plugins

import (
	"strings"
	"testing"
)

const testBuiltin = `{"apiVersion": "kiln.dev/v1", "id": "test-builtin", "version": "1.2.3", "description": "A test.",
	"provides": ["model-provider"], "runtime": "builtin", "permissions": {"network": ["api.example.com:443"]}}`

// The test binary registers the test's built-ins once (go test -count
// runs the tests again in the same process): a good one, and two that
// register (only the ID is read then) and fail when the server asks.
func init() {
	RegisterBuiltin([]byte(testBuiltin))
	RegisterBuiltin([]byte(strings.Replace(strings.Replace(testBuiltin, `"builtin"`, `"wasm"`, 1), "test-builtin", "test-builtin-wasm", 1)))
	RegisterBuiltin([]byte(strings.Replace(strings.Replace(testBuiltin, `"runtime": "builtin"`, `"runtime": "builtin", "entry": "x.wasm"`, 1), "test-builtin", "test-builtin-entry", 1)))
}

// TestRegisterBuiltin: a registered manifest is looked up by its ID,
// parsed anew for every caller; an edit is applied and checked by the
// same parser; an unknown ID is an error.
func TestRegisterBuiltin(t *testing.T) {
	m, err := BuiltinManifest("test-builtin", nil)
	if err != nil || m.Version != "1.2.3" || m.Runtime != RuntimeBuiltin || strings.Join(m.Permissions.Network, " ") != "api.example.com:443" || m.Permissions.TimeoutMS != DefaultTimeoutMS {
		t.Fatalf("BuiltinManifest = %+v, %v", m, err)
	}
	m.Permissions.Network[0] = "changed.example.com"
	if again, _ := BuiltinManifest("test-builtin", nil); again.Permissions.Network[0] != "api.example.com:443" {
		t.Errorf("a caller's change reached the registry: %v", again.Permissions.Network)
	}
	edited, err := BuiltinManifest("test-builtin", func(m *Manifest) { m.Permissions.Network = []string{"127.0.0.1:11434"} })
	if err != nil || strings.Join(edited.ConsentSummary(), "; ") != "connect to 127.0.0.1 (this computer) on port 11434; take up to 30 seconds per call" {
		t.Errorf("edited: %v, %v", edited.ConsentSummary(), err)
	}
	for _, tt := range []struct {
		name string
		edit func(*Manifest)
		want string
	}{
		{"bad host", func(m *Manifest) { m.Permissions.Network = []string{"API.example.com"} }, "built-in plugin test-builtin: invalid plugin manifest: permissions.network[0]"},
		{"new ID", func(m *Manifest) { m.ID = "other" }, `the edit changed its ID to "other"`},
	} {
		if _, err := BuiltinManifest("test-builtin", tt.edit); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error with %q", tt.name, err, tt.want)
		}
	}
	if _, err := BuiltinManifest("no-such-builtin", nil); err == nil || !strings.Contains(err.Error(), "not registered") {
		t.Errorf("unknown ID: %v", err)
	}
	found := false
	for _, id := range RegisteredBuiltins() {
		found = found || id == "test-builtin"
	}
	if !found {
		t.Errorf("RegisteredBuiltins() = %v", RegisteredBuiltins())
	}
}

// TestRegisterBuiltinRefuses: a manifest without an ID, or a second one of
// an ID, panics at registration; one the built-in parser refuses is
// refused when the server asks for it.
func TestRegisterBuiltinRefuses(t *testing.T) {
	for id, want := range map[string]string{"test-builtin-wasm": "runtime", "test-builtin-entry": "entry"} {
		if _, err := BuiltinManifest(id, nil); err == nil || !strings.Contains(err.Error(), "invalid plugin manifest") || !strings.Contains(err.Error(), want) {
			t.Errorf("BuiltinManifest(%s): %v, want the parser's refusal naming %q", id, err, want)
		}
	}
	for _, tt := range []struct{ name, manifest, want string }{
		{"not JSON", "{", "not a JSON object"},
		{"no ID", `{"apiVersion": "kiln.dev/v1"}`, "without an id"},
		{"duplicate", testBuiltin, "registered twice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if v := recover(); v == nil || !strings.Contains(v.(string), tt.want) {
					t.Errorf("panic %v, want one with %q", v, tt.want)
				}
			}()
			RegisterBuiltin([]byte(tt.manifest))
		})
	}
}
