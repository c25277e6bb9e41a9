package gemini

import (
	_ "embed"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/providers/hub"
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

// manifest describes the built-in plugin of the provider. Its network
// permission is the API host under the default settings; the server
// replaces it with the host under the current ones (hub.Hub.HostsOf).
//
//go:embed kiln-plugin.json
var manifest []byte

func init() {
	hub.Register(def)
	plugins.RegisterBuiltin(manifest)
}
