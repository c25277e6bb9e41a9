package client

import (
	"context"
	"net/http"
)

// The provider types mirror the server's (package plugins/providers/hub)
// rather than import them, so that the SDK keeps depending on core and
// the standard library only.

// Provider states.
const (
	ProviderReady         = "ready"          // configured and enabled
	ProviderNotConfigured = "not_configured" // no credentials found
	ProviderDisabled      = "disabled"       // its plugin is disabled
	ProviderError         = "error"          // ProviderStatus.Error says why
)

// ProviderStatus is a model provider ("openai", "anthropic", "ollama",
// ...) as the server shows it. Secrets never appear: only whether each is
// set and where from.
type ProviderStatus struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// State is ProviderReady, ProviderNotConfigured, ProviderDisabled or
	// ProviderError.
	State string `json:"state"`
	// Error is why the provider is in state ProviderError.
	Error string `json:"error,omitempty"`
	// Settings are the provider's resolved settings, secrets redacted.
	Settings []ProviderSetting `json:"settings"`
	// Env lists the environment variables the provider reads.
	Env []string `json:"env"`
}

// ProviderSetting is one resolved setting of a provider.
type ProviderSetting struct {
	Name   string `json:"name"` // "api_key", "base_url", "region", ...
	Secret bool   `json:"secret"`
	// Value is the value, or for a secret "set" or "not set".
	Value string `json:"value"`
	// Source is where the value comes from ("env OPENAI_API_KEY",
	// "config", "config (env ref ${OPENAI_API_KEY})", "credentials file",
	// "default"), or "" when not set.
	Source string `json:"source,omitempty"`
}

// ProviderConfig sets some of a provider's settings; the others are kept.
// A secret value is an environment reference "${NAME}", stored as the
// reference, or a literal, stored in the server's credentials file; ""
// removes a setting.
type ProviderConfig struct {
	Settings map[string]string `json:"settings"`
}

// Model is one model a provider offers.
type Model struct {
	// Ref is "provider:id", what runs and KILN_MODEL take.
	Ref         string `json:"ref"`
	Provider    string `json:"provider"`
	ID          string `json:"id"`
	Name        string `json:"name,omitempty"`
	ContextSize int    `json:"context_size,omitempty"` // in tokens, 0 when unknown
}

// Models is the configured providers' models and every provider's status.
type Models struct {
	Models    []Model          `json:"models"`
	Providers []ProviderStatus `json:"providers"`
	// Default is the server's default model.
	Default string `json:"default"`
}

// Providers returns every model provider, configured or not. A server
// without a provider hub answers with a not-found error.
func (c *Client) Providers(ctx context.Context) ([]*ProviderStatus, error) {
	var out struct {
		Providers []*ProviderStatus `json:"providers"`
	}
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/providers", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Providers, nil
}

// Provider returns one provider (a not-found error for an unknown id).
func (c *Client) Provider(ctx context.Context, id string) (*ProviderStatus, error) {
	return c.provider(ctx, http.MethodGet, id, nil)
}

// ConfigureProvider sets the settings in cfg and returns the provider's
// new status. An unknown setting or a bad value is an invalid-request
// error saying which. Prefer "${NAME}" references for secrets; a literal
// secret travels to the server, which keeps it in its credentials file.
func (c *Client) ConfigureProvider(ctx context.Context, id string, cfg ProviderConfig) (*ProviderStatus, error) {
	if cfg.Settings == nil {
		cfg.Settings = map[string]string{}
	}
	return c.provider(ctx, http.MethodPut, id, cfg)
}

// ResetProvider forgets the provider's stored configuration and returns
// its status after that; settings from the server's environment still
// apply.
func (c *Client) ResetProvider(ctx context.Context, id string) (*ProviderStatus, error) {
	return c.provider(ctx, http.MethodDelete, id, nil)
}

// Models returns the models of the configured providers, every provider's
// status and the server's default model.
func (c *Client) Models(ctx context.Context) (*Models, error) {
	var out Models
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/models", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) provider(ctx context.Context, method, id string, in any) (*ProviderStatus, error) {
	p, err := pathID("provider", id)
	if err != nil {
		return nil, err
	}
	var out ProviderStatus
	if err := c.do(ctx, method, apiPrefix+"/providers/"+p, nil, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
