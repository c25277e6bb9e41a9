// Package anthropic is the model provider for Anthropic's Messages API
// (provider id "anthropic"): POST /v1/messages with "stream": true, read
// as server-sent events, and GET /v1/models for the model list.
//
// Settings: APIKey is sent as x-api-key, or as "Authorization: Bearer"
// when Extra["auth"] is "bearer" (gateways and proxies that want a bearer
// token); BaseURL replaces https://api.anthropic.com; Extra["max_tokens"]
// replaces the default reply budget of 8192 tokens (the API requires one).
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
)

// ID is the provider id: models are "anthropic:<model>".
const ID = "anthropic"

// DefaultBaseURL is the API's address when Settings.BaseURL is empty.
const DefaultBaseURL = "https://api.anthropic.com"

const (
	// apiVersion is the anthropic-version header every request carries.
	apiVersion = "2023-06-01"
	// defaultMaxTokens is the reply budget when Extra["max_tokens"] is
	// unset: enough for long answers and large tool arguments, and within
	// the output limit of every current model.
	defaultMaxTokens = 8192
	// modelPageSize is the largest page GET /v1/models serves.
	modelPageSize = 1000
	// maxModelPages bounds how many pages Models follows.
	maxModelPages = 10
)

// imageTypes are the image types the API takes; other images stand in as
// a line (providers.StandIn).
var imageTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

type provider struct {
	key       string
	bearer    bool
	base      string
	maxTokens int
	client    *http.Client
}

// New makes the provider from its settings. It fails on an unknown
// Extra["auth"] or a max_tokens that is not a positive integer.
func New(s providers.Settings) (providers.Provider, error) {
	p := &provider{key: s.APIKey, base: strings.TrimRight(s.BaseURL, "/"), maxTokens: defaultMaxTokens, client: s.Client()}
	if p.base == "" {
		p.base = DefaultBaseURL
	}
	switch a := s.Extra["auth"]; a {
	case "", "x-api-key":
	case "bearer":
		p.bearer = true
	default:
		return nil, fmt.Errorf("anthropic: auth %q: want x-api-key or bearer", a)
	}
	if v := s.Extra["max_tokens"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("anthropic: max_tokens %q: want a positive integer", v)
		}
		p.maxTokens = n
	}
	return p, nil
}

