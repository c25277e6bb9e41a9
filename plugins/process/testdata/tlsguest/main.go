// Command tlsguest is a process plugin for the host's TLS tests, serving
// one tool, echo. TLSGUEST_MODE says how it does TLS:
//
//	automtls   go-plugin's AutoMTLS, as a plugin built before the
//	           certificate pipe (pluginrpc.CertFDEnv) does
//	othercert  sends one certificate on the pipe and serves with another
//	nocert     closes the pipe without sending a certificate
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/toolsetpb"
)

type server struct {
	toolsetpb.UnimplementedToolsetServer
}

func (server) Describe(context.Context, *toolsetpb.DescribeRequest) (*toolsetpb.DescribeResponse, error) {
	return &toolsetpb.DescribeResponse{Tools: []*toolsetpb.ToolSpec{{Name: "echo"}}}, nil
}

func (server) Call(_ context.Context, req *toolsetpb.CallRequest) (*toolsetpb.CallResponse, error) {
	return &toolsetpb.CallResponse{Result: string(req.GetArgs())}, nil
}

func main() {
	mode := os.Getenv("TLSGUEST_MODE")
	var provider func() (*tls.Config, error)
	switch mode {
	case "automtls":
	case "othercert", "nocert":
		provider = func() (*tls.Config, error) {
			pipe := os.NewFile(pluginrpc.CertFD, "cert-pipe")
			if mode == "othercert" {
				_, other, err := pluginrpc.NewCertificate()
				if err != nil {
					return nil, err
				}
				pipe.Write(other)
			}
			pipe.Close()
			cert, _, err := pluginrpc.NewCertificate()
			if err != nil {
				return nil, err
			}
			host := x509.NewCertPool()
			host.AppendCertsFromPEM([]byte(os.Getenv(pluginrpc.ClientCertEnv)))
			return &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: host}, nil
		}
	default:
		fmt.Fprintf(os.Stderr, "TLSGUEST_MODE=%q: want automtls, othercert or nocert\n", mode)
		os.Exit(1)
	}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: pluginrpc.Handshake,
		Plugins:         goplugin.PluginSet{pluginrpc.ToolsetName: &pluginrpc.ToolsetPlugin{Impl: server{}}},
		GRPCServer:      goplugin.DefaultGRPCServer,
		TLSProvider:     provider,
	})
}
