package ollama

import (
	_ "embed"

	"github.com/kilnhq/kiln/plugins/providers/hub"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
)

// def describes the Ollama provider to the provider hub: no setting is
// required (a local Ollama needs no key), and a bare OLLAMA_HOST means
// Ollama's port.
var def = hub.Def{
	ID: ID, Name: "Ollama", Order: 6,
	Settings: []hub.SettingDef{
		{Name: "base_url", Env: []string{"OLLAMA_HOST"}, Default: DefaultBaseURL, Help: "Ollama server (host:port or URL)"},
		{Name: "api_key", Secret: true, Help: "bearer token, for an Ollama behind a proxy"},
	},
	BarePort: defaultPort,
	New:      New,
}

// manifest describes the provider's built-in plugin.
//
//go:embed kiln-plugin.json
var manifest []byte

func init() { modelprovider.RegisterBuiltin(def, manifest) }
