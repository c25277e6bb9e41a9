package pluginrpc

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"time"
)

// The channel between the host and a plugin process is mutual TLS, as with
// go-plugin's AutoMTLS, but with ECDSA P-256 certificates rather than its
// P-521 ones, whose generation and handshake cost a start about 20 ms.
// Each side makes a fresh key and a self-signed certificate per start; a
// private key never leaves its process, and each side accepts only the
// other's certificate:
//
//   - the host passes its certificate in PLUGIN_CLIENT_CERT, as AutoMTLS
//     does, and the plugin accepts no other client;
//   - the host sets CertFDEnv and gives the plugin the write end of a pipe
//     as file descriptor CertFD; the plugin writes its certificate there
//     (PEM) and closes it before go-plugin prints the handshake line, and
//     the host accepts no other server. The pipe is like the plugin's
//     stdout, where AutoMTLS sends the certificate in the handshake line:
//     only the plugin and the host hold it.
//
// A plugin built with an SDK that predates CertFDEnv ignores it and uses
// AutoMTLS, which the host accepts too; a plugin of this SDK started by an
// older host, which does not set CertFDEnv, uses AutoMTLS, and so does
// every plugin on Windows, where a process inherits no files.

// CertFDEnv is the environment variable that tells a plugin process the
// file descriptor to write its certificate to.
const CertFDEnv = "KILN_PLUGIN_CERT_FD"

// CertFD is the file descriptor of the certificate pipe in the plugin
// process: the host's first extra file.
const CertFD = 3

// ClientCertEnv is go-plugin's variable for the host's certificate (PEM).
const ClientCertEnv = "PLUGIN_CLIENT_CERT"

// MaxCertPEM bounds the certificate a plugin sends on the pipe.
const MaxCertPEM = 8 << 10

// NewCertificate returns a fresh ECDSA P-256 key and a self-signed
// certificate for "localhost", valid for client and server
// authentication, as a tls.Certificate and the certificate in PEM. It is
// go-plugin's AutoMTLS certificate on a cheaper curve.
func NewCertificate() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "localhost", Organization: []string{"Kiln plugin"}},
		DNSNames:              []string{"localhost"},
		NotBefore:             now.Add(-30 * time.Second),
		NotAfter:              now.Add(30 * 365 * 24 * time.Hour), // the life of a process
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // it is its own root
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
