package hub_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/hub"
)

// TestRegistered: the six vendors register complete definitions (an ID, a
// name, a factory and settings, each setting named once), in the order
// kiln has always listed them.
func TestRegistered(t *testing.T) {
	var ids []string
	for _, d := range hub.Registered() {
		ids = append(ids, d.ID)
		if d.Name == "" || d.New == nil || len(d.Settings) == 0 {
			t.Errorf("%s: incomplete definition %+v", d.ID, d)
		}
		seen := map[string]bool{}
		for _, s := range d.Settings {
			if s.Name == "" || seen[s.Name] {
				t.Errorf("%s: setting %q is unnamed or named twice", d.ID, s.Name)
			}
			seen[s.Name] = true
		}
	}
	if want := []string{"openai", "anthropic", "gemini", "bedrock", "openrouter", "ollama"}; !slices.Equal(ids, want) {
		t.Errorf("registered %v, want %v", ids, want)
	}
}

// TestRegisterRefuses: a definition without a factory, name or settings,
// or one whose ID is taken, panics at registration, so it cannot reach a
// running server.
func TestRegisterRefuses(t *testing.T) {
	factory := func(providers.Settings) (providers.Provider, error) { return nil, nil }
	settings := []hub.SettingDef{{Name: "api_key"}}
	for _, tt := range []struct {
		name string
		def  hub.Def
		want string
	}{
		{"no factory", hub.Def{ID: "nofactory", Name: "X", Settings: settings}, "lacks"},
		{"no name", hub.Def{ID: "noname", New: factory, Settings: settings}, "lacks"},
		{"no settings", hub.Def{ID: "nosettings", Name: "X", New: factory}, "lacks"},
		{"no ID", hub.Def{Name: "X", New: factory, Settings: settings}, "lacks"},
		{"bad ID", hub.Def{ID: "a:b", Name: "X", New: factory, Settings: settings}, "want a plugin ID"},
		{"duplicate", hub.Def{ID: "openai", Name: "X", New: factory, Settings: settings}, "registered twice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if v := recover(); v == nil || !strings.Contains(v.(string), tt.want) {
					t.Errorf("panic %v, want one saying %q", v, tt.want)
				}
			}()
			hub.Register(tt.def)
		})
	}
	if n := len(hub.Registered()); n != 6 {
		t.Errorf("%d providers registered after the refusals, want 6", n)
	}
}
