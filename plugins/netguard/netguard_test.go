package netguard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/plugins"
)

func TestCheckURL(t *testing.T) {
	perms := plugins.Permissions{Network: []string{"api.example.com", "*.example.org:8443", "127.0.0.1:9000"}}
	for raw, ok := range map[string]bool{
		"https://api.example.com/v1":    true,
		"http://api.example.com":        true,
		"https://api.example.com:8080/": false,
		"https://x.example.org:8443/":   true,
		"https://example.org:8443/":     false,
		"http://127.0.0.1:9000/":        true,
		"http://127.0.0.1:9001/":        false,
		"ftp://api.example.com/":        false,
		"https://evil.com/":             false,
	} {
		u, _ := url.Parse(raw)
		if err := CheckURL(perms, u); (err == nil) != ok {
			t.Errorf("CheckURL(%s) = %v, want allowed %v", raw, err, ok)
		}
	}
}

func TestDialerRefusesNonPublicName(t *testing.T) {
	// A permitted name that resolves to loopback is refused unless the
	// address is listed itself (DNS rebinding guard), in the dialer.
	d := &dialer{perms: plugins.Permissions{Network: []string{"localhost:8080"}}, resolver: net.DefaultResolver}
	_, err := d.DialContext(context.Background(), "tcp", "localhost:8080")
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "non-public address must be listed") {
		t.Fatalf("dial localhost: %v", err)
	}
}

func TestClientRedirects(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the client reached a host it may not")
	}))
	defer other.Close()
	own := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/away" {
			http.Redirect(w, r, other.URL, http.StatusFound)
			return
		}
		if r.URL.Path == "/here" {
			http.Redirect(w, r, "/done", http.StatusFound)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer own.Close()
	c := NewClient(plugins.Permissions{Network: []string{strings.TrimPrefix(own.URL, "http://")}})
	resp, err := c.Get(own.URL + "/here")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a redirect on the same host: %v, %v", resp, err)
	}
	resp.Body.Close()
	if _, err := c.Get(own.URL + "/away"); !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "redirect") {
		t.Errorf("a redirect to another host: %v", err)
	}
	if _, err := c.Get(other.URL); !errors.Is(err, ErrDenied) {
		t.Errorf("another host: %v", err)
	}
}
