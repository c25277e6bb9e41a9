// Package ollama is the "ollama" model provider: it speaks Ollama's native
// API (POST /api/chat, streamed as NDJSON; GET /api/tags) to a local or
// remote Ollama server, or to a proxy in front of one.
//
// Ollama needs no API key. When Settings.APIKey is set (ollama.com's API,
// or an authenticating proxy) it is sent as a Bearer token. The base URL
// is Settings.BaseURL, normalized by BaseURL so that the forms OLLAMA_HOST
// accepts ("host:port", "host", "https://host") all work.
package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kilnhq/kiln/plugins/providers"
)

// ID is the provider's id, the "ollama" of "ollama:llama3.2".
const ID = "ollama"

// defaultPort is the port Ollama listens on.
const defaultPort = "11434"

// DefaultBaseURL is where a local Ollama server answers.
const DefaultBaseURL = "http://127.0.0.1:" + defaultPort

// BaseURL turns an OLLAMA_HOST value into a base URL, the way Ollama's own
// client reads it: "" is DefaultBaseURL; without a scheme the value is a
// host or host:port reached over http, on port 11434 when no port is given
// ("ollama.com" alone means https://ollama.com); with a scheme (http or
// https) the scheme, host, port (the scheme's default when absent) and any
// path prefix are kept. An unspecified address such as 0.0.0.0 or [::],
// which a server binds but a client cannot reach, becomes the loopback
// address. The result has no trailing slash.
func BaseURL(ollamaHost string) string {
	s := strings.TrimSpace(ollamaHost)
	if s == "" {
		return DefaultBaseURL
	}
	scheme, rest, hasScheme := strings.Cut(s, "://")
	if !hasScheme {
		scheme, rest = "http", s
		if s == "ollama.com" {
			return "https://ollama.com"
		}
	}
	scheme = strings.ToLower(scheme)
	hostport, path, _ := strings.Cut(rest, "/")
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		// No port: hostport is a bare name or IP address (IPv6 possibly
		// in brackets).
		host, port = strings.Trim(hostport, "[]"), ""
		if !hasScheme {
			port = defaultPort
		}
	}
	if n, err := strconv.Atoi(port); port != "" && (err != nil || n < 0 || n > 65535) {
		port = "" // an invalid port: the default
		if !hasScheme {
			port = defaultPort
		}
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if ip.To4() != nil {
			host = "127.0.0.1"
		} else {
			host = "::1"
		}
	}
	if host == "" {
		host = "127.0.0.1"
	}
	u := scheme + "://"
	switch {
	case port != "":
		u += net.JoinHostPort(host, port)
	case strings.Contains(host, ":"):
		u += "[" + host + "]"
	default:
		u += host
	}
	if path = strings.Trim(path, "/"); path != "" {
		u += "/" + path
	}
	return u
}

// New returns the Ollama provider. Settings.BaseURL is normalized with
// BaseURL ("" is DefaultBaseURL); Settings.Extra is not used.
func New(s providers.Settings) (providers.Provider, error) {
	return &provider{base: BaseURL(s.BaseURL), key: s.APIKey, http: s.Client()}, nil
}

type provider struct {
	base string
	key  string
	http *http.Client
}

// newRequest makes a request to path under the base URL with the headers
// every call sends.
func (p *provider) newRequest(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	r, err := http.NewRequestWithContext(ctx, method, p.base+path, rd)
	if err != nil {
		return nil, &providers.Error{Provider: ID, Kind: providers.KindBadRequest, Message: err.Error()}
	}
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	if p.key != "" {
		r.Header.Set("Authorization", "Bearer "+p.key)
	}
	return r, nil
}

// httpError classifies a non-2xx response, its message from errorMessage.
func httpError(resp *http.Response) *providers.Error {
	return providers.HTTPError(ID, resp, errorMessage)
}

