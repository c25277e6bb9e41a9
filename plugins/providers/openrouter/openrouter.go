// Package openrouter is the "openrouter" model provider: OpenRouter's
// OpenAI-compatible Chat Completions API at https://openrouter.ai/api/v1,
// which serves many vendors' models as "<vendor>/<model>"
// ("openrouter:anthropic/claude-sonnet-4").
//
// It is the openai package's Chat Completions implementation with
// OpenRouter's endpoint and app-attribution headers (HTTP-Referer and
// X-Title, from Settings.Extra["referer"] and ["title"]). That
// implementation already covers OpenRouter's ways: ": OPENROUTER
// PROCESSING" keep-alive comments in the stream are skipped as the SSE
// format says; an error after the stream began arrives as a chunk with a
// top-level error object (its code the HTTP status, its kind in
// metadata.error_type) and finish_reason "error", and is classified like
// an HTTP error; usage comes in the last chunk before [DONE]; and
// GET /models lists the models with their names and context lengths.
package openrouter

import (
	"net/http"

	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/openai"
)

// ID is the provider's id.
const ID = "openrouter"

// Defaults of the endpoint and of the attribution headers.
const (
	DefaultBaseURL = "https://openrouter.ai/api/v1"
	DefaultReferer = "https://github.com/kilnhq/kiln"
	DefaultTitle   = "Kiln"
)

// New returns the OpenRouter provider. Settings.BaseURL replaces
// DefaultBaseURL; Extra["referer"] and Extra["title"] replace the
// HTTP-Referer and X-Title OpenRouter attributes requests to. It fails on
// a base URL that is not http(s).
func New(s providers.Settings) (providers.Provider, error) {
	h := http.Header{}
	h.Set("HTTP-Referer", orDefault(s.Extra["referer"], DefaultReferer))
	h.Set("X-Title", orDefault(s.Extra["title"], DefaultTitle))
	return openai.NewChat(s, openai.Options{ID: ID, BaseURL: DefaultBaseURL, Headers: h})
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
