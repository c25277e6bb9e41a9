//go:build !wasip1

package plugin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/toolsetpb"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// Serve serves the plugin's kinds — a Toolset, a Provider, a
// SandboxRuntime, or several — to the Kiln process host and returns only when the host ends the plugin
// (then the process exits). In a native build the plugin is an executable
// speaking go-plugin's gRPC protocol with mutual TLS (specs/proto; the
// certificates are described in pluginrpc): Kiln plugin protocol 2, and
// for a toolset alone also protocol 1, so that an older host still loads
// it. Run by hand, outside Kiln, it says so and exits with status 1.
//
// A toolset with a tool without a name or handler, or with two tools of
// the same name, a provider without Turn, a sandbox runtime with neither
// or both of Runtime and Open, or two of a kind, is a
// programming error: Serve prints it to stderr and exits with status 1,
// before the host's handshake.
func Serve(kinds ...Kind) {
	versions, err := processPlugins(kinds)
	if err != nil {
		fmt.Fprintln(os.Stderr, "plugin:", err)
		os.Exit(1)
	}
	tlsProvider, err := pipedTLS()
	if err != nil {
		fmt.Fprintln(os.Stderr, "plugin:", err)
		os.Exit(1)
	}
	go exitWithParent(os.Getppid(), time.Second)
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  pluginrpc.Handshake,
		VersionedPlugins: versions,
		GRPCServer:       goplugin.DefaultGRPCServer,
		TLSProvider:      tlsProvider,
	})
}

// processPlugins are the go-plugin plugin sets Serve offers, by protocol
// version.
func processPlugins(kinds []Kind) (map[int]goplugin.PluginSet, error) {
	v2 := goplugin.PluginSet{}
	versions := map[int]goplugin.PluginSet{pluginrpc.ProtocolV2: v2}
	var others []Kind
	for _, k := range kinds {
		sr, ok := k.(SandboxRuntime)
		if !ok {
			others = append(others, k)
			continue
		}
		if v2[pluginrpc.SandboxRuntimeName] != nil {
			return nil, errors.New("Serve got two sandbox runtimes")
		}
		open, err := sr.open()
		if err != nil {
			return nil, err
		}
		v2[pluginrpc.SandboxRuntimeName] = &pluginrpc.SandboxRuntimePlugin{Impl: pluginrpc.NewRuntimeServer(open)}
	}
	if len(others) == 0 && len(v2) > 0 {
		return versions, nil
	}
	s, err := collect(others)
	if err != nil {
		return nil, err
	}
	if s.toolset != nil {
		srv, err := newProcessServer(*s.toolset)
		if err != nil {
			return nil, err
		}
		v2[pluginrpc.ToolsetName] = &pluginrpc.ToolsetPlugin{Impl: srv, OnBroker: host.setBroker}
		if s.provider == nil && len(v2) == 1 {
			versions[pluginrpc.ProtocolV1] = goplugin.PluginSet{pluginrpc.ToolsetName: &pluginrpc.ToolsetPlugin{Impl: srv}}
		}
	}
	if s.provider != nil {
		srv, err := newProviderServer(*s.provider)
		if err != nil {
			return nil, err
		}
		v2[pluginrpc.ModelProviderName] = &pluginrpc.ModelProviderPlugin{Impl: srv, OnBroker: host.setBroker}
	}
	return versions, nil
}

