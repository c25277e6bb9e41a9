package modelprovider_test

import (
	"strings"
	"testing"

	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/hub"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
)

// TestRegisterBuiltinRefuses: a built-in provider whose manifest is not
// its plugin's (another ID, another kind) or is not JSON panics at
// registration, before the hub or the registry hears of it.
func TestRegisterBuiltinRefuses(t *testing.T) {
	d := hub.Def{ID: "test-vendor", Name: "Test", Settings: []hub.SettingDef{{Name: "api_key", Required: true}},
		New: func(providers.Settings) (providers.Provider, error) { return nil, nil }}
	manifest := func(id, provides string) []byte {
		return []byte(`{"apiVersion": "kiln.dev/v1", "id": "` + id + `", "version": "1.0.0", "description": "Test models.",
			"provides": ["` + provides + `"], "runtime": "builtin"}`)
	}
	for _, tt := range []struct {
		name     string
		manifest []byte
		want     string
	}{
		{"another ID", manifest("other-vendor", "model-provider"), `is plugin "other-vendor"`},
		{"another kind", manifest("test-vendor", "toolset"), "providing [toolset]"},
		{"not JSON", []byte(`{"apiVersion": `), "not a JSON object"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if v := recover(); v == nil || !strings.Contains(v.(string), tt.want) {
					t.Errorf("panic %v, want one with %q", v, tt.want)
				}
			}()
			modelprovider.RegisterBuiltin(d, tt.manifest)
		})
	}
	for _, r := range hub.Registered() {
		if r.ID == d.ID {
			t.Error("a refused provider reached the hub")
		}
	}
}