// newRequest makes a request to path on the API with the version and
// credential headers.
func (p *provider) newRequest(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, p.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("anthropic: %w", err)
	}
	req.Header.Set("anthropic-version", apiVersion)
	if p.key != "" {
		if p.bearer {
			req.Header.Set("Authorization", "Bearer "+p.key)
		} else {
			req.Header.Set("x-api-key", p.key)
		}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// do sends req and classifies a failure: no response is a transport
// error, a non-2xx response an API error.
func (p *provider) do(ctx context.Context, req *http.Request) (*http.Response, error) {
	return providers.Do(ctx, p.client, ID, req, func(resp *http.Response) *providers.Error {
		e := providers.HTTPError(ID, resp, errorMessage)
		if e.Kind == providers.KindBadRequest && exceedsContext(e.Message) {
			e.Kind = providers.KindContextLength
		}
		return e
	})
}

// apiError is the body of an error response and the data of an in-stream
// error event: {"type":"error","error":{"type":"...","message":"..."}}.
type apiError struct {
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// errorMessage extracts "<error type>: <message>" from an error body, or
// "" when the body is not the API's error JSON.
func errorMessage(body []byte) string {
	var e apiError
	if json.Unmarshal(body, &e) != nil || e.Error.Message == "" {
		return ""
	}
	if e.Error.Type == "" {
		return e.Error.Message
	}
	return e.Error.Type + ": " + e.Error.Message
}

// exceedsContext reports the API's other context-window refusal, the
// prompt plus max_tokens being over the window ("input length and
// `max_tokens` exceed context limit: ..."), which the shared wording check
// does not know.
func exceedsContext(msg string) bool {
	return strings.Contains(strings.ToLower(msg), "exceed context limit")
}

// Wire types of a Messages API request.
type (
	request struct {
		Model     string    `json:"model"`
		MaxTokens int       `json:"max_tokens"`
		System    string    `json:"system,omitempty"`
		Messages  []message `json:"messages"`
		Tools     []tool    `json:"tools,omitempty"`
		Stream    bool      `json:"stream"`
	}
	message struct {
		Role    string  `json:"role"`
		Content []block `json:"content"`
	}
	// block is a text, image, tool_use or tool_result content block;
	// each type uses its own fields. A tool_result's Content is its text,
	// or its text and image blocks when it has images.
	block struct {
		Type      string          `json:"type"`
		Text      string          `json:"text,omitempty"`
		Source    *imageSource    `json:"source,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Input     json.RawMessage `json:"input,omitempty"`
		ToolUseID string          `json:"tool_use_id,omitempty"`
		Content   any             `json:"content,omitempty"`
		IsError   bool            `json:"is_error,omitempty"`
	}
	// imageSource is an image block's bytes, inline: Data is sent as
	// base64.
	imageSource struct {
		Type      string `json:"type"` // "base64"
		MediaType string `json:"media_type"`
		Data      []byte `json:"data"`
	}
	tool struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
)

// buildRequest converts a Kiln request into the API's. The system prompt
// is the top-level system; a user message's parts become text and image
// blocks; tool results become user-role tool_result blocks, with image
// blocks in their content when they have images; consecutive messages of
// one role are merged, since the API wants user and assistant to alternate
// (so the results of parallel tool calls travel together in one user
// message, right after the assistant's tool_use blocks). Empty text is
// left out: the API refuses empty text blocks.
func (p *provider) buildRequest(model string, req core.ModelRequest, names *providers.ToolNames) (request, error) {
	out := request{Model: model, MaxTokens: p.maxTokens, System: req.System, Stream: true, Messages: []message{}}
	var turns []providers.Turn[block]
	for i, m := range req.Messages {
		var role string
		var blocks []block
		switch m.Role {
		case core.RoleUser:
			role = "user"
			blocks = append(blocks, contentBlocks(m)...)
		case core.RoleAssistant:
			role = "assistant"
			if m.Text != "" {
				blocks = append(blocks, block{Type: "text", Text: m.Text})
			}
			for _, c := range m.ToolCalls {
				blocks = append(blocks, block{Type: "tool_use", ID: toolUseID(c.ID), Name: names.API(c.Name), Input: providers.ObjectArgs(c.Args)})
			}
		case core.RoleTool:
			role = "user"
			r := block{Type: "tool_result", ToolUseID: toolUseID(m.ToolCallID), IsError: m.IsError}
			if providers.HasInline(m, imageTypes...) {
				r.Content = contentBlocks(m)
			} else if text := providers.ContentText(m); text != "" {
				r.Content = text
			}
			blocks = append(blocks, r)
		default:
			return request{}, fmt.Errorf("anthropic: message %d has unknown role %q", i, m.Role)
		}
		turns = providers.AppendTurn(turns, role, blocks...)
	}
	for _, t := range turns {
		out.Messages = append(out.Messages, message{Role: t.Role, Content: t.Parts})
	}
	for _, t := range req.Tools {
		out.Tools = append(out.Tools, tool{Name: names.API(t.Name), Description: t.Description, InputSchema: providers.ToolSchema(t.Schema)})
	}
	return out, nil
}

// contentBlocks is a user message's or a tool result's content as text
// and image blocks.
func contentBlocks(m *core.Message) []block {
	text := func(s string) block { return block{Type: "text", Text: s} }
	image := func(p core.Part) block {
		return block{Type: "image", Source: &imageSource{Type: "base64", MediaType: p.MIME, Data: p.Data}}
	}
	return providers.Blocks(m, text, image, imageTypes...)
}

// toolUseID makes a call id acceptable to the API (^[a-zA-Z0-9_-]+$),
// the same way for the tool_use and its tool_result, so that a
// conversation begun with another provider's ids can continue here.
func toolUseID(id string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, id)
}

// Turn sends one model turn and reads the streamed reply.
func (p *provider) Turn(ctx context.Context, model string, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	names := providers.NewToolNames(req.Tools, req.Messages)
	body, err := p.buildRequest(model, req, names)
	if err != nil {
		return core.ModelResponse{}, err
	}
	data, err := json.Marshal(body)
	if err != nil {
		return core.ModelResponse{}, fmt.Errorf("anthropic: %w", err)
	}
	hreq, err := p.newRequest(ctx, http.MethodPost, "/v1/messages", data)
	if err != nil {
		return core.ModelResponse{}, err
	}
	hreq.Header.Set("Accept", "text/event-stream")
	resp, err := p.do(ctx, hreq)
	if err != nil {
		return core.ModelResponse{}, err
	}
	defer resp.Body.Close()
	return readStream(ctx, resp.Body, names, delta)
}

// modelList is a page of GET /v1/models.
type modelList struct {
	Data []struct {
		ID             string `json:"id"`
		DisplayName    string `json:"display_name"`
		MaxInputTokens int    `json:"max_input_tokens"`
	} `json:"data"`
	HasMore bool   `json:"has_more"`
	LastID  string `json:"last_id"`
}

// Models lists the models the key may use, following the list's pages
// (at most maxModelPages of them).
func (p *provider) Models(ctx context.Context) ([]providers.ModelInfo, error) {
	get := func(after string) (*http.Response, error) {
		q := url.Values{"limit": {strconv.Itoa(modelPageSize)}}
		if after != "" {
			q.Set("after_id", after)
		}
		req, err := p.newRequest(ctx, http.MethodGet, "/v1/models?"+q.Encode(), nil)
		if err != nil {
			return nil, err
		}
		return p.do(ctx, req)
	}
	return providers.Pages(ctx, ID, maxModelPages, "unreadable model list", get, func(page modelList) ([]providers.ModelInfo, string) {
		var out []providers.ModelInfo
		for _, m := range page.Data {
			out = append(out, providers.ModelInfo{ID: m.ID, Name: m.DisplayName, ContextSize: m.MaxInputTokens})
		}
		if !page.HasMore {
			return out, ""
		}
		return out, page.LastID
	})
}
