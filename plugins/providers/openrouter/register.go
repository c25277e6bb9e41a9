package openrouter

import (
	_ "embed"

	"github.com/kilnhq/kiln/plugins/providers/hub"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
)

// def describes the OpenRouter provider to the provider hub.
var def = hub.Def{
	ID: ID, Name: "OpenRouter", Order: 5,
	Settings: []hub.SettingDef{
		{Name: "api_key", Secret: true, Required: true, Env: []string{"OPENROUTER_API_KEY"}, Help: "API key"},
		{Name: "base_url", Default: DefaultBaseURL, Help: "endpoint"},
		{Name: "referer", Default: DefaultReferer, Help: "HTTP-Referer sent for OpenRouter's app attribution"},
		{Name: "title", Default: DefaultTitle, Help: "X-Title sent for OpenRouter's app attribution"},
	},
	Models: []string{"openai/gpt-4o", "anthropic/claude-sonnet-4.5", "google/gemini-2.5-pro"},
	New:    New,
}

// manifest describes the provider's built-in plugin.
//
//go:embed kiln-plugin.json
var manifest []byte

func init() { modelprovider.RegisterBuiltin(def, manifest) }
