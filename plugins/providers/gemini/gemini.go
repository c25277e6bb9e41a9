// Package gemini is the "gemini" model provider: Google's Gemini API
// (generativelanguage.googleapis.com, v1beta).
//
// A turn is one POST to models/{model}:streamGenerateContent?alt=sse with
// the key in x-goog-api-key. The answer is a stream of server-sent events
// whose data are GenerateContentResponse objects: text parts are streamed
// through delta as they arrive, functionCall parts (each complete in one
// chunk, several of them in one chunk or spread over several) become the
// turn's tool calls, and the last usageMetadata (it is cumulative) is the
// turn's usage. The stream has no end marker of its own: a turn is complete
// once a candidate carried its finishReason, and a stream that ends before
// that is reported as the API being unavailable, never as a short answer.
//
// Tool calls. Gemini names a call by its function name and its position;
// newer models also give it an id. A call without one gets a stable
// synthetic ID (run, turn, position) that is never sent back to the API.
// Gemini 3 models attach a thoughtSignature to a step's first functionCall
// and refuse the next request unless it comes back with that call, so the
// signature travels inside the Kiln tool-call ID (see callID) — the only
// part of a tool call that Kiln stores opaquely and hands back unchanged.
package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
)

// ID is the provider's id in model references ("gemini:gemini-2.5-pro").
const ID = "gemini"

// DefaultBaseURL is the Gemini API endpoint, without its version.
const DefaultBaseURL = "https://generativelanguage.googleapis.com"

// apiVersion is the API version every path starts with.
const apiVersion = "/v1beta"

// maxModelPages bounds how many pages Models follows.
const maxModelPages = 50

type provider struct {
	base   string // scheme://host[/prefix], no version, no trailing slash
	apiKey string
	http   *http.Client
}

// New makes the Gemini provider. Settings.BaseURL replaces DefaultBaseURL
// (with or without a trailing "/v1beta"); Settings.APIKey is sent as
// x-goog-api-key when set.
func New(s providers.Settings) (providers.Provider, error) {
	base := strings.TrimRight(s.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	base = strings.TrimSuffix(base, apiVersion)
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gemini: base URL %q is not an http(s) URL", s.BaseURL)
	}
	return &provider{base: base, apiKey: s.APIKey, http: s.Client()}, nil
}

// modelPath is the path of a model's resource; "models/" before the name
// is accepted and dropped.
func modelPath(model string) string {
	return apiVersion + "/models/" + url.PathEscape(strings.TrimPrefix(model, "models/"))
}

func (p *provider) newRequest(ctx context.Context, method, path string, query url.Values, body []byte) (*http.Request, error) {
	u := p.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, &providers.Error{Provider: ID, Kind: providers.KindBadRequest, Message: err.Error()}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if p.apiKey != "" {
		req.Header.Set("x-goog-api-key", p.apiKey)
	}
	return req, nil
}

// do sends req: a transport failure or a non-2xx answer becomes a
// classified error.
func (p *provider) do(ctx context.Context, req *http.Request) (*http.Response, error) {
	return providers.Do(ctx, p.http, ID, req, httpError)
}

// Turn runs one streamed model turn.
func (p *provider) Turn(ctx context.Context, model string, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	names := providers.NewToolNames(req.Tools, req.Messages)
	body, err := json.Marshal(buildRequest(req, names))
	if err != nil {
		return core.ModelResponse{}, &providers.Error{Provider: ID, Kind: providers.KindBadRequest, Message: err.Error()}
	}
	hreq, err := p.newRequest(ctx, http.MethodPost, modelPath(model)+":streamGenerateContent", url.Values{"alt": {"sse"}}, body)
	if err != nil {
		return core.ModelResponse{}, err
	}
	resp, err := p.do(ctx, hreq)
	if err != nil {
		return core.ModelResponse{}, err
	}
	defer resp.Body.Close()
	t := newTurn(names, syntheticIDPrefix(req), delta)
	if err := t.read(resp.Body); err != nil {
		if ctx.Err() != nil {
			return core.ModelResponse{}, ctx.Err()
		}
		var pe *providers.Error
		if errors.As(err, &pe) {
			return core.ModelResponse{}, pe
		}
		return core.ModelResponse{}, providers.TransportError(ctx, ID, err)
	}
	return t.result()
}

// modelList is one page of GET /v1beta/models.
type modelList struct {
	Models []struct {
		Name                       string   `json:"name"`
		DisplayName                string   `json:"displayName"`
		InputTokenLimit            int      `json:"inputTokenLimit"`
		SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
	} `json:"models"`
	NextPageToken string `json:"nextPageToken"`
}

// Models lists the models that support generateContent, following every
// page of the list.
func (p *provider) Models(ctx context.Context) ([]providers.ModelInfo, error) {
	get := func(token string) (*http.Response, error) {
		q := url.Values{"pageSize": {"1000"}}
		if token != "" {
			q.Set("pageToken", token)
		}
		req, err := p.newRequest(ctx, http.MethodGet, apiVersion+"/models", q, nil)
		if err != nil {
			return nil, err
		}
		return p.do(ctx, req)
	}
	return providers.Pages(ctx, ID, maxModelPages, "the model list is not valid JSON", get, func(page modelList) ([]providers.ModelInfo, string) {
		var out []providers.ModelInfo
		for _, m := range page.Models {
			if slices.Contains(m.SupportedGenerationMethods, "generateContent") {
				out = append(out, providers.ModelInfo{ID: strings.TrimPrefix(m.Name, "models/"), Name: m.DisplayName, ContextSize: m.InputTokenLimit})
			}
		}
		return out, page.NextPageToken
	})
}
