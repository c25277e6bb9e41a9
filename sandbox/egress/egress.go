// Package egress is the way out of a sandbox in network mode
// sandbox.NetworkEgress, in two halves joined by a unix socket that the
// runtime puts in the sandbox (sandbox.Spec.EgressSocket):
//
//   - Gate, in Kiln, listens on the socket and enforces the sandbox's
//     allowlist: each connection on it opens with one HTTP CONNECT
//     request naming host:port; Kiln checks it against the allowlist
//     (the syntax and checks of a plugin's permissions.network, through
//     plugins/netguard, so a name that resolves to a loopback or private
//     address passes only when that address is listed itself), dials it
//     and answers 200 and then relays bytes both ways, or answers 403
//     (not allowed), 502 (the dial failed) or 400/405 (not a CONNECT of
//     host:port), with a text/plain reason, and closes.
//   - Proxy, in the sandbox (kiln-execd runs it), is an HTTP proxy on the
//     sandbox's own loopback for its programs (HTTP_PROXY, HTTPS_PROXY):
//     a CONNECT (https, or any TCP) and a plain http request in absolute
//     form each become one connection through the socket. Kiln's refusal
//     reaches the program as the proxy's answer.
//
// The sandbox itself has no network interface but loopback, so the
// socket is its only way out, and the policy lives in Kiln: the sandbox
// cannot change it. A target reached through the Gate is dialed from the
// Kiln host, so "127.0.0.1:8080" in an allowlist names the Kiln host's
// loopback, not the sandbox's.
package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/netguard"
)

// headerTimeout bounds the wait for a connection's CONNECT request, and
// dialTimeout the dial of its target.
const (
	headerTimeout = 30 * time.Second
	dialTimeout   = 30 * time.Second
)

// CheckAllow returns an error naming the first entry of allow that is not
// a host[:port] pattern of plugins.Permissions.Network, or nil.
func CheckAllow(allow []string) error {
	for _, a := range allow {
		if err := plugins.CheckNetwork(a); err != nil {
			return fmt.Errorf("egress target %s", err)
		}
	}
	return nil
}

// Gate is Kiln's end of one sandbox's egress socket.
type Gate struct {
	ln   net.Listener
	path string
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	conns  map[net.Conn]bool // true: a sandbox's, counted in n
	n      int
	closed bool
}

// Listen opens the unix socket at path (mode 0666, so that any user in
// the sandbox may use it; removing a stale socket there first) and serves
// it until Close: every connection is checked against allow and then
// deny, both of which CheckAllow must accept: a target allow matches is
// still refused when deny matches it, by name or by an address it
// resolves to (a deny rule carves an exception out of an allow
// wildcard). Refusals are logged to log with the sandbox's attributes the
// caller put on it.
func Listen(path string, allow, deny []string, log *slog.Logger) (*Gate, error) {
	if err := CheckAllow(allow); err != nil {
		return nil, err
	}
	if err := CheckAllow(deny); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("egress: listen: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("egress: listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &Gate{ln: ln, path: path, dial: netguard.DialerExcept(plugins.Permissions{Network: allow}, plugins.Permissions{Network: deny}), log: log,
		ctx: ctx, cancel: cancel, conns: map[net.Conn]bool{}}
	go g.serve()
	return g, nil
}

// Close stops the gate: the socket goes, and the connections through it
// are cut. It is idempotent.
func (g *Gate) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	for c := range g.conns {
		c.Close()
	}
	g.mu.Unlock()
	g.cancel()
	err := g.ln.Close()
	os.Remove(g.path)
	return err
}

// MaxConns is how many connections one gate serves at once; past it a
// connection is refused (503), so that a sandbox cannot spend the
// server's file descriptors.
const MaxConns = 256

// track adds c to the connections Close cuts, or reports why not: the
// gate is closed, or (for a sandbox's connection, capped) it serves
// MaxConns of them already.
func (g *Gate) track(c net.Conn, capped bool) (ok, full bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false, false
	}
	if capped && g.n >= MaxConns {
		return false, true
	}
	g.conns[c] = capped
	if capped {
		g.n++
	}
	return true, false
}

func (g *Gate) untrack(c net.Conn) {
	g.mu.Lock()
	if g.conns[c] {
		g.n--
	}
	delete(g.conns, c)
	g.mu.Unlock()
	c.Close()
}

func (g *Gate) serve() {
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		ok, full := g.track(c, true)
		if full {
			go func() {
				c.SetWriteDeadline(time.Now().Add(headerTimeout))
				refuse(c, http.StatusServiceUnavailable, fmt.Sprintf("the sandbox has %d connections open through Kiln's proxy, its limit", MaxConns))
				c.Close()
			}()
			continue
		}
		if !ok {
			c.Close()
			return
		}
		go g.handle(c)
	}
}

