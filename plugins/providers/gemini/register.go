package gemini

import (
	_ "embed"

	"github.com/kilnhq/kiln/plugins/providers/hub"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
)

// def describes the Gemini provider to the provider hub.
var def = hub.Def{
	ID: ID, Name: "Google Gemini", Order: 3,
	Settings: []hub.SettingDef{
		{Name: "api_key", Secret: true, Required: true, Env: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}, Help: "API key"},
		{Name: "base_url", Default: DefaultBaseURL, Help: "endpoint"},
	},
	Models: []string{"gemini-2.5-pro", "gemini-2.5-flash"},
	New:    New,
}

// manifest describes the provider's built-in plugin.
//
//go:embed kiln-plugin.json
var manifest []byte

func init() { modelprovider.RegisterBuiltin(def, manifest) }
