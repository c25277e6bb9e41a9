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
	"slices"
	"strconv"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/toolsetpb"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// Serve serves the plugin's kinds — a Toolset, a Provider, a kind defined
// in a package of its own (a ProcessKind), or several — to the Kiln
// process host and returns only when the host ends the plugin (then the
// process exits). In a native build the plugin is an executable speaking
// go-plugin's gRPC protocol with mutual TLS (specs/proto; the
// certificates are described in pluginrpc), at the Kiln plugin protocol
// versions that carry every kind given: 3, and for a toolset alone also 2
// and 1, so that an older host still loads it. Run by hand, outside
// Kiln, it says so and exits with status 1.
//
// A toolset with a tool without a name or handler, or with two tools of
// the same name, a provider without Turn, a kind that cannot be served
// (a sandbox runtime with neither or both of Runtime and Open), kinds no
// protocol version carries together, or two of a kind, is a programming
// error: Serve prints it to stderr and exits with status 1, before the
// host's handshake.
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

// A ProcessKind is a Kind that serves itself over the process transport
// (Kiln's go-plugin host): in a native build Serve takes only these.
// Toolset, Provider and SandboxRuntime are; a kind defined in a package of
// its own implements ProcessPlugins in its native build (a file with the
// build constraint !wasip1), with its own gRPC service and go-plugin
// plugin, and Kiln carries it once the kind's host package is linked.
type ProcessKind interface {
	Kind
	// ProcessPlugins returns the go-plugin plugins, the plugin's side,
	// that serve the kind, by the Kiln plugin protocol versions that
	// carry it (pluginrpc.Versions). host connects them to the host's
	// callbacks. An error says why the kind cannot be served (a tool
	// without a handler): Serve prints it and exits.
	ProcessPlugins(host ProcessHost) (map[int]goplugin.Plugin, error)
}

// ProcessHost connects a ProcessKind's plugins to the host's callbacks,
// through which Log, Emit and the key/value functions reach the host.
type ProcessHost struct{}

// OnBroker is the hook through which a kind's go-plugin plugin hands
// over the process's broker when the host dispenses it (the OnBroker
// field of pluginrpc's plugins).
func (ProcessHost) OnBroker(b *goplugin.GRPCBroker) { host.setBroker(b) }

// CallContext returns the context in which to run the author's code for
// one request of the host: ctx, naming the call callID (for Emit), with
// the host's callbacks served at broker ID hostID connected. Requests name
// both from protocol 2 on; 0 names none.
func (ProcessHost) CallContext(ctx context.Context, hostID uint32, callID uint64) context.Context {
	host.use(hostID)
	if callID == 0 {
		return ctx
	}
	return context.WithValue(ctx, callKey{}, callID)
}

// processPlugins are the go-plugin plugin sets Serve offers, by protocol
// version: the versions that carry every kind given.
func processPlugins(kinds []Kind) (map[int]goplugin.PluginSet, error) {
	if len(kinds) == 0 {
		return nil, errors.New("Serve needs a kind to serve: a Toolset, a Provider, a SandboxRuntime or several")
	}
	var versions map[int]goplugin.PluginSet
	for i, k := range kinds {
		pk, ok := k.(ProcessKind)
		if !ok {
			return nil, fmt.Errorf("Serve cannot serve %T over the process transport (it is no ProcessKind)", k)
		}
		name := k.KindName()
		if slices.ContainsFunc(kinds[:i], func(o Kind) bool { return o.KindName() == name }) {
			return nil, fmt.Errorf("Serve got %q twice", name)
		}
		plugins, err := pk.ProcessPlugins(ProcessHost{})
		if err != nil {
			return nil, err
		}
		if versions == nil {
			versions = map[int]goplugin.PluginSet{}
			for v := range plugins {
				versions[v] = goplugin.PluginSet{}
			}
		}
		for v, set := range versions {
			p, ok := plugins[v]
			if !ok {
				delete(versions, v)
				continue
			}
			set[name] = p
		}
		if len(versions) == 0 {
			return nil, fmt.Errorf("no Kiln plugin protocol version carries every kind given (%q among them)", name)
		}
	}
	return versions, nil
}

// ProcessPlugins serves the toolset at every protocol version: its
// results as parts at protocol 3, as their text before.
func (ts Toolset) ProcessPlugins(h ProcessHost) (map[int]goplugin.Plugin, error) {
	srv, err := newProcessServer(ts)
	if err != nil {
		return nil, err
	}
	text := &processServer{ts: srv.ts, specs: srv.specs, text: true}
	return map[int]goplugin.Plugin{
		pluginrpc.ProtocolV1: &pluginrpc.ToolsetPlugin{Impl: text},
		pluginrpc.ProtocolV2: &pluginrpc.ToolsetPlugin{Impl: text, OnBroker: h.OnBroker},
		pluginrpc.ProtocolV3: &pluginrpc.ToolsetPlugin{Impl: srv, OnBroker: h.OnBroker},
	}, nil
}

// ProcessPlugins serves the provider at protocol 3, whose payloads are
// the contracts of package wire.
func (p Provider) ProcessPlugins(h ProcessHost) (map[int]goplugin.Plugin, error) {
	if p.Turn == nil {
		return nil, errors.New("the provider has no Turn")
	}
	srv, err := newProviderServer(p)
	if err != nil {
		return nil, err
	}
	return map[int]goplugin.Plugin{pluginrpc.ProtocolV3: &pluginrpc.ModelProviderPlugin{Impl: srv, OnBroker: h.OnBroker}}, nil
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
	// text answers as protocols 1 and 2 do: a result's text, or its
	// failure's; protocol 3 sends the parts.
	text bool
}

// newProcessServer checks ts and prepares its description; the server
// answers with parts (protocol 3).
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
	ctx = ProcessHost{}.CallContext(ctx, req.GetHost(), req.GetCallId())
	var res Result
	if t := s.ts.find(req.GetTool()); t != nil {
		res = processRunHandler(ctx, t, req.GetArgs())
	} else {
		res = wire.ErrorResult(fmt.Sprintf("unknown tool %q", req.GetTool()))
	}
	switch {
	case !s.text:
		return pluginrpc.FromToolResult(res), nil
	case res.IsError:
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
