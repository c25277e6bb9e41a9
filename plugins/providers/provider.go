// Package providers is the SDK of Kiln's built-in model providers: a
// Provider speaks one model API (OpenAI, Anthropic, Gemini, Bedrock,
// OpenRouter, Ollama) and serves many models as "<provider>:<model>"
// references. The "model-provider" extension kind
// (plugins/providers/modelprovider) hands every provider, built-in or a
// plugin's, to the provider hub (plugins/providers/hub); third-party
// providers are written with sdk/plugin instead of this package.
//
// Each built-in provider lives in its own subpackage, which registers its
// definition and its built-in plugin from init
// (modelprovider.RegisterBuiltin), and is written
// against this file only: it receives its Settings (credentials already
// resolved) and an *http.Client from the host — a client that enforces the
// provider's network permission, so a provider reaches its own API host
// (or the configured base URL) and nothing else — and turns
// core.ModelRequest into its API's wire format and the streamed answer
// back into text deltas, tool calls and usage. Errors are *Error with a
// Kind, which the host's retry (Retry) and the user-facing failure text
// use.
package providers

import (
	"context"
	"net/http"

	"github.com/kilnhq/kiln/core"
)

// Provider is one model API.
type Provider interface {
	// Models lists the models the provider offers: live from the API where
	// it has a list endpoint, else a built-in list of well-known models.
	Models(ctx context.Context) ([]ModelInfo, error)
	// Turn runs one model turn of model (the part after "<provider>:"),
	// streaming text through delta (which may be nil) as it arrives. Tool
	// names in req.Tools and in the conversation are Kiln's (they may
	// contain dots); a provider whose API restricts names encodes them
	// with ToolNames and decodes the model's calls back. Errors are *Error.
	Turn(ctx context.Context, model string, req core.ModelRequest, delta func(string)) (core.ModelResponse, error)
}

// ModelInfo describes a model.
type ModelInfo struct {
	ID          string `json:"id"` // as the API names it, e.g. "gpt-4o"
	Name        string `json:"name,omitempty"`
	ContextSize int    `json:"context_size,omitempty"`
}

// Settings configure a provider. Secrets are already resolved from their
// environment references or the credentials file; a provider never reads
// the environment itself (the host does, so tests and the API see one
// truth).
type Settings struct {
	// APIKey is the provider's key or token ("" when not set).
	APIKey string
	// BaseURL overrides the API endpoint ("" for the default).
	BaseURL string
	// Extra holds provider-specific settings: "api" ("chat" or
	// "responses") for OpenAI, "auth" ("x-api-key" or "bearer") for
	// Anthropic, "region", "profile", "access_key_id",
	// "secret_access_key", "session_token" for Bedrock, "referer" and
	// "title" for OpenRouter.
	Extra map[string]string
	// HTTP is the client to use; the host gives one that enforces the
	// provider's network permission. nil means http.DefaultClient (tests).
	HTTP *http.Client
}

// Client returns s.HTTP or http.DefaultClient.
func (s Settings) Client() *http.Client {
	if s.HTTP != nil {
		return s.HTTP
	}
	return http.DefaultClient
}

// Factory makes a provider from its settings.
type Factory func(Settings) (Provider, error)

// Model presents one model of a provider as a core.Model.
func Model(p Provider, model string) core.Model { return boundModel{p, model} }

type boundModel struct {
	p     Provider
	model string
}

func (m boundModel) Turn(ctx context.Context, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	return m.p.Turn(ctx, m.model, req, delta)
}
