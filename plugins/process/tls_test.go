//go:build unix

package process_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/process"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc"
)

// loadTLSGuest loads testdata/tlsguest in mode (see its doc).
func loadTLSGuest(t *testing.T, mode string) (*loaded, error) {
	t.Helper()
	dir, m := pluginDir(t, "tlsguest", `{"env":["TLSGUEST_MODE"]}`)
	ts, err := loadToolset(context.Background(), dir, m, process.Options{
		Logger:       testLogger(t),
		LookupEnv:    func(string) (string, bool) { return mode, true },
		StartTimeout: 5 * time.Second,
	})
	if err == nil {
		t.Cleanup(func() { ts.Close() })
	}
	return ts, err
}

// A plugin built before the certificate pipe does AutoMTLS; the host
// takes its certificate from the handshake line, as go-plugin does.
func TestAutoMTLSPlugin(t *testing.T) {
	ts, err := loadTLSGuest(t, "automtls")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := text(ts.Call(context.Background(), "echo", json.RawMessage(`"hi"`))); err != nil || out != `"hi"` {
		t.Fatalf("echo = %q, %v", out, err)
	}
}

// The host trusts the certificate on the pipe and no other.
func TestPluginCertificatePinned(t *testing.T) {
	for mode, want := range map[string]string{
		"othercert": "certificate",
		"nocert":    "sent none",
	} {
		t.Run(mode, func(t *testing.T) {
			_, err := loadTLSGuest(t, mode)
			if err == nil {
				t.Fatal("Load connected to a plugin that does not hold the certificate it sent")
			}
			if !errors.Is(err, plugins.ErrTransport) || !strings.Contains(err.Error(), want) {
				t.Errorf("err = %v, want ErrTransport mentioning %q", err, want)
			}
			t.Log(err)
		})
	}
}

// A plugin of this SDK sends its certificate on the pipe, serves with it,
// and accepts only a client holding the host's key.
func TestPluginAcceptsOnlyTheHost(t *testing.T) {
	host, hostPEM, err := pluginrpc.NewCertificate()
	if err != nil {
		t.Fatal(err)
	}
	other, _, _ := pluginrpc.NewCertificate()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(filepath.Join(binDir, "echo"))
	cmd.Env = []string{
		pluginrpc.Handshake.MagicCookieKey + "=" + pluginrpc.Handshake.MagicCookieValue,
		"PLUGIN_PROTOCOL_VERSIONS=1",
		pluginrpc.ClientCertEnv + "=" + string(hostPEM),
		pluginrpc.CertFDEnv + "=3",
	}
	cmd.ExtraFiles = []*os.File{w}
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(strings.TrimSpace(line), "|")
	if len(parts) < 6 || parts[2] != "unix" || parts[5] != "" {
		t.Fatalf("handshake line %q: want a unix socket and no certificate", line)
	}
	r.SetReadDeadline(time.Now().Add(5 * time.Second))
	sent, _ := io.ReadAll(r)
	block, _ := pem.Decode(sent)
	if block == nil {
		t.Fatalf("the plugin sent %q on the pipe, not a certificate", sent)
	}
	served := x509.NewCertPool()
	if c, err := x509.ParseCertificate(block.Bytes); err != nil {
		t.Fatal(err)
	} else {
		served.AddCert(c)
	}
	otherRoots := x509.NewCertPool()
	otherRoots.AddCert(other.Leaf)

	// dial connects as a client with certs, trusting roots, and reads the
	// server's first bytes (gRPC's settings frame) or the error.
	dial := func(certs []tls.Certificate, roots *x509.CertPool) error {
		conn, err := tls.Dial("unix", parts[3], &tls.Config{Certificates: certs, RootCAs: roots, ServerName: "localhost", NextProtos: []string{"h2"}})
		if err != nil {
			return err
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
		_, err = conn.Read(make([]byte, 1))
		return err
	}
	if err := dial([]tls.Certificate{host}, served); err != nil {
		t.Fatalf("the host's client was refused: %v", err)
	}
	if err := dial([]tls.Certificate{other}, served); err == nil {
		t.Error("a client with another certificate was served")
	}
	if err := dial(nil, served); err == nil {
		t.Error("a client without a certificate was served")
	}
	if err := dial([]tls.Certificate{host}, otherRoots); err == nil {
		t.Error("the plugin's certificate passed for another one")
	}
}
