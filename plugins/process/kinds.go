package process

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc"
)

// A Kind carries one extension kind over the process runtime: the kind's
// package registers it with RegisterKind (in its file process.go), and
// the runtime knows no kind but through it. A process plugin provides
// the registered kinds; its manifest lists which.
type Kind interface {
	// Plugin returns the kind's go-plugin plugin, the host's side, at
	// plugin protocol version v (one of pluginrpc.Versions), or nil when
	// v does not carry the kind. The runtime offers the plugin at every
	// version that carries it.
	Plugin(v int) goplugin.GRPCPlugin
	// Describe asks a process just started what it serves of the kind,
	// within ctx (the start's deadline); c is the process's end of the
	// kind. An error fails the start. A restarted process must describe
	// itself as the first did (reflect.DeepEqual) or it is refused: a
	// description is plain data, not a protocol buffer.
	Describe(ctx context.Context, c *Conn) (any, error)
	// Client returns the kind's client over p, what the runtime
	// dispenses for the kind (the interface the kind's package defines),
	// given what the plugin described (Describe's answer).
	Client(p *Plugin, desc any) (any, error)
}

// kinds are the kinds the runtime carries.
var kinds plugins.Table[plugins.Capability, Kind]

// RegisterKind makes the process runtime carry a kind, from the kind
// package's init. It panics when the name is empty, k is nil or the kind
// is registered already.
func RegisterKind(name plugins.Capability, k Kind) { kinds.Register("process.RegisterKind", name, k) }

// lookupKind returns the kind registered under name.
func lookupKind(name plugins.Capability) (Kind, bool) { return kinds.Lookup(name) }

// carried lists the registered kinds that protocol version v carries
// (every registered kind for v 0), sorted.
func carried(v int) []plugins.Capability {
	var out []plugins.Capability
	for name, k := range kinds.All() {
		if v == 0 || k.Plugin(v) != nil {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// hostPlugins are the go-plugin plugins the host offers, by protocol
// version: each registered kind at each version that carries it.
func hostPlugins() map[int]goplugin.PluginSet {
	registered := kinds.All()
	out := map[int]goplugin.PluginSet{}
	for _, v := range pluginrpc.Versions {
		set := goplugin.PluginSet{}
		for name, k := range registered {
			if p := k.Plugin(v); p != nil {
				set[string(name)] = hostPlugin{kind: p}
			}
		}
		out[v] = set
	}
	return out
}

// hostPlugin is a kind's go-plugin plugin as the host dispenses it: it
// keeps, beside the kind's client, the process's broker and the channel
// closed when the process exits.
type hostPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	kind goplugin.GRPCPlugin
}

func (hostPlugin) GRPCServer(*goplugin.GRPCBroker, *grpc.Server) error {
	return errors.New("process: a host plugin serves nothing")
}

func (h hostPlugin) GRPCClient(ctx context.Context, b *goplugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	c, err := h.kind.GRPCClient(ctx, b, conn)
	if err != nil {
		return nil, err
	}
	return dispensed{client: c, broker: b, done: ctx.Done()}, nil
}

// dispensed is what hostPlugin's GRPCClient returns.
type dispensed struct {
	client any
	broker *goplugin.GRPCBroker
	done   <-chan struct{}
}

// Conn is one plugin process's end of one kind.
type Conn struct {
	// Client is what the kind's plugin (Kind.Plugin(Version)) returned
	// from GRPCClient for this process.
	Client any
	// Version is the plugin protocol version the process speaks.
	Version int
	// Host is the go-plugin broker ID on which the host serves its
	// callbacks (specs/proto/host.proto) to this process, from protocol 2
	// on; 0 before. Requests that run the plugin's code name it.
	Host uint32

	inst *instance
}

// ErrCutOff is matched (errors.Is) by Do's error for a call that failed
// on the channel once it was sent and was not run again: the plugin may
// have acted on it. It adds nothing to the error's text.
var ErrCutOff = errors.New("the call was cut off")

// cutOffError is an error that matches ErrCutOff.
type cutOffError struct{ error }

func (e cutOffError) Unwrap() error        { return e.error }
func (e cutOffError) Is(target error) bool { return target == ErrCutOff }

// Do runs call on kind's end of the process serving now, waiting for a
// restarting process within ctx and at most the manifest's timeout_ms,
// and returns call's error. call says whether the channel failed under
// it (cut): a gRPC error, not the plugin's answer, and not ctx ending.
// When it did, Do learns whether the process died (waiting a moment for
// it to exit), and:
//   - Close ended the process under the call: the error wraps
//     plugins.ErrTransport and says so;
//   - the process lives on: the error wraps plugins.ErrTransport;
//   - the process died (it is restarted): call runs once more, on the
//     restarted process, if again() says it may, and otherwise the error
//     wraps plugins.ErrTransport and says the process died.
//
// Those errors also match ErrCutOff. Waiting for a process fails with
// ctx's error when ctx ends, and otherwise with an error wrapping
// plugins.ErrTransport: a plugin closed, failed for good, that provides
// no kind, or still restarting after timeout_ms.
func (p *Plugin) Do(ctx context.Context, kind plugins.Capability, call func(c *Conn) (cut bool, err error), again func() bool) error {
	for tried := false; ; tried = true {
		c, err := p.conn(ctx, kind)
		if err != nil {
			return err
		}
		cut, err := call(c)
		switch {
		case !cut:
			return err
		case p.closed():
			return cutOffError{fmt.Errorf("%w: the plugin was closed during the call", plugins.ErrTransport)}
		case !p.exited(c.inst):
			return cutOffError{fmt.Errorf("%w: %w", plugins.ErrTransport, err)}
		}
		p.died(c.inst)
		if tried || !again() {
			return cutOffError{fmt.Errorf("%w: the plugin process died during the call: %w", plugins.ErrTransport, err)}
		}
		p.log.Debug("running a call cut off by the process's death again", "kind", kind)
	}
}

// conn returns kind's end of the serving process, waiting for a
// restarting one within ctx and at most the manifest's timeout.
func (p *Plugin) conn(ctx context.Context, kind plugins.Capability) (*Conn, error) {
	wctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	inst, err := p.ready(wctx)
	switch {
	case err != nil && ctx.Err() == nil && !errors.Is(err, plugins.ErrTransport):
		return nil, fmt.Errorf("%w: %w", plugins.ErrTransport, err)
	case err != nil:
		return nil, err
	case inst.conns[kind] == nil:
		return nil, fmt.Errorf("%w: the plugin provides no %q", plugins.ErrTransport, kind)
	}
	return inst.conns[kind], nil
}

// BeginCall registers a call whose progress events (the host's Emit
// callback) go to ctx, and returns the call's ID, for the request that
// runs it, and the function that ends it.
func (p *Plugin) BeginCall(ctx context.Context) (id uint64, end func()) { return p.host.begin(ctx) }

// ID is the plugin's ID.
func (p *Plugin) ID() string { return p.id }

// Manifest is the plugin's manifest.
func (p *Plugin) Manifest() *plugins.Manifest { return p.m }

// Timeout is the deadline of one call (the manifest's timeout_ms).
func (p *Plugin) Timeout() time.Duration { return p.timeout }

// Closed reports whether Close was called.
func (p *Plugin) Closed() bool { return p.closed() }