// handle serves one connection: a CONNECT, then the relay.
func (g *Gate) handle(c net.Conn) {
	defer g.untrack(c)
	c.SetReadDeadline(time.Now().Add(headerTimeout))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		refuse(c, http.StatusBadRequest, "kiln egress: want one CONNECT host:port request")
		return
	}
	c.SetReadDeadline(time.Time{})
	if req.Method != http.MethodConnect {
		refuse(c, http.StatusMethodNotAllowed, "kiln egress: want CONNECT host:port, not "+req.Method)
		return
	}
	target := req.Host
	if _, port, err := net.SplitHostPort(target); err != nil || port == "" {
		refuse(c, http.StatusBadRequest, fmt.Sprintf("kiln egress: CONNECT %q: want host:port", target))
		return
	}
	ctx, cancel := context.WithTimeout(g.ctx, dialTimeout)
	up, err := g.dial(ctx, "tcp", target)
	cancel()
	switch {
	case errors.Is(err, netguard.ErrDenied):
		g.log.Warn("sandbox egress refused", "target", target, "reason", err)
		refuse(c, http.StatusForbidden, fmt.Sprintf("kiln egress: %s is not allowed by the sandbox's networkPolicy", target))
		return
	case err != nil:
		refuse(c, http.StatusBadGateway, fmt.Sprintf("kiln egress: connect to %s: %v", target, err))
		return
	}
	if ok, _ := g.track(up, false); !ok {
		up.Close()
		return
	}
	defer g.untrack(up)
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	relay(c, br, up, up)
}

// refuse answers a request on c with status and a text/plain reason.
func refuse(w io.Writer, status int, reason string) {
	body := reason + "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

// relay copies a's bytes (read through ar, which may hold some already)
// to b and b's (through br) to a, until both directions end; each end is
// half-closed as its source ends.
func relay(a net.Conn, ar io.Reader, b net.Conn, br io.Reader) {
	done := make(chan struct{})
	go func() {
		io.Copy(b, ar)
		closeWrite(b)
		close(done)
	}()
	io.Copy(a, br)
	closeWrite(a)
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		c.Close()
	}
}

// Proxy serves an HTTP proxy on ln (the sandbox's loopback) until ln is
// closed, sending every connection through the egress socket at socket.
// It takes CONNECT host:port (relayed as it is) and plain http requests
// in absolute form (one request per connection, sent on in origin form
// with "Connection: close"); anything else is answered 400. Kiln's
// refusal, and a socket that cannot be reached (502), are the proxy's
// answer.
func Proxy(ln net.Listener, socket string) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go proxyConn(c, socket)
	}
}

func proxyConn(c net.Conn, socket string) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(headerTimeout))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	target, err := targetOf(req)
	if err != nil {
		refuse(c, http.StatusBadRequest, "kiln egress proxy: "+err.Error())
		return
	}
	up, err := net.Dial("unix", socket)
	if err != nil {
		refuse(c, http.StatusBadGateway, "kiln egress proxy: the way out to Kiln is closed: "+err.Error())
		return
	}
	defer up.Close()
	if _, err := fmt.Fprintf(up, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		refuse(c, http.StatusBadGateway, "kiln egress proxy: "+err.Error())
		return
	}
	ubr := bufio.NewReader(up)
	resp, err := http.ReadResponse(ubr, &http.Request{Method: http.MethodConnect})
	if err != nil {
		refuse(c, http.StatusBadGateway, "kiln egress proxy: no answer from Kiln: "+err.Error())
		return
	}
	if resp.StatusCode != http.StatusOK {
		resp.Write(c)
		return
	}
	if req.Method == http.MethodConnect {
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		relay(c, br, up, ubr)
		return
	}
	req.Header.Del("Proxy-Connection")
	req.Header.Del("Proxy-Authorization")
	req.Close = true
	if err := req.Write(up); err != nil {
		return
	}
	io.Copy(c, ubr)
}

// targetOf is the host:port a proxy request is for.
func targetOf(req *http.Request) (string, error) {
	if req.Method == http.MethodConnect {
		if _, port, err := net.SplitHostPort(req.Host); err != nil || port == "" {
			return "", fmt.Errorf("CONNECT %q: want host:port", req.Host)
		}
		return req.Host, nil
	}
	if req.URL.Scheme != "http" || req.URL.Host == "" {
		return "", fmt.Errorf("%s %s: want an absolute http:// URL (use CONNECT for https)", req.Method, req.RequestURI)
	}
	port := req.URL.Port()
	if port == "" {
		port = "80"
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("bad port %q", port)
	}
	return net.JoinHostPort(strings.Trim(req.URL.Hostname(), "[]"), port), nil
}
