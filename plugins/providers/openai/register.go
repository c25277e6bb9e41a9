package openai

import (
	_ "embed"

	"github.com/kilnhq/kiln/plugins/providers/hub"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
)

// def describes the OpenAI provider to the provider hub.
var def = hub.Def{
	ID: ID, Name: "OpenAI", Order: 1,
	Settings: []hub.SettingDef{
		{Name: "api_key", Secret: true, Required: true, Env: []string{"OPENAI_API_KEY"}, Help: "API key"},
		{Name: "base_url", Env: []string{"OPENAI_BASE_URL"}, Default: DefaultBaseURL, Help: "endpoint, for OpenAI-compatible servers"},
		{Name: "api", Default: "chat", Values: []string{"chat", "responses"}, Help: "Chat Completions or the Responses API"},
	},
	Models: []string{"gpt-4.1", "gpt-4.1-mini", "gpt-4o", "o4-mini"},
	New:    New,
}

// manifest describes the provider's built-in plugin.
//
//go:embed kiln-plugin.json
var manifest []byte

func init() { modelprovider.RegisterBuiltin(def, manifest) }
