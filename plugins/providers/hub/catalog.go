// Package hub runs the model providers of a Kiln server: it knows each
// provider's settings and the environment variables its vendor's SDKs
// read, stores what the user configures (environment references, or
// secrets in a file only the server's user can read — never in the
// database), resolves "<provider>:<model>" references to core.Models with
// retries, and lists models (live, cached) and each provider's state.
// Every provider gets an HTTP client that reaches only its own API host or
// configured base URL (netguard).
package hub

import (
	"net"
	"net/url"
	"strings"

	"github.com/kilnhq/kiln/plugins/providers"
)

// Def describes a provider kind.
type Def struct {
	ID, Name string
	Settings []SettingDef
	// Configured reports whether resolved settings are enough to call the
	// API; nil means "api_key is set".
	Configured func(values map[string]string) bool
	// Hosts returns the host:port patterns the provider may reach, given
	// its resolved settings; nil means the base URL's host.
	Hosts func(values map[string]string) []string
	// New makes the provider.
	New providers.Factory
	// Models lists well-known models, offered when the API has no list
	// or it fails; may be nil.
	Models []string
	// BarePort is the port of a base URL given as a bare host without
	// scheme or port (OLLAMA_HOST=example.com means port 11434).
	BarePort string
}

// SettingDef is one setting of a provider.
type SettingDef struct {
	Name   string
	Secret bool
	// Env are the environment variables that supply the setting when the
	// user configured none, first set wins.
	Env     []string
	Default string
	// Values, when set, are the only values allowed.
	Values []string
	Help   string
}

// Catalog returns the six built-in providers' definitions; factories maps
// provider IDs to their constructors (the providers' packages), so this
// package does not import them.
func Catalog(factories map[string]providers.Factory) []Def {
	defs := []Def{
		{
			ID: "openai", Name: "OpenAI",
			Settings: []SettingDef{
				{Name: "api_key", Secret: true, Env: []string{"OPENAI_API_KEY"}, Help: "API key"},
				{Name: "base_url", Env: []string{"OPENAI_BASE_URL"}, Default: "https://api.openai.com/v1", Help: "endpoint, for OpenAI-compatible servers"},
				{Name: "api", Default: "chat", Values: []string{"chat", "responses"}, Help: "Chat Completions or the Responses API"},
			},
			Models: []string{"gpt-4.1", "gpt-4.1-mini", "gpt-4o", "o4-mini"},
		},
		{
			ID: "anthropic", Name: "Anthropic",
			Settings: []SettingDef{
				{Name: "api_key", Secret: true, Env: []string{"ANTHROPIC_API_KEY"}, Help: "API key"},
				{Name: "base_url", Env: []string{"ANTHROPIC_BASE_URL"}, Default: "https://api.anthropic.com", Help: "endpoint"},
				{Name: "auth", Default: "x-api-key", Values: []string{"x-api-key", "bearer"}, Help: "send the key as x-api-key or as a bearer token"},
				{Name: "max_tokens", Help: "the most tokens one answer may have (default 8192)"},
			},
			Models: []string{"claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"},
		},
		{
			ID: "gemini", Name: "Google Gemini",
			Settings: []SettingDef{
				{Name: "api_key", Secret: true, Env: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}, Help: "API key"},
				{Name: "base_url", Default: "https://generativelanguage.googleapis.com", Help: "endpoint"},
			},
			Models: []string{"gemini-2.5-pro", "gemini-2.5-flash"},
		},
		{
			ID: "bedrock", Name: "Amazon Bedrock",
			Settings: []SettingDef{
				{Name: "api_key", Secret: true, Env: []string{"AWS_BEARER_TOKEN_BEDROCK"}, Help: "Bedrock API key (instead of AWS credentials)"},
				{Name: "access_key_id", Env: []string{"AWS_ACCESS_KEY_ID"}, Help: "AWS access key ID"},
				{Name: "secret_access_key", Secret: true, Env: []string{"AWS_SECRET_ACCESS_KEY"}, Help: "AWS secret access key"},
				{Name: "session_token", Secret: true, Env: []string{"AWS_SESSION_TOKEN"}, Help: "AWS session token"},
				{Name: "profile", Env: []string{"AWS_PROFILE"}, Help: "profile in the shared AWS config and credentials files"},
				{Name: "region", Env: []string{"AWS_REGION", "AWS_DEFAULT_REGION"}, Default: "us-west-2", Help: "AWS region"},
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
					hosts = append(hosts, urlHosts(v["base_url"])...)
				}
				return hosts
			},
			Models: []string{"anthropic.claude-sonnet-4-5-20250929-v1:0", "amazon.nova-pro-v1:0", "meta.llama3-3-70b-instruct-v1:0"},
		},
		{
			ID: "openrouter", Name: "OpenRouter",
			Settings: []SettingDef{
				{Name: "api_key", Secret: true, Env: []string{"OPENROUTER_API_KEY"}, Help: "API key"},
				{Name: "base_url", Default: "https://openrouter.ai/api/v1", Help: "endpoint"},
				{Name: "referer", Default: "https://github.com/kilnhq/kiln", Help: "HTTP-Referer sent for OpenRouter's app attribution"},
				{Name: "title", Default: "Kiln", Help: "X-Title sent for OpenRouter's app attribution"},
			},
			Models: []string{"openai/gpt-4o", "anthropic/claude-sonnet-4.5", "google/gemini-2.5-pro"},
		},
		{
			ID: "ollama", Name: "Ollama",
			Settings: []SettingDef{
				{Name: "base_url", Env: []string{"OLLAMA_HOST"}, Default: "http://127.0.0.1:11434", Help: "Ollama server (host:port or URL)"},
				{Name: "api_key", Secret: true, Help: "bearer token, for an Ollama behind a proxy"},
			},
			Configured: func(map[string]string) bool { return true },
			BarePort:   "11434",
		},
	}
	for i := range defs {
		defs[i].New = factories[defs[i].ID]
	}
	return defs
}

func (d *Def) setting(name string) *SettingDef {
	for i := range d.Settings {
		if d.Settings[i].Name == name {
			return &d.Settings[i]
		}
	}
	return nil
}

func (d *Def) configured(v map[string]string) bool {
	if d.Configured != nil {
		return d.Configured(v)
	}
	return v["api_key"] != ""
}

func (d *Def) hosts(v map[string]string) []string {
	if d.Hosts != nil {
		return d.Hosts(v)
	}
	return urlHosts(v["base_url"])
}

// normalize returns a base URL setting in its canonical form.
func (d *Def) normalize(raw string) string { return NormalizeURL(raw, d.BarePort) }

// NormalizeURL returns a base URL with a scheme ("host:port" becomes
// "http://host:port", as OLLAMA_HOST allows, and a bare host gets
// barePort when it is set) and "localhost" spelled 127.0.0.1, so the
// network permission can name the address.
func NormalizeURL(raw, barePort string) string {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return ""
	}
	bare := !strings.Contains(raw, "://")
	if bare {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	if bare && u.Port() == "" && barePort != "" {
		u.Host = net.JoinHostPort(u.Hostname(), barePort)
	}
	if strings.EqualFold(u.Hostname(), "localhost") {
		if p := u.Port(); p != "" {
			u.Host = net.JoinHostPort("127.0.0.1", p)
		} else {
			u.Host = "127.0.0.1"
		}
	}
	return strings.TrimSuffix(u.String(), "/")
}

// urlHosts is the host:port pattern of a base URL.
func urlHosts(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return []string{net.JoinHostPort(u.Hostname(), port)}
}
