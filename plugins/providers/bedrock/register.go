package bedrock

import (
	_ "embed"

	"github.com/kilnhq/kiln/plugins/providers/hub"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
)

// def describes the Bedrock provider to the provider hub: it is
// configured by an API key, an access key pair or a profile, and reaches
// the region's two Bedrock hosts (and a base_url's, when one is set).
var def = hub.Def{
	ID: ID, Name: "Amazon Bedrock", Order: 4,
	Settings: []hub.SettingDef{
		{Name: "api_key", Secret: true, Env: []string{"AWS_BEARER_TOKEN_BEDROCK"}, Help: "Bedrock API key (instead of AWS credentials)"},
		{Name: "access_key_id", Env: []string{"AWS_ACCESS_KEY_ID"}, Help: "AWS access key ID"},
		{Name: "secret_access_key", Secret: true, Env: []string{"AWS_SECRET_ACCESS_KEY"}, Help: "AWS secret access key"},
		{Name: "session_token", Secret: true, Env: []string{"AWS_SESSION_TOKEN"}, Help: "AWS session token"},
		{Name: "profile", Env: []string{"AWS_PROFILE"}, Help: "profile in the shared AWS config and credentials files"},
		{Name: "region", Env: []string{"AWS_REGION", "AWS_DEFAULT_REGION"}, Default: DefaultRegion, Help: "AWS region"},
		{Name: "config_file", Env: []string{"AWS_CONFIG_FILE"}, Help: "shared config file (default ~/.aws/config)"},
		{Name: "credentials_file", Env: []string{"AWS_SHARED_CREDENTIALS_FILE"}, Help: "shared credentials file (default ~/.aws/credentials)"},
		{Name: "base_url", Help: "endpoint override"},
	},
	Configured: func(v map[string]string) bool {
		return v["api_key"] != "" || v["access_key_id"] != "" && v["secret_access_key"] != "" || v["profile"] != ""
	},
	Hosts: func(v map[string]string) []string {
		r := v["region"]
		hosts := []string{"bedrock-runtime." + r + ".amazonaws.com:443", "bedrock." + r + ".amazonaws.com:443"}
		if v["base_url"] != "" {
			hosts = append(hosts, hub.URLHosts(v["base_url"])...)
		}
		return hosts
	},
	Models: []string{"anthropic.claude-sonnet-4-5-20250929-v1:0", "amazon.nova-pro-v1:0", "meta.llama3-3-70b-instruct-v1:0"},
	New:    New,
}

// manifest describes the provider's built-in plugin.
//
//go:embed kiln-plugin.json
var manifest []byte

func init() { modelprovider.RegisterBuiltin(def, manifest) }
