package ollama

import "github.com/kilnhq/kiln/plugins/providers/hub"

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

func init() { hub.Register(def) }
