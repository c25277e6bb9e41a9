// Package netguard is the HTTP client of code that may reach only the
// hosts its plugin permissions name: the WASM host's http functions and
// the built-in model providers use it.
//
// The client has its own transport (never the default one, never an
// environment proxy). Its dialer checks the host against the permissions,
// resolves it, checks every address with AllowsResolvedAddr and dials only
// the addresses allowed — so DNS cannot point a permitted name at the local
// network — and every redirect hop is checked before it is followed.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kilnhq/kiln/plugins"
)

// MaxRedirects is how many redirects a client follows.
const MaxRedirects = 10

// ErrDenied is wrapped by every refusal of a network permission.
var ErrDenied = errors.New("not permitted by permissions.network")

// NewClient returns a client that reaches only what perms allow.
func NewClient(perms plugins.Permissions) *http.Client {
	d := &dialer{perms: perms, resolver: net.DefaultResolver}
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
			if len(via) >= MaxRedirects {
				return fmt.Errorf("stopped after %d redirects", MaxRedirects)
			}
			if err := CheckURL(perms, req.URL); err != nil {
				return fmt.Errorf("redirect to %s refused: %w", req.URL.Redacted(), err)
			}
			return nil
		},
	}
}

// CheckURL checks a URL's scheme and host:port against the permissions.
func CheckURL(perms plugins.Permissions, u *url.URL) error {
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
		return fmt.Errorf("%s: %w", net.JoinHostPort(host, strconv.Itoa(port)), ErrDenied)
	}
	return nil
}

// DialerExcept returns a dial function (net.Dialer.DialContext's shape)
// that connects only where perms allow and deny does not match, with the
// checks of NewClient's transport: the host:port against AllowsHost, then
// every address a name resolves to against AllowsResolvedAddr; deny's
// network patterns refuse the host:port as named and each address a name
// resolves to (so a deny rule of an address holds for every name that
// leads there). A refusal wraps ErrDenied; any other error is the
// resolver's or the dial's.
func DialerExcept(perms, deny plugins.Permissions) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &dialer{perms: perms, deny: deny, resolver: net.DefaultResolver}
	return d.DialContext
}

// dialer dials only what the permissions allow and deny does not match.
type dialer struct {
	perms    plugins.Permissions
	deny     plugins.Permissions
	resolver *net.Resolver
	dialer   net.Dialer
}

func (d *dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("bad port %q", portStr)
	}
	if !d.perms.AllowsHost(host, port) {
		return nil, fmt.Errorf("%s: %w", addr, ErrDenied)
	}
	if d.deny.AllowsHost(host, port) {
		return nil, fmt.Errorf("%s matches a deny rule: %w", addr, ErrDenied)
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
		if d.deny.AllowsHost(a.Unmap().String(), port) {
			return nil, fmt.Errorf("%s resolves to %v, which matches a deny rule: %w", addr, a, ErrDenied)
		}
		if d.perms.AllowsResolvedAddr(a, port) {
			allowed = append(allowed, a.Unmap())
		} else {
			refused = append(refused, a)
		}
	}
	if len(allowed) == 0 {
		return nil, fmt.Errorf("%s resolves to %v: %w (a loopback, private or other non-public address must be listed itself)", addr, refused, ErrDenied)
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
