package anthropic

import (
	_ "embed"
	"strconv"

	"github.com/kilnhq/kiln/plugins/providers/hub"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
)

// def describes the Anthropic provider to the provider hub.
var def = hub.Def{
	ID: ID, Name: "Anthropic", Order: 2,
	Settings: []hub.SettingDef{
		{Name: "api_key", Secret: true, Required: true, Env: []string{"ANTHROPIC_API_KEY"}, Help: "API key"},
		{Name: "base_url", Env: []string{"ANTHROPIC_BASE_URL"}, Default: DefaultBaseURL, Help: "endpoint"},
		{Name: "auth", Default: "x-api-key", Values: []string{"x-api-key", "bearer"}, Help: "send the key as x-api-key or as a bearer token"},
		{Name: "max_tokens", Help: "the most tokens one answer may have (default " + strconv.Itoa(defaultMaxTokens) + ")"},
	},
	Models: []string{"claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"},
	New:    New,
}

// manifest describes the provider's built-in plugin.
//
//go:embed kiln-plugin.json
var manifest []byte

func init() { modelprovider.RegisterBuiltin(def, manifest) }
