package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/kilnhq/kiln/plugins/netguard"
)

// Limits of http_request (http_open's are in stream.go).
const (
	MaxHTTPResponseBody = 4 << 20 // a longer response body is an error
)

// httpRequest is the guest's http_request (and http_open) JSON.
type httpRequest struct {
	Method  string              `json:"method"`
	URL     string              `json:"url"`
	Headers map[string][]string `json:"headers"`
	Body    []byte              `json:"body"`
}

// httpResponse is the host's answer.
type httpResponse struct {
	Status  int                 `json:"status"`
	Headers map[string][]string `json:"headers,omitempty"`
	Body    []byte              `json:"body"`
}

// httpRequest serves the http_request host function.
func (in *instance) httpRequest(ctx context.Context, data []byte) (any, error) {
	resp, what, err := in.sendHTTP(ctx, "http_request", data)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxHTTPResponseBody+1))
	if err != nil {
		return nil, fmt.Errorf("http_request %s: read body: %w", what, err)
	}
	if len(body) > MaxHTTPResponseBody {
		return nil, fmt.Errorf("http_request %s: response body is over the %d MiB limit", what, MaxHTTPResponseBody>>20)
	}
	return httpResponse{Status: resp.StatusCode, Headers: resp.Header, Body: body}, nil
}

// sendHTTP decodes a JSON request of the host function fn (http_request,
// http_open), checks it against the permissions and sends it with the
// module's client within ctx; the response's body lives as long as ctx.
// what names the request for error messages ("GET <redacted url>").
func (in *instance) sendHTTP(ctx context.Context, fn string, data []byte) (resp *http.Response, what string, err error) {
	var req httpRequest
	if err := decodeStrict(data, &req); err != nil {
		return nil, "", fmt.Errorf("%s: %w", fn, err)
	}
	if req.Method == "" {
		req.Method = http.MethodGet
	}
	u, err := url.Parse(req.URL)
	if err != nil {
		return nil, "", fmt.Errorf("%s: bad url: %w", fn, err)
	}
	if u.User != nil {
		return nil, "", fmt.Errorf("%s: credentials in the URL are not supported; send an Authorization header", fn)
	}
	// Checked here before anything is resolved or dialed, and again in the
	// dialer and at every redirect.
	if err := netguard.CheckURL(in.m.perms, u); err != nil {
		return nil, "", fmt.Errorf("%s %s: %w", fn, u.Redacted(), err)
	}
	hr, err := http.NewRequestWithContext(ctx, req.Method, u.String(), bytes.NewReader(req.Body))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", fn, err)
	}
	for k, vs := range req.Headers {
		for _, v := range vs {
			hr.Header.Add(k, v)
		}
	}
	what = req.Method + " " + u.Redacted()
	resp, err = in.m.client.Do(hr)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, "", fmt.Errorf("%s %s: %w", fn, what, err)
	}
	return resp, what, nil
}
