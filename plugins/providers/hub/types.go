package hub

// Status is a provider as the API and the CLI show it. Secrets never
// appear: only whether each is set and where from.
type Status struct {
	ID   string `json:"id"`   // "openai", "anthropic", "gemini", "bedrock", "openrouter", "ollama"
	Name string `json:"name"` // "OpenAI"
	// State is "ready" (configured and enabled), "not_configured" (no
	// credentials found), "disabled" (its plugin is disabled) or "error"
	// (Error says why: a stored environment reference whose variable is
	// not set, the model list failed, the server cannot be reached).
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// Settings are the provider's settings with secrets redacted: each
	// secret is "set (env OPENAI_API_KEY)", "set (credentials file)" or
	// "not set"; other settings (base_url, region, api, profile, ...) as
	// they are, with their source.
	Settings []Setting `json:"settings"`
	// Env lists the environment variables the provider reads, for the
	// "how to configure" hint.
	Env []string `json:"env"`
}

// Setting is one resolved setting.
type Setting struct {
	Name   string `json:"name"` // "api_key", "base_url", "region", ...
	Secret bool   `json:"secret"`
	// Value is the value, or for a secret "set" or "not set".
	Value string `json:"value"`
	// Source is where the value comes from: "env OPENAI_API_KEY",
	// "config", "config (env ref ${OPENAI_API_KEY})", "credentials file",
	// "default", or "" when not set. A stored environment reference keeps
	// its source when its variable is not set (see Error).
	Source string `json:"source,omitempty"`
	// Error says why a stored value cannot be used: "${MY_OPENAI_KEY}
	// stored, but MY_OPENAI_KEY is not set in the server's environment"
	// (the reference names a variable, it is not a secret). Value is then
	// "not set" for a secret, "" otherwise, and the provider is in state
	// "error". Empty when the setting is fine.
	Error string `json:"error,omitempty"`
}

// ConfigInput sets a provider's configuration (PUT /providers/{id},
// kiln providers set). A secret value is either an environment reference
// "${NAME}" (stored as the reference) or a literal (stored in the
// credentials file, mode 0600, never in the database); "" removes the
// setting. Settings not named are kept.
type ConfigInput struct {
	Settings map[string]string `json:"settings"`
}

// Model is one model a provider offers.
type Model struct {
	Ref         string `json:"ref"` // "openai:gpt-4o", what KILN_MODEL and runs take
	Provider    string `json:"provider"`
	ID          string `json:"id"`
	Name        string `json:"name,omitempty"`
	ContextSize int    `json:"context_size,omitempty"`
}

// Models is GET /models: every configured provider's models (live where
// the API lists them, cached) and every provider's status.
type Models struct {
	Models    []Model  `json:"models"`
	Providers []Status `json:"providers"`
	Default   string   `json:"default"` // the server's default model
}
