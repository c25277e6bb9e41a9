package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kilnhq/kiln/plugins"
)

// Limits of http_request (http_open's are in stream.go).
const (
	MaxHTTPResponseBody = 4 << 20 // a longer response body is an error
	maxRedirects        = 10
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

// errNetworkDenied is wrapped by every refusal of a network permission.
var errNetworkDenied = errors.New("not permitted by permissions.network")

// newHTTPClient returns the client behind http_request and http_open: its
// own transport (never the default one, never an environment proxy) whose
// dialer checks the host against perms, resolves it, checks every address
// with AllowsResolvedAddr and dials only the addresses allowed — so DNS
// cannot point a permitted name at the local network — and which checks
// every redirect hop before following it.
func newHTTPClient(perms plugins.Permissions) *http.Client {
	d := &guardedDialer{perms: perms, resolver: net.DefaultResolver}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          8,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			if err := checkURL(perms, req.URL); err != nil {
				return fmt.Errorf("redirect to %s refused: %w", req.URL.Redacted(), err)
			}
			return nil
		},
	}
}

// checkURL checks a URL's scheme and host:port against the permissions.
func checkURL(perms plugins.Permissions, u *url.URL) error {
	var port int
	switch u.Scheme {
	case "http":
		port = 80
	case "https":
		port = 443
	default:
		return fmt.Errorf("scheme %q: only http and https are supported", u.Scheme)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("bad port %q", p)
		}
		port = n
	}
	host := u.Hostname()
	if !perms.AllowsHost(host, port) {
		return fmt.Errorf("%s: %w", net.JoinHostPort(host, strconv.Itoa(port)), errNetworkDenied)
	}
	return nil
}

// guardedDialer dials only what the permissions allow.
type guardedDialer struct {
	perms    plugins.Permissions
	resolver *net.Resolver
	dialer   net.Dialer
}

func (d *guardedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("bad port %q", portStr)
	}
	if !d.perms.AllowsHost(host, port) {
		return nil, fmt.Errorf("%s: %w", addr, errNetworkDenied)
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		addrs, err = d.resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
	}
	var allowed, refused []netip.Addr
	for _, a := range addrs {
		if d.perms.AllowsResolvedAddr(a, port) {
			allowed = append(allowed, a.Unmap())
		} else {
			refused = append(refused, a)
		}
	}
	if len(allowed) == 0 {
		return nil, fmt.Errorf("%s resolves to %v: %w (a loopback, private or other non-public address must be listed itself)", addr, refused, errNetworkDenied)
	}
	var errs []error
	for _, a := range allowed {
		c, err := d.dialer.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
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
// toolset's client within ctx; the response's body lives as long as ctx.
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
	if err := checkURL(in.ts.perms, u); err != nil {
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
	resp, err = in.ts.client.Do(hr)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, "", fmt.Errorf("%s %s: %w", fn, what, err)
	}
	return resp, what, nil
}
