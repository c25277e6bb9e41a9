package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kilnhq/kiln/plugins/providers"
)

// apiError is the error object of an OpenAI-style error body
// ({"error": {...}}) or in-stream error. OpenAI names the error in code
// and type ("context_length_exceeded", "invalid_request_error"); OpenRouter
// puts the HTTP status in code (a number) and its own name in
// metadata.error_type, and the upstream provider's message in metadata.raw.
type apiError struct {
	Message  string          `json:"message"`
	Type     string          `json:"type"`
	Code     json.RawMessage `json:"code"`
	Metadata struct {
		ErrorType string          `json:"error_type"`
		Raw       json.RawMessage `json:"raw"`
	} `json:"metadata"`
}

// parseAPIError reads an error object, or an error given as a bare string
// as some compatible servers send it; ok is false when raw is neither.
func parseAPIError(raw json.RawMessage) (e apiError, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return e, false
	}
	if raw[0] == '"' {
		return e, json.Unmarshal(raw, &e.Message) == nil
	}
	return e, json.Unmarshal(raw, &e) == nil && raw[0] == '{'
}

// text is the error's message, with the upstream provider's own message
// when OpenRouter passes one on.
func (e apiError) text() string {
	var raw string
	if json.Unmarshal(e.Metadata.Raw, &raw) == nil && raw != "" && raw != e.Message {
		if e.Message == "" {
			return raw
		}
		return e.Message + ": " + raw
	}
	return e.Message
}

// status is the HTTP status a numeric code gives (OpenRouter), or 0.
func (e apiError) status() int {
	n, err := strconv.Atoi(string(e.Code))
	if err != nil || n < 100 || n > 599 {
		return 0
	}
	return n
}

// kindByName classifies the API's own names for errors. The status of a
// response says less: OpenAI answers 429 both for a rate limit (retry
// later) and for an exhausted quota (retrying cannot help).
var kindByName = map[string]providers.Kind{
	"context_length_exceeded": providers.KindContextLength,
	"rate_limit_exceeded":     providers.KindRateLimit,
	"insufficient_quota":      providers.KindBadRequest,
	"payment_required":        providers.KindBadRequest,
	"invalid_api_key":         providers.KindAuth,
	"authentication":          providers.KindAuth,
	"permission_denied":       providers.KindAuth,
	"server_error":            providers.KindUnavailable,
	"server":                  providers.KindUnavailable,
	"provider_overloaded":     providers.KindUnavailable,
	"provider_unavailable":    providers.KindUnavailable,
	"timeout":                 providers.KindTimeout,
}

// kind classifies e by its code, then OpenRouter's error_type, then its
// type; ok is false when none of them is a known name.
func (e apiError) kind() (k providers.Kind, ok bool) {
	var code string
	json.Unmarshal(e.Code, &code)
	for _, name := range []string{code, e.Metadata.ErrorType, e.Type} {
		if k, ok := kindByName[name]; ok {
			return k, true
		}
	}
	return "", false
}

// httpError classifies a non-2xx response (reading and closing its body).
func httpError(provider string, resp *http.Response) *providers.Error {
	var ae apiError
	e := providers.HTTPError(provider, resp, func(body []byte) string {
		var b struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(body, &b) == nil {
			ae, _ = parseAPIError(b.Error)
		}
		return ae.text()
	})
	if k, ok := ae.kind(); ok {
		e.Kind = k
	}
	if e.Kind == providers.KindRateLimit && e.RetryAfter == 0 {
		e.RetryAfter = retryHint(e.Message)
	}
	return e
}

// streamError classifies an error that arrived inside a 200 response: by
// the API's names for it, else by the HTTP status OpenRouter gives as its
// code (classified as a response with that status would be), else by its
// wording; an error that says nothing more is the API being unavailable.
func streamError(provider string, ae apiError) *providers.Error {
	e := &providers.Error{Provider: provider, Kind: providers.KindUnavailable, Message: ae.text()}
	if e.Message == "" {
		e.Message = "error in the response stream"
	}
	if k, ok := ae.kind(); ok {
		e.Kind = k
	} else if s := ae.status(); s >= 400 {
		e.Kind = providers.HTTPError(provider, &http.Response{StatusCode: s, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(e.Message))}, nil).Kind
	} else if providers.IsContextLength(e.Message) {
		e.Kind = providers.KindContextLength
	}
	if e.Kind == providers.KindRateLimit {
		e.RetryAfter = retryHint(e.Message)
	}
	return e
}

// tryAgain finds the wait OpenAI writes into rate-limit messages ("Please
// try again in 1.574s.", "... in 174ms.", "... in 6m0s.").
var tryAgain = regexp.MustCompile(`(?i)try again in ((?:\d+(?:\.\d+)?(?:ms|h|m|s))+)`)

// retryHint returns the wait a rate-limit message asks for, or 0.
func retryHint(msg string) time.Duration {
	m := tryAgain.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	d, err := time.ParseDuration(m[1])
	if err != nil || d < 0 {
		return 0
	}
	return d
}
