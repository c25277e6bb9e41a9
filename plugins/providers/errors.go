package providers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kilnhq/kiln/core"
)

// Kind classifies a provider failure.
type Kind string

// Kinds, in the words the user sees.
const (
	KindAuth          Kind = "auth"           // bad or missing credentials, or no access to the model
	KindRateLimit     Kind = "rate_limit"     // too many requests or tokens; retried after retry-after
	KindContextLength Kind = "context_length" // the conversation is too long for the model
	KindUnavailable   Kind = "unavailable"    // the API is down or overloaded; retried
	KindTimeout       Kind = "timeout"        // no answer in time; retried
	KindBadRequest    Kind = "bad_request"    // the API refused the request (unknown model, bad tool schema, ...)
)

// Error is a classified provider failure.
type Error struct {
	Provider string
	Kind     Kind
	// Status is the HTTP status, or 0.
	Status int
	// RetryAfter is what the API asked to wait, or 0.
	RetryAfter time.Duration
	// Message is the API's own message, if any.
	Message string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Provider)
	b.WriteString(": ")
	b.WriteString(kindText[e.Kind])
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

var kindText = map[Kind]string{
	KindAuth:          "authentication failed: check the API key and that it may use this model",
	KindRateLimit:     "rate limited",
	KindContextLength: "the conversation is too long for the model's context window",
	KindUnavailable:   "the API is unavailable",
	KindTimeout:       "the API did not answer in time",
	KindBadRequest:    "the API refused the request",
}

// Retryable reports whether trying again later may succeed.
func (e *Error) Retryable() bool {
	return e.Kind == KindRateLimit || e.Kind == KindUnavailable || e.Kind == KindTimeout
}

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// HTTPError classifies a non-2xx response: by status, then by the body's
// wording for context-length errors (which APIs report as 400 or 413), with
// retry-after honoured (seconds or an HTTP date). message extracts the
// API's message from the body (nil: the body, trimmed). It reads and
// closes resp.Body.
func HTTPError(provider string, resp *http.Response, message func([]byte) string) *Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	msg := strings.TrimSpace(string(body))
	if message != nil {
		if m := message(body); m != "" {
			msg = m
		}
	}
	if len(msg) > 500 {
		msg = msg[:500] + "…"
	}
	e := &Error{Provider: provider, Status: resp.StatusCode, Message: msg, RetryAfter: RetryAfter(resp.Header)}
	switch s := resp.StatusCode; {
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		e.Kind = KindAuth
	case s == http.StatusTooManyRequests:
		e.Kind = KindRateLimit
	case s == http.StatusRequestTimeout || s == http.StatusGatewayTimeout:
		e.Kind = KindTimeout
	case s >= 500 || s == 529:
		e.Kind = KindUnavailable
	case IsContextLength(msg) || s == http.StatusRequestEntityTooLarge:
		e.Kind = KindContextLength
	default:
		e.Kind = KindBadRequest
	}
	return e
}

// IsContextLength reports whether an API message says the input is too
// long for the model.
func IsContextLength(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{"context length", "context_length", "context window", "maximum context", "too many tokens", "prompt is too long", "input is too long", "exceeds the maximum number of tokens", "token limit"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// RetryAfter reads retry-after (seconds or an HTTP date) and the
// retry-after-ms some APIs send; 0 when absent.
func RetryAfter(h http.Header) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("retry-after-ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := h.Get("retry-after")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// TransportError classifies a failure to get a response at all: a
// deadline is a timeout, anything else (refused connection, reset, a
// refused host) the API being unavailable. A cancelled ctx is returned as
// is.
func TransportError(ctx context.Context, provider string, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	kind := KindUnavailable
	var ne interface{ Timeout() bool }
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		kind = KindTimeout
	}
	return &Error{Provider: provider, Kind: kind, Message: err.Error()}
}

// RetryPolicy bounds Retry.
type RetryPolicy struct {
	Attempts int           // total attempts, at least 1; default 4
	Base     time.Duration // first backoff; default 1s
	Max      time.Duration // largest single wait; default 30s
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Attempts < 1 {
		p.Attempts = 4
	}
	if p.Base <= 0 {
		p.Base = time.Second
	}
	if p.Max < p.Base {
		p.Max = max(30*time.Second, p.Base)
	}
	return p
}

// Retry wraps p so that a turn failing with a retryable *Error before any
// text was streamed is tried again, after the API's retry-after or a
// jittered exponential backoff. Once text has reached delta the failure is
// returned: the engine's checkpoint makes the whole turn safe to redo, but
// the user has already seen part of it.
func Retry(p Provider, policy RetryPolicy) Provider {
	return retrying{p, policy.withDefaults()}
}

type retrying struct {
	Provider
	policy RetryPolicy
}

func (r retrying) Turn(ctx context.Context, model string, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	for attempt := 1; ; attempt++ {
		streamed := false
		d := delta
		if delta != nil {
			d = func(s string) { streamed = true; delta(s) }
		}
		resp, err := r.Provider.Turn(ctx, model, req, d)
		var pe *Error
		if err == nil || streamed || attempt >= r.policy.Attempts || !errors.As(err, &pe) || !pe.Retryable() {
			return resp, err
		}
		wait := pe.RetryAfter
		if wait <= 0 {
			wait = r.policy.Base << (attempt - 1)
			wait = wait/2 + rand.N(wait/2+1) // jitter: half to full
		}
		wait = min(wait, r.policy.Max)
		select {
		case <-ctx.Done():
			return core.ModelResponse{}, ctx.Err()
		case <-time.After(wait):
		}
	}
}
