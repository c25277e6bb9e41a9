package egress_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/sandbox/egress"
)

// hostPort is srv's 127.0.0.1:port.
func hostPort(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// proxyFor runs a Gate allowing allow but deny and a Proxy in front of
// it, and returns the proxy's URL.
func proxyFor(t *testing.T, allow, deny []string) *url.URL {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "egress.sock")
	g, err := egress.Listen(sock, allow, deny, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go egress.Proxy(ln, sock)
	return &url.URL{Scheme: "http", Host: ln.Addr().String()}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestProxyAllowsOnlyTheAllowlist(t *testing.T) {
	hello := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello "+r.URL.Path) }))
	defer hello.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the refused server was reached") }))
	defer other.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "secret") }))
	defer secure.Close()

	proxy := proxyFor(t, []string{hostPort(t, hello), hostPort(t, secure)}, nil)
	tr := secure.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(proxy)
	c := &http.Client{Transport: tr}

	if code, body := get(t, c, hello.URL+"/x"); code != 200 || body != "hello /x" {
		t.Errorf("an allowed http target: %d %q", code, body)
	}
	if code, body := get(t, c, secure.URL); code != 200 || body != "secret" {
		t.Errorf("an allowed https target, through CONNECT: %d %q", code, body)
	}
	if code, body := get(t, c, other.URL); code != 403 || !strings.Contains(body, hostPort(t, other)+" is not allowed by the sandbox's networkPolicy") {
		t.Errorf("another port: %d %q, want 403 naming it", code, body)
	}
	// A CONNECT to a refused target fails the client's request.
	tlsOther := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the refused TLS server was reached") }))
	defer tlsOther.Close()
	if code, body := get(t, c, tlsOther.URL); code != 0 || !strings.Contains(body, "Forbidden") {
		t.Errorf("a refused CONNECT: %d %q", code, body)
	}
	// A name resolving to loopback needs the address listed itself.
	if code, body := get(t, c, "http://localhost:"+strings.Split(hostPort(t, hello), ":")[1]+"/"); code != 403 {
		t.Errorf("localhost for an allowed 127.0.0.1 port: %d %q, want 403", code, body)
	}
}

// TestDenyRules: a deny rule refuses what the allowlist lets through,
// by the name asked for and by the address a name resolves to.
func TestDenyRules(t *testing.T) {
	hello := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") }))
	defer hello.Close()
	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the denied server was reached") }))
	defer denied.Close()
	port := strings.Split(hostPort(t, denied), ":")[1]
	proxy := proxyFor(t, []string{hostPort(t, hello), hostPort(t, denied), "localhost:" + port}, []string{hostPort(t, denied)})
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
	if code, body := get(t, c, hello.URL); code != 200 || body != "hello" {
		t.Errorf("an allowed target: %d %q", code, body)
	}
	for _, u := range []string{denied.URL, "http://localhost:" + port + "/"} {
		if code, body := get(t, c, u); code != 403 {
			t.Errorf("%s, allowed but denied: %d %q, want 403", u, code, body)
		}
	}
	if _, err := egress.Listen(filepath.Join(t.TempDir(), "e.sock"), []string{"127.0.0.1:1"}, []string{"http://x"}, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("a malformed deny rule was taken")
	}
}

func TestGateRefusesWhatIsNotAConnect(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "egress.sock")
	g, err := egress.Listen(sock, []string{"127.0.0.1:1"}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for req, want := range map[string]int{
		"GET http://127.0.0.1:1/ HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n": 405,
		"CONNECT 127.0.0.1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n":         400,
		"not http at all\r\n\r\n":                                       400,
	} {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != want {
			t.Errorf("%q: %v %v, want %d", req, resp, err, want)
		}
		c.Close()
	}
	g.Close()
	if _, err := net.Dial("unix", sock); err == nil {
		t.Error("the socket answers after Close")
	}
	if err := g.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

func TestCheckAllow(t *testing.T) {
	if err := egress.CheckAllow([]string{"api.example.com", "*.example.org:8443", "127.0.0.1:8080"}); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"https://api.example.com", "api.example.com/v1", "*", "a b", "0.0.0.0:80"} {
		if err := egress.CheckAllow([]string{bad}); err == nil {
			t.Errorf("CheckAllow(%q) = nil", bad)
		}
	}
	if _, err := egress.Listen(filepath.Join(t.TempDir(), "s"), []string{"bad/path"}, nil, slog.Default()); err == nil {
		t.Error("Listen took a malformed target")
	}
}

// TestGateCapsConnections: past MaxConns connections at once a sandbox's
// next is refused with 503, and one closing makes room again.
func TestGateCapsConnections(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "egress.sock")
	g, err := egress.Listen(sock, []string{"127.0.0.1"}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	dial := func() net.Conn {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// Connections that have not sent their CONNECT yet hold a place.
	var open []net.Conn
	for range egress.MaxConns {
		open = append(open, dial())
	}
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	// The accept loop may not have tracked the last ones yet: the
	// refusal comes once it has.
	var status string
	for try := 0; try < 100 && !strings.Contains(status, " 503 "); try++ {
		c := dial()
		fmt.Fprintf(c, "CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n")
		status, _ = bufio.NewReader(c).ReadString('\n')
		c.Close()
	}
	if !strings.Contains(status, " 503 ") {
		t.Fatalf("connection %d got %q, want 503", egress.MaxConns+1, status)
	}
	open[0].Close()
	open = open[1:]
	var after string
	for try := 0; try < 100; try++ {
		c := dial()
		fmt.Fprintf(c, "CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n")
		after, _ = bufio.NewReader(c).ReadString('\n')
		c.Close()
		if !strings.Contains(after, " 503 ") {
			break
		}
	}
	if strings.Contains(after, " 503 ") || after == "" {
		t.Fatalf("after one closed: %q, want the CONNECT served (an error dialling port 1, not 503)", after)
	}
}