// errorMessage extracts the message from an error body: Ollama's
// {"error":"..."}, or the {"error":{"message":"..."}} a proxy in front of
// it may send; "" when the body is neither. The sign-in link Ollama adds
// to a 401 for a cloud model is kept in the message.
func errorMessage(body []byte) string {
	var e struct {
		Error     json.RawMessage `json:"error"`
		SigninURL string          `json:"signin_url"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	msg := errorText(e.Error)
	if msg != "" && e.SigninURL != "" {
		msg += " (sign in to ollama.com: run `ollama signin` or open " + e.SigninURL + ")"
	}
	return msg
}

// errorText reads an "error" value: a string, or an object's "message".
func errorText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &o) == nil {
		return o.Message
	}
	return ""
}

// tagsResponse is the body of GET /api/tags.
type tagsResponse struct {
	Models []struct {
		Name    string `json:"name"`
		Model   string `json:"model"`
		Details struct {
			Family            string `json:"family"`
			ParameterSize     string `json:"parameter_size"`
			QuantizationLevel string `json:"quantization_level"`
			ContextLength     int    `json:"context_length"`
		} `json:"details"`
		// Capabilities is sent by recent servers ("completion", "tools",
		// "embedding", ...); absent, nothing is known.
		Capabilities []string `json:"capabilities"`
	} `json:"models"`
}

// Models lists the models pulled on the server (GET /api/tags), in the
// server's order, leaving out those that cannot chat (embedding models,
// when the server reports capabilities). A model's Name adds its
// parameter size and quantization to its ID; ContextSize is the model's
// trained context length when the server reports it.
func (p *provider) Models(ctx context.Context) ([]providers.ModelInfo, error) {
	req, err := p.newRequest(ctx, http.MethodGet, "/api/tags", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := providers.Do(ctx, p.http, ID, req, httpError)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var tags tagsResponse
	if err := json.NewDecoder(resp.Body).Decode(&tags); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &providers.Error{Provider: ID, Kind: providers.KindUnavailable, Status: resp.StatusCode, Message: "reading the model list: " + err.Error()}
	}
	out := make([]providers.ModelInfo, 0, len(tags.Models))
	for _, m := range tags.Models {
		id := m.Name
		if id == "" {
			id = m.Model
		}
		if id == "" || len(m.Capabilities) > 0 && !slices.Contains(m.Capabilities, "completion") {
			continue
		}
		name := id
		var about []string
		for _, s := range []string{m.Details.ParameterSize, m.Details.QuantizationLevel} {
			if s != "" {
				about = append(about, s)
			}
		}
		if len(about) > 0 {
			name = fmt.Sprintf("%s (%s)", id, strings.Join(about, ", "))
		}
		out = append(out, providers.ModelInfo{ID: id, Name: name, ContextSize: m.Details.ContextLength})
	}
	return out, nil
}

// maxCheckBody bounds how much of GET /api/tags Check reads.
const maxCheckBody = 4 << 20

// Check reports whether an Ollama server answers at the base URL, for the
// host to tell a stopped Ollama from a ready one: GET /api/tags, which
// every Ollama (and a proxy in front of one) serves, must answer 2xx with
// a model list. The error says in plain words what is wrong, for the
// user: "cannot reach Ollama at http://127.0.0.1:11434: connection
// refused (is it running? 'ollama serve' starts it)", the HTTP status it
// answered with, or that what answers is not Ollama.
func (p *provider) Check(ctx context.Context) error {
	var limit time.Duration
	if dl, ok := ctx.Deadline(); ok {
		limit = time.Until(dl)
	}
	req, err := p.newRequest(ctx, http.MethodGet, "/api/tags", nil)
	if err != nil {
		return fmt.Errorf("cannot reach Ollama at %s: %v", p.base, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach Ollama at %s: %s", p.base, reachFailure(err, limit))
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := httpError(resp)
		msg := fmt.Sprintf("the Ollama server at %s answered HTTP %d", p.base, resp.StatusCode)
		if e.Kind == providers.KindAuth {
			msg += " (check the api_key setting)"
		}
		if e.Message != "" {
			msg += ": " + e.Message
		}
		return errors.New(msg)
	}
	var tags struct {
		Models json.RawMessage `json:"models"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxCheckBody)).Decode(&tags); err != nil || len(tags.Models) == 0 || tags.Models[0] != '[' {
		return fmt.Errorf("what answers at %s is not Ollama: GET /api/tags gave no model list (check the base_url setting)", p.base)
	}
	return nil
}

// reachFailure says in a few words why a request got no response at all;
// limit is how long it was allowed (0 when unknown).
func reachFailure(err error, limit time.Duration) string {
	var dnsErr *net.DNSError
	var timeout interface{ Timeout() bool }
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused (is it running? 'ollama serve' starts it)"
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return "no such host " + dnsErr.Name
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &timeout) && timeout.Timeout():
		if limit > 0 {
			return fmt.Sprintf("no answer within %s", limit.Round(100*time.Millisecond))
		}
		return "no answer in time"
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err // without the method and URL, said by the caller
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		err = opErr.Err // without "dial tcp <addr>:"
	}
	return err.Error()
}

// Interface guards.
var (
	_ providers.Provider = (*provider)(nil)
	_ interface {
		Check(context.Context) error
	} = (*provider)(nil) // hub.Checker, which this package does not import
)
