package bedrock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
)

// ID is the provider's id in model references ("bedrock:<model>").
const ID = "bedrock"

// DefaultRegion is the region used when Settings.Extra["region"] is empty.
const DefaultRegion = "us-west-2"

// maxResponse bounds a non-streamed JSON response (a /converse answer or
// the model list).
const maxResponse = 16 << 20

// Provider speaks Amazon Bedrock's Converse API.
type Provider struct {
	runtime *url.URL // https://bedrock-runtime.{region}.amazonaws.com, or BaseURL
	control *url.URL // https://bedrock.{region}.amazonaws.com, or BaseURL
	client  *http.Client
	auth    *auth
}

// New makes the provider from its settings (see the package doc). It
// fails only on a malformed BaseURL or region; credentials are checked on
// first use.
func New(s providers.Settings) (providers.Provider, error) {
	return newProvider(s)
}

func newProvider(s providers.Settings) (*Provider, error) {
	region := s.Extra["region"]
	if region == "" {
		region = DefaultRegion
	}
	if strings.ContainsAny(region, "/:@?#. ") {
		return nil, fmt.Errorf("bedrock: bad region %q", region)
	}
	p := &Provider{client: s.Client(), auth: newAuth(s, region)}
	var err error
	if s.BaseURL != "" {
		if p.runtime, err = url.Parse(strings.TrimRight(s.BaseURL, "/")); err != nil || p.runtime.Host == "" {
			return nil, fmt.Errorf("bedrock: bad base URL %q", s.BaseURL)
		}
		p.control = p.runtime
	} else {
		p.runtime = &url.URL{Scheme: "https", Host: "bedrock-runtime." + region + ".amazonaws.com"}
		p.control = &url.URL{Scheme: "https", Host: "bedrock." + region + ".amazonaws.com"}
	}
	return p, nil
}

// endpoint returns base with the path segments appended, each escaped as
// AWS escapes a URI label (a model ID's ':' and an ARN's '/' included).
func endpoint(base *url.URL, query url.Values, segments ...string) *url.URL {
	u := *base
	path, raw := strings.TrimSuffix(base.Path, "/"), strings.TrimSuffix(base.EscapedPath(), "/")
	for _, s := range segments {
		path += "/" + s
		raw += "/" + escapeLabel(s)
	}
	u.Path, u.RawPath, u.RawQuery = path, raw, query.Encode()
	return &u
}

// escapeLabel percent-encodes everything but RFC 3986's unreserved
// characters.
func escapeLabel(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// do sends an authorised request and returns a 2xx response; any other
// status is a classified *providers.Error, a transport failure
// providers.TransportError.
func (p *Provider) do(ctx context.Context, method string, u *url.URL, body []byte, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("bedrock: %w", err)
	}
	req.Header.Set("Accept", accept)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if err := p.auth.authorize(ctx, req, body); err != nil {
		return nil, err
	}
	return providers.Do(ctx, p.client, ID, req, httpError)
}

// Turn runs one Converse turn of model (a model ID, inference profile ID
// or ARN), streamed through /converse-stream. A model that Bedrock says
// cannot stream (with tools) is asked again through /converse, whose
// whole text then reaches delta at once.
func (p *Provider) Turn(ctx context.Context, model string, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	names := providers.NewToolNames(req.Tools, req.Messages)
	body, err := json.Marshal(buildRequest(req, names))
	if err != nil {
		return core.ModelResponse{}, fmt.Errorf("bedrock: encode request: %w", err)
	}
	resp, err := p.do(ctx, http.MethodPost, endpoint(p.runtime, nil, "model", model, "converse-stream"), body, "application/vnd.amazon.eventstream")
	if cannotStream(err) {
		return p.converse(ctx, model, body, names, delta)
	}
	if err != nil {
		return core.ModelResponse{}, err
	}
	defer resp.Body.Close()
	out, err := readStream(resp.Body, names, delta)
	if err != nil {
		if ctx.Err() != nil {
			return core.ModelResponse{}, ctx.Err()
		}
		var pe *providers.Error
		if !errors.As(err, &pe) {
			return core.ModelResponse{}, providers.TransportError(ctx, ID, err)
		}
	}
	return out, err
}

