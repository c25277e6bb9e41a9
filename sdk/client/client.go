package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kilnhq/kiln/core"
)

// DefaultURL is the address a local `kiln serve` listens on.
const DefaultURL = "http://127.0.0.1:8420"

// apiPrefix is the path of the versioned API below the server root.
const apiPrefix = "/api/v1"

// Client calls the HTTP API of a Kiln server. It is safe for concurrent use.
type Client struct {
	root      string // server root URL without a trailing slash
	token     string
	http      *http.Client
	userAgent string
}

// Option configures a Client.
type Option func(*Client)

// WithToken authenticates every request with "Authorization: Bearer token".
// An empty token sends no Authorization header.
func WithToken(token string) Option {
	return func(c *Client) { c.token = token }
}

// WithHTTPClient makes the Client send its requests through hc. The client
// must not set a Timeout: event streams are long-lived and every call takes
// a context for cancellation instead.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = hc
		}
	}
}

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// New returns a Client for the Kiln server at baseURL, the server's root
// such as DefaultURL or "https://kiln.example.com/prefix" (not its /api/v1
// path). It fails only when baseURL is not an absolute http or https URL.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("invalid server URL %q: want http(s)://host[:port][/path]", baseURL)
	}
	c := &Client{root: u.String(), http: &http.Client{}, userAgent: "kiln-go-sdk"}
	for _, opt := range opts {
		opt(c)
	}
	return c, nil
}

// Error is an error response of the Kiln API: the HTTP status, the
// machine-readable code of the error body ("not_found", "conflict", ...;
// the sandbox API's are OpenSandbox's, such as "SANDBOX::NOT_FOUND")
// and its message, written to be shown to users. When something other than
// a Kiln server answered, such as a proxy, Code is empty and Message holds
// what it said, if it was short text.
type Error struct {
	Status  int
	Code    string
	Message string

	retryAfter time.Duration // from a Retry-After header of a 429 or 503
}

// Error returns the server's message, which is meant to be shown to users.
func (e *Error) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status))
}

// As makes an error a Kiln server answered (one with a Code) a
// *core.Error with the same code and message, so errors.As and
// core.ErrorMessage treat an error relayed through the SDK as the core's
// own: what `kiln mcp` answers is what /mcp answers.
func (e *Error) As(target any) bool {
	t, ok := target.(**core.Error)
	if !ok || e.Code == "" {
		return false
	}
	*t = &core.Error{Code: e.Code, Message: e.Message}
	return true
}

func hasStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}

// IsInvalid reports whether err is an API error for a malformed request (400).
func IsInvalid(err error) bool { return hasStatus(err, http.StatusBadRequest) }

// IsUnauthorized reports whether err is an API error for a missing or wrong token (401).
func IsUnauthorized(err error) bool { return hasStatus(err, http.StatusUnauthorized) }

// IsForbidden reports whether err is an API error for a forbidden operation (403).
func IsForbidden(err error) bool { return hasStatus(err, http.StatusForbidden) }

// IsNotFound reports whether err is an API error for an object that does not exist (404).
func IsNotFound(err error) bool { return hasStatus(err, http.StatusNotFound) }

// IsConflict reports whether err is an API error for an object whose state
// forbids the operation (409), such as cancelling a finished run.
func IsConflict(err error) bool { return hasStatus(err, http.StatusConflict) }

// IsTooLarge reports whether err is an API error for a request body or an
// upload over the server's limit (413).
func IsTooLarge(err error) bool { return hasStatus(err, http.StatusRequestEntityTooLarge) }

// IsUnsupportedMedia reports whether err is an API error for content of a
// type the server does not take (415), such as an attachment that is
// neither an image nor text.
func IsUnsupportedMedia(err error) bool { return hasStatus(err, http.StatusUnsupportedMediaType) }

// IsNotImplemented reports whether err is an API error for what the
// server, or a sandbox's runtime, does not do (501), such as pausing a
// wasm sandbox.
func IsNotImplemented(err error) bool { return hasStatus(err, http.StatusNotImplemented) }

// IsRateLimited reports whether err is an API error for a reached limit (429).
func IsRateLimited(err error) bool { return hasStatus(err, http.StatusTooManyRequests) }

// IsUnavailable reports whether err is an API error for a server that is
// starting or shutting down (503).
func IsUnavailable(err error) bool { return hasStatus(err, http.StatusServiceUnavailable) }

// retryable reports whether a request that failed with err may succeed when
// repeated: network errors, 429 and 5xx responses.
func retryable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Status == http.StatusTooManyRequests || e.Status >= 500
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// responseError reads an error response into an *Error: Kiln's API
// nests {code, message} under "error", the sandbox API (OpenSandbox's
// format) has them at the top level.
func responseError(resp *http.Response) *Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &Error{Status: resp.StatusCode}
	var envelope struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	jsonErr := json.Unmarshal(body, &envelope)
	if jsonErr == nil && envelope.Error.Code != "" {
		e.Code, e.Message = envelope.Error.Code, envelope.Error.Message
	} else if jsonErr == nil && envelope.Code != "" && envelope.Message != "" {
		e.Code, e.Message = envelope.Code, envelope.Message
	} else if text := strings.TrimSpace(string(body)); text != "" && !strings.HasPrefix(text, "<") {
		e.Message = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, truncate(text, 200))
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			e.retryAfter = time.Duration(s) * time.Second
		}
	}
	return e
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// newRequest builds a request for path (below the server root, already
// escaped) with query parameters.
func (c *Client) newRequest(ctx context.Context, method, path string, query url.Values, body io.Reader) (*http.Request, error) {
	u := c.root + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	return req, nil
}

// do sends a JSON API request: in (when not nil) is the JSON body and out
// (when not nil) receives the decoded JSON response.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := c.newRequest(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.send(req, out)
}

// send sends req and decodes the JSON response into out (when not nil).
func (c *Client) send(req *http.Request, out any) error {
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return responseError(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decoding response: %w", req.Method, req.URL.EscapedPath(), err)
	}
	return nil
}

// pathID escapes id for use as a path segment; an empty id is an error
// rather than a request to the collection.
func pathID(kind, id string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("empty %s id", kind)
	}
	return url.PathEscape(id), nil
}
