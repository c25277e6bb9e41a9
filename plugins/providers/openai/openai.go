package openai

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
)

// ID is the provider's id.
const ID = "openai"

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1"

// New returns the OpenAI provider. Settings.Extra["api"] chooses the API:
// "chat" (Chat Completions, the default) or "responses"; Settings.BaseURL
// replaces DefaultBaseURL for an OpenAI-compatible service. It fails on an
// unknown api or a base URL that is not http(s).
func New(s providers.Settings) (providers.Provider, error) {
	c, err := newClient(s, Options{ID: ID, BaseURL: DefaultBaseURL})
	if err != nil {
		return nil, err
	}
	switch api := s.Extra["api"]; api {
	case "", "chat":
		return chat{c}, nil
	case "responses":
		return responses{c}, nil
	default:
		return nil, fmt.Errorf("openai: unknown api %q (want \"chat\" or \"responses\")", api)
	}
}

// Options describe an OpenAI-compatible Chat Completions service for
// NewChat.
type Options struct {
	// ID is the provider's id, used in its errors.
	ID string
	// BaseURL is the API's base URL when Settings.BaseURL is empty.
	BaseURL string
	// Headers are sent with every request.
	Headers http.Header
}

// NewChat returns a provider speaking Chat Completions to the service o
// describes, with the key, base URL and client of s. It fails on a base
// URL that is not http(s).
func NewChat(s providers.Settings, o Options) (providers.Provider, error) {
	c, err := newClient(s, o)
	if err != nil {
		return nil, err
	}
	return chat{c}, nil
}

// client is what both APIs share: the endpoint, credentials, extra
// headers and HTTP client, and the model list.
type client struct {
	id      string
	base    string
	key     string
	headers http.Header
	http    *http.Client
}

func newClient(s providers.Settings, o Options) (*client, error) {
	base := s.BaseURL
	if base == "" {
		base = o.BaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s: base URL %q is not an http(s) URL", o.ID, base)
	}
	return &client{id: o.ID, base: strings.TrimRight(base, "/"), key: s.APIKey, headers: o.Headers.Clone(), http: s.Client()}, nil
}

// do sends a request to path (JSON body when body is not nil) and returns
// the response when it is 2xx; other statuses are classified errors, and
// failures to get a response transport errors.
func (c *client) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("%s: encode request: %w", c.id, err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.id, err)
	}
	for k, v := range c.headers {
		req.Header[k] = v
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
	}
	return providers.Do(ctx, c.http, c.id, req, func(resp *http.Response) *providers.Error { return httpError(c.id, resp) })
}

// stream posts body to path and returns the event stream. A 200 answer
// in JSON rather than events (an error some services give as a plain
// body) is returned as that error.
func (c *client) stream(ctx context.Context, path string, body any) (io.ReadCloser, error) {
	resp, err := c.do(ctx, http.MethodPost, path, body)
	if err != nil {
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		defer resp.Body.Close()
		var b struct {
			Error json.RawMessage `json:"error"`
		}
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(data, &b) == nil {
			if ae, ok := parseAPIError(b.Error); ok {
				return nil, streamError(c.id, ae)
			}
		}
		return nil, &providers.Error{Provider: c.id, Kind: providers.KindBadRequest, Message: "the API answered with JSON, not an event stream"}
	}
	return resp.Body, nil
}

// Models lists the models of GET {base}/models. OpenAI gives only ids;
// compatible services such as OpenRouter add a name and context_length.
func (c *client) Models(ctx context.Context) ([]providers.ModelInfo, error) {
	resp, err := c.do(ctx, http.MethodGet, "/models", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID            string `json:"id"`
			Name          string `json:"name"`
			ContextLength int    `json:"context_length"`
		} `json:"data"`
	}
	if err := providers.DecodeJSON(ctx, c.id, resp.Body, &list, "unreadable model list"); err != nil {
		return nil, err
	}
	models := make([]providers.ModelInfo, 0, len(list.Data))
	for _, m := range list.Data {
		if m.ID != "" {
			models = append(models, providers.ModelInfo{ID: m.ID, Name: m.Name, ContextSize: m.ContextLength})
		}
	}
	return models, nil
}

// readError turns a failure to read the stream into the error a turn
// returns: the context's when it ended, a transport error otherwise.
func (c *client) readError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err == errEventTooLarge {
		return &providers.Error{Provider: c.id, Kind: providers.KindUnavailable, Message: err.Error()}
	}
	return providers.TransportError(ctx, c.id, err)
}

// cutOff is the error of a stream that ended before its terminal event.
func (c *client) cutOff(terminal string) error {
	return &providers.Error{Provider: c.id, Kind: providers.KindUnavailable, Message: "the response stream ended before " + terminal}
}

// toolArgs returns a model's tool-call arguments as a JSON value: {} for
// none, the arguments when they are valid JSON, else the text as a JSON
// string, which the tool refuses (it wants an object), so the model sees
// that its arguments were malformed or cut off and can try again.
func toolArgs(s string) json.RawMessage {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// argsText is the arguments of a call in the conversation as the APIs
// take them: a JSON text, {} for none.
func argsText(args json.RawMessage) string {
	if len(bytes.TrimSpace(args)) == 0 {
		return "{}"
	}
	return string(args)
}

// imageTypes are the image types both APIs take (a GIF only when it is
// not animated); other images stand in as a line (providers.StandIn).
var imageTypes = []string{"image/png", "image/jpeg", "image/webp", "image/gif"}

// dataURL is an image part's bytes as the data: URL both APIs take.
func dataURL(p core.Part) string {
	return "data:" + p.MIME + ";base64," + base64.StdEncoding.EncodeToString(p.Data)
}
