package client

import (
	"context"
	"net/http"

	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// The provider types are the server's own (package plugins/pluginapi,
// which depends on core and the standard library only).

// Provider states.
const (
	ProviderReady         = pluginapi.ProviderReady
	ProviderNotConfigured = pluginapi.ProviderNotConfigured
	ProviderDisabled      = pluginapi.ProviderDisabled
	ProviderError         = pluginapi.ProviderError
)

type (
	// ProviderStatus is a model provider ("openai", "anthropic",
	// "ollama", ...) as the server shows it. Secrets never appear: only
	// whether each is set and where from.
	ProviderStatus = pluginapi.ProviderStatus
	// ProviderSetting is one resolved setting of a provider.
	ProviderSetting = pluginapi.ProviderSetting
	// ProviderConfig sets some of a provider's settings; the others are
	// kept. A secret value is an environment reference "${NAME}", stored
	// as the reference, or a literal, stored in the server's credentials
	// file; "" removes a setting.
	ProviderConfig = pluginapi.ProviderConfig
	// Model is one model a provider offers.
	Model = pluginapi.Model
	// Models is the configured providers' models and every provider's
	// status.
	Models = pluginapi.Models
)

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