// pipedTLS returns the TLS configuration of the plugin's server when the
// host asks for the certificate pipe (pluginrpc.CertFDEnv): a fresh P-256
// certificate, written to the pipe when go-plugin asks for the
// configuration (before it prints the handshake line), and only the
// host's certificate (pluginrpc.ClientCertEnv) accepted from clients. It
// returns nil when the host does not ask, and go-plugin's AutoMTLS runs.
func pipedTLS() (func() (*tls.Config, error), error) {
	v := os.Getenv(pluginrpc.CertFDEnv)
	if v == "" {
		return nil, nil
	}
	os.Unsetenv(pluginrpc.CertFDEnv) // not for the plugin's own children
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("%s=%q is not a file descriptor", pluginrpc.CertFDEnv, v)
	}
	hostCA := x509.NewCertPool()
	if !hostCA.AppendCertsFromPEM([]byte(os.Getenv(pluginrpc.ClientCertEnv))) {
		return nil, fmt.Errorf("%s holds no certificate", pluginrpc.ClientCertEnv)
	}
	pipe := os.NewFile(uintptr(fd), "kiln-cert-pipe")
	return func() (*tls.Config, error) {
		defer pipe.Close()
		cert, certPEM, err := pluginrpc.NewCertificate()
		if err != nil {
			return nil, fmt.Errorf("generate the plugin's certificate: %w", err)
		}
		if _, err := pipe.Write(certPEM); err != nil {
			return nil, fmt.Errorf("send the plugin's certificate: %w", err)
		}
		return &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    hostCA,
			// The plugin dials the host's callbacks on the broker with
			// this configuration too: there the host is the server.
			RootCAs:    hostCA,
			ServerName: "localhost",
			MinVersion: tls.VersionTLS13,
		}, nil
	}, nil
}

// exitWithParent ends the plugin once its parent, the Kiln host, is gone
// (the process is then re-parented), so a plugin never outlives a host
// that was killed. On Linux the host also asks the kernel for this.
func exitWithParent(parent int, every time.Duration) {
	for {
		time.Sleep(every)
		if os.Getppid() != parent {
			os.Exit(0)
		}
	}
}

// processServer implements the gRPC toolset service over a Toolset.
type processServer struct {
	toolsetpb.UnimplementedToolsetServer
	ts    Toolset
	specs *toolsetpb.DescribeResponse
}

// newProcessServer checks ts and prepares its description.
func newProcessServer(ts Toolset) (*processServer, error) {
	if err := processValidate(&ts); err != nil {
		return nil, err
	}
	specs := &toolsetpb.DescribeResponse{}
	for _, t := range ts.Tools {
		specs.Tools = append(specs.Tools, &toolsetpb.ToolSpec{
			Name:        t.Name,
			Description: t.Description,
			Schema:      t.Schema,
			Idempotent:  t.Idempotent,
		})
	}
	return &processServer{ts: ts, specs: specs}, nil
}

// processValidate reports a toolset the host could not use.
func processValidate(ts *Toolset) error {
	seen := map[string]bool{}
	for i, t := range ts.Tools {
		switch {
		case t.Name == "":
			return fmt.Errorf("tool %d has no name", i)
		case t.Handler == nil:
			return fmt.Errorf("tool %q has no handler", t.Name)
		case seen[t.Name]:
			return fmt.Errorf("tool %q is defined twice", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

func (s *processServer) Describe(context.Context, *toolsetpb.DescribeRequest) (*toolsetpb.DescribeResponse, error) {
	return s.specs, nil
}

// Call runs the tool. Its failures, including an unknown tool and a panic
// in the handler, travel in the response; the process keeps serving.
// The handler's context names the call, for Emit.
func (s *processServer) Call(ctx context.Context, req *toolsetpb.CallRequest) (*toolsetpb.CallResponse, error) {
	host.use(req.GetHost())
	ctx = context.WithValue(ctx, callKey{}, req.GetCallId())
	t := s.ts.find(req.GetTool())
	if t == nil {
		return &toolsetpb.CallResponse{Error: fmt.Sprintf("unknown tool %q", req.GetTool())}, nil
	}
	res := processRunHandler(ctx, t, req.GetArgs())
	if res.IsError {
		return &toolsetpb.CallResponse{Error: res.Text()}, nil
	}
	return &toolsetpb.CallResponse{Result: res.Text()}, nil
}

// processRunHandler runs t, turning a panic into the tool's failure.
func processRunHandler(ctx context.Context, t *Tool, args []byte) (res Result) {
	defer func() {
		if r := recover(); r != nil {
			// Through Log: after Serve, os.Stderr goes to a stream the
			// host discards.
			Log(slog.LevelError, fmt.Sprintf("tool %q panicked: %v\n%s", t.Name, r, debug.Stack()))
			res = wire.ErrorResult(fmt.Sprintf("tool %q panicked: %v", t.Name, r))
		}
	}()
	return t.run(ctx, args)
}