// cannotStream reports whether err is Bedrock refusing to stream this
// model or this model with tools ("This model doesn't support tool use in
// streaming mode.", "The model is unsupported for streaming.").
func cannotStream(err error) bool {
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Status != http.StatusBadRequest || !strings.HasPrefix(pe.Message, "ValidationException") {
		return false
	}
	m := strings.ToLower(pe.Message)
	return strings.Contains(m, "streaming") && (strings.Contains(m, "support") || strings.Contains(m, "unsupported"))
}

// converseResponse is the /converse answer (the fields Kiln uses).
type converseResponse struct {
	Output struct {
		Message struct {
			Content []struct {
				Text    string `json:"text"`
				ToolUse *struct {
					ToolUseID string          `json:"toolUseId"`
					Name      string          `json:"name"`
					Input     json.RawMessage `json:"input"`
				} `json:"toolUse"`
			} `json:"content"`
		} `json:"message"`
	} `json:"output"`
	StopReason string `json:"stopReason"`
	Usage      usage  `json:"usage"`
}

// converse runs the turn through the non-streaming /converse.
func (p *Provider) converse(ctx context.Context, model string, body []byte, names *providers.ToolNames, delta func(string)) (core.ModelResponse, error) {
	resp, err := p.do(ctx, http.MethodPost, endpoint(p.runtime, nil, "model", model, "converse"), body, "application/json")
	if err != nil {
		return core.ModelResponse{}, err
	}
	var cr converseResponse
	if err := decodeJSON(ctx, resp, &cr); err != nil {
		return core.ModelResponse{}, err
	}
	out := core.ModelResponse{Usage: core.Usage{InputTokens: cr.Usage.InputTokens, OutputTokens: cr.Usage.OutputTokens}}
	var text strings.Builder
	for _, b := range cr.Output.Message.Content {
		text.WriteString(b.Text)
		if tu := b.ToolUse; tu != nil {
			args, err := callArgs(string(tu.Input), cr.StopReason)
			if err != nil {
				return core.ModelResponse{}, err
			}
			out.ToolCalls = append(out.ToolCalls, core.ToolCall{ID: tu.ToolUseID, Name: names.Kiln(tu.Name), Args: args})
		}
	}
	out.Text = text.String()
	if out.Text != "" && delta != nil {
		delta(out.Text)
	}
	return out, nil
}

// decodeJSON reads a 2xx JSON response into v and closes it.
func decodeJSON(ctx context.Context, resp *http.Response, v any) error {
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return providers.TransportError(ctx, ID, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return &providers.Error{Provider: ID, Kind: providers.KindUnavailable, Status: resp.StatusCode, Message: "unreadable response: " + err.Error()}
	}
	return nil
}

// Models lists the foundation models of the region that answer in text
// and can stream, live from ListFoundationModels, sorted by ID. Models that
// only run through a cross-region inference profile are listed by their
// model ID; Turn takes the profile ID ("us.<model>") as well.
func (p *Provider) Models(ctx context.Context) ([]providers.ModelInfo, error) {
	resp, err := p.do(ctx, http.MethodGet, endpoint(p.control, url.Values{"byOutputModality": {"TEXT"}}, "foundation-models"), nil, "application/json")
	if err != nil {
		return nil, err
	}
	var list struct {
		ModelSummaries []struct {
			ModelID                    string   `json:"modelId"`
			ModelName                  string   `json:"modelName"`
			ProviderName               string   `json:"providerName"`
			OutputModalities           []string `json:"outputModalities"`
			ResponseStreamingSupported bool     `json:"responseStreamingSupported"`
		} `json:"modelSummaries"`
	}
	if err := decodeJSON(ctx, resp, &list); err != nil {
		return nil, err
	}
	var out []providers.ModelInfo
	for _, m := range list.ModelSummaries {
		if m.ModelID == "" || !m.ResponseStreamingSupported || !containsFold(m.OutputModalities, "TEXT") {
			continue
		}
		name := m.ModelName
		if m.ProviderName != "" && name != "" {
			name = m.ProviderName + " " + name
		}
		out = append(out, providers.ModelInfo{ID: m.ModelID, Name: name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// Interface guard.
var _ providers.Provider = (*Provider)(nil)
