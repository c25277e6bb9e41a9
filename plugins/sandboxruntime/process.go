package sandboxruntime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strconv"
	"sync"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/kilnhq/kiln/plugins/process"
	"github.com/kilnhq/kiln/plugins/wireconv/protocol2"
	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/sandboxrpc"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/sandboxruntimepb"
)

// The "sandbox-runtime" kind over the process runtime:
// specs/proto/sandboxruntime.proto, from protocol 2 on. A spec and the
// capabilities are the plugin contracts (wire.SandboxSpec,
// wire.SandboxCapabilities) from protocol 3 on, protocol 2's frozen
// shapes (plugins/wireconv/protocol2) before.

func init() { process.RegisterKind(Name, processKind{}) }

type processKind struct{}

// Plugin is the runtime's go-plugin plugin, from protocol 2 on; its
// client keeps what each process calls the sandboxes (sandboxConn).
func (processKind) Plugin(v int) goplugin.GRPCPlugin {
	if v < pluginrpc.ProtocolV2 {
		return nil
	}
	return &sandboxPlugin{}
}

// Describe asks the process's runtime to describe itself (the plugin
// makes the runtime then).
func (processKind) Describe(ctx context.Context, c *process.Conn) (any, error) {
	return sandboxrpc.DescribeRuntime(ctx, c.Client.(*sandboxConn).client, shapes(c))
}

// shapes are the JSON shapes of c's protocol version.
func shapes(c *process.Conn) sandboxrpc.SandboxShapes {
	if c.Version < pluginrpc.ProtocolV3 {
		return protocol2.SandboxShapes{}
	}
	return sandboxrpc.WireShapes
}

// Client is the process's sandbox runtime.
func (processKind) Client(p *process.Plugin, desc any) (any, error) {
	d, _ := desc.(sandboxrpc.RuntimeDescription)
	return remoteRuntime(p, d), nil
}

// sandboxPlugin is pluginrpc's plugin whose client is a *sandboxConn.
type sandboxPlugin struct {
	sandboxrpc.SandboxRuntimePlugin
}

func (p *sandboxPlugin) GRPCClient(ctx context.Context, b *goplugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	c, err := p.SandboxRuntimePlugin.GRPCClient(ctx, b, conn)
	if err != nil {
		return nil, err
	}
	return &sandboxConn{client: c.(sandboxruntimepb.SandboxRuntimeClient)}, nil
}

// sandboxConn is one process's runtime and the sandboxes it has seen.
type sandboxConn struct {
	client  sandboxruntimepb.SandboxRuntimeClient
	handles handleMap
}

// remoteRuntime is a process plugin's sandbox runtime, described as d.
// It is a sandbox.Pauser, and a sandbox.Lister and a sandbox.ExecDialer
// when the plugin's runtime is (its description says so); Pause and
// Resume return an *sandbox.UnsupportedError unless its Capabilities say
// Pause.
//
// A call waits for a restarting process for at most the manifest's
// timeout_ms, then runs within its own ctx only (a command runs as long
// as its caller lets it). A process that started after a sandbox did (a
// restart) has it recovered (Recover) before its first operation on it,
// as a restarted server would; an operation that is safe to repeat
// (Start, which is idempotent by Spec.ID, Stat, ReadDir, opening a
// file or a connection, Destroy, Recover, Pause, Resume, List) cut off by the death of
// the process is run again, once, on the restarted one. The runtime's
// own errors are those package sandbox documents; a failure of the
// channel wraps plugins.ErrTransport.
func remoteRuntime(p *process.Plugin, d sandboxrpc.RuntimeDescription) sandbox.Runtime {
	r := &sandboxRemote{p: p, caps: d.Capabilities}
	switch {
	case d.Lister && d.ExecDialer:
		return listingDialingRemote{r}
	case d.Lister:
		return listingRemote{r}
	case d.ExecDialer:
		return dialingRemote{r}
	}
	return r
}

// sandboxRemote is a plugin's sandbox runtime over whichever of its
// processes serves.
type sandboxRemote struct {
	p    *process.Plugin
	caps sandbox.Capabilities
}

// The optional interfaces the plugin's runtime has.
type (
	listingRemote        struct{ *sandboxRemote }
	dialingRemote        struct{ *sandboxRemote }
	listingDialingRemote struct{ *sandboxRemote }
)

func (r listingRemote) List(ctx context.Context) ([]string, error) { return r.list(ctx) }
func (r dialingRemote) DialExec(ctx context.Context, h sandbox.Handle) (net.Conn, error) {
	return r.dialExec(ctx, h)
}
func (r listingDialingRemote) List(ctx context.Context) ([]string, error) { return r.list(ctx) }
func (r listingDialingRemote) DialExec(ctx context.Context, h sandbox.Handle) (net.Conn, error) {
	return r.dialExec(ctx, h)
}

// handleMap is what one process's runtime calls the sandboxes it has
// seen: each handle the host holds (a key of handleKey) to the handle to
// use with this process (what its Start or Recover returned).
type handleMap struct {
	mu sync.Mutex
	m  map[string]sandbox.Handle
}

func handleKey(h sandbox.Handle) string { return strconv.Itoa(h.Version) + ":" + string(h.Data) }

func (hm *handleMap) get(h sandbox.Handle) (sandbox.Handle, bool) {
	hm.mu.Lock()
	defer hm.mu.Unlock()
	v, ok := hm.m[handleKey(h)]
	return v, ok
}

// put records that the process calls the sandbox of each of held now.
func (hm *handleMap) put(now sandbox.Handle, held ...sandbox.Handle) {
	hm.mu.Lock()
	defer hm.mu.Unlock()
	if hm.m == nil {
		hm.m = map[string]sandbox.Handle{}
	}
	for _, h := range append(held, now) {
		hm.m[handleKey(h)] = now
	}
}

func (hm *handleMap) drop(h sandbox.Handle) {
	hm.mu.Lock()
	defer hm.mu.Unlock()
	delete(hm.m, handleKey(h))
}

// handle returns what sc's runtime calls the sandbox of h, recovering
// it on sc first when sc has not seen it.
func (r *sandboxRemote) handle(ctx context.Context, sc *sandboxConn, rc sandboxrpc.RuntimeClient, h sandbox.Handle) (sandbox.Handle, error) {
	if now, ok := sc.handles.get(h); ok {
		return now, nil
	}
	st, err := rc.Recover(ctx, h)
	if err != nil {
		return sandbox.Handle{}, err
	}
	sc.handles.put(st.Handle, h)
	return st.Handle, nil
}

// call runs f on the serving process with what it calls the sandbox of h
// (the zero Handle for none), waiting for a restarting process for at
// most the manifest's timeout, and once more on a restarted process when
// repeat and the death of the process cut f off (process.Plugin.Do). The
// runtime's own errors are returned as they are; a failure of the channel
// wraps plugins.ErrTransport.
func (r *sandboxRemote) call(ctx context.Context, h sandbox.Handle, repeat bool, f func(*sandboxConn, sandboxrpc.RuntimeClient, sandbox.Handle) error) error {
	ran := false
	err := r.p.Do(ctx, Name, func(c *process.Conn) (bool, error) {
		ran = true
		sc := c.Client.(*sandboxConn)
		rc := sandboxrpc.RuntimeClient{Client: sc.client, Caps: r.caps, Shapes: shapes(c)}
		var err error
		if h.Version != 0 || h.Data != nil {
			var now sandbox.Handle
			if now, err = r.handle(ctx, sc, rc, h); err == nil {
				err = f(sc, rc, now)
			}
		} else {
			err = f(sc, rc, h)
		}
		return errors.Is(err, sandboxrpc.ErrChannel), err
	}, func() bool { return repeat })
	if err != nil && (!ran || errors.Is(err, process.ErrCutOff)) {
		return fmt.Errorf("sandbox runtime %s: %w", r.p.ID(), err)
	}
	return err
}

// Capabilities returns what the plugin's runtime described at Load.
func (r *sandboxRemote) Capabilities() sandbox.Capabilities { return r.caps }

func (r *sandboxRemote) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Handle, error) {
	var h sandbox.Handle
	err := r.call(ctx, sandbox.Handle{}, true, func(sc *sandboxConn, rc sandboxrpc.RuntimeClient, _ sandbox.Handle) error {
		var err error
		if h, err = rc.Start(ctx, spec); err == nil {
			sc.handles.put(h)
		}
		return err
	})
	return h, err
}

func (r *sandboxRemote) Exec(ctx context.Context, h sandbox.Handle, req sandbox.ExecRequest, events func(sandbox.ExecEvent)) (sandbox.ExitStatus, error) {
	var st sandbox.ExitStatus
	err := r.call(ctx, h, false, func(_ *sandboxConn, rc sandboxrpc.RuntimeClient, h sandbox.Handle) error {
		var err error
		st, err = rc.Exec(ctx, h, req, events)
		return err
	})
	return st, err
}

func (r *sandboxRemote) ReadFile(ctx context.Context, h sandbox.Handle, path string) (io.ReadCloser, error) {
	var rd io.ReadCloser
	err := r.call(ctx, h, true, func(_ *sandboxConn, rc sandboxrpc.RuntimeClient, h sandbox.Handle) error {
		var err error
		rd, err = rc.ReadFile(ctx, h, path)
		return err
	})
	return rd, err
}

func (r *sandboxRemote) WriteFile(ctx context.Context, h sandbox.Handle, path string, data io.Reader, perm fs.FileMode) error {
	return r.call(ctx, h, false, func(_ *sandboxConn, rc sandboxrpc.RuntimeClient, h sandbox.Handle) error {
		return rc.WriteFile(ctx, h, path, data, perm)
	})
}

func (r *sandboxRemote) Stat(ctx context.Context, h sandbox.Handle, path string) (sandbox.FileInfo, error) {
	var fi sandbox.FileInfo
	err := r.call(ctx, h, true, func(_ *sandboxConn, rc sandboxrpc.RuntimeClient, h sandbox.Handle) error {
		var err error
		fi, err = rc.Stat(ctx, h, path)
		return err
	})
	return fi, err
}

func (r *sandboxRemote) ReadDir(ctx context.Context, h sandbox.Handle, path string) ([]sandbox.FileInfo, error) {
	var list []sandbox.FileInfo
	err := r.call(ctx, h, true, func(_ *sandboxConn, rc sandboxrpc.RuntimeClient, h sandbox.Handle) error {
		var err error
		list, err = rc.ReadDir(ctx, h, path)
		return err
	})
	return list, err
}

func (r *sandboxRemote) Remove(ctx context.Context, h sandbox.Handle, path string) error {
	return r.call(ctx, h, false, func(_ *sandboxConn, rc sandboxrpc.RuntimeClient, h sandbox.Handle) error {
		return rc.Remove(ctx, h, path)
	})
}

// Destroy destroys the sandbox; one that a restarted process finds gone
// already is destroyed, as Destroy's contract has it.
func (r *sandboxRemote) Destroy(ctx context.Context, h sandbox.Handle) error {
	err := r.call(ctx, h, true, func(sc *sandboxConn, rc sandboxrpc.RuntimeClient, now sandbox.Handle) error {
		err := rc.Destroy(ctx, now)
		if err == nil {
			sc.handles.drop(h)
			sc.handles.drop(now)
		}
		return err
	})
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil
	}
	return err
}

// Recover recovers the sandbox on the serving process, whatever it saw
// before.
func (r *sandboxRemote) Recover(ctx context.Context, h sandbox.Handle) (sandbox.State, error) {
	var st sandbox.State
	err := r.call(ctx, sandbox.Handle{}, true, func(sc *sandboxConn, rc sandboxrpc.RuntimeClient, _ sandbox.Handle) error {
		var err error
		if st, err = rc.Recover(ctx, h); err == nil {
			sc.handles.put(st.Handle, h)
		}
		return err
	})
	return st, err
}

func (r *sandboxRemote) Pause(ctx context.Context, h sandbox.Handle) error {
	if !r.caps.Pause {
		return sandbox.Unsupported(r.caps.Name, "pause")
	}
	return r.call(ctx, h, true, func(_ *sandboxConn, rc sandboxrpc.RuntimeClient, h sandbox.Handle) error {
		return rc.Pause(ctx, h)
	})
}

func (r *sandboxRemote) Resume(ctx context.Context, h sandbox.Handle) error {
	if !r.caps.Pause {
		return sandbox.Unsupported(r.caps.Name, "resume")
	}
	return r.call(ctx, h, true, func(_ *sandboxConn, rc sandboxrpc.RuntimeClient, h sandbox.Handle) error {
		return rc.Resume(ctx, h)
	})
}

func (r *sandboxRemote) list(ctx context.Context) ([]string, error) {
	var ids []string
	err := r.call(ctx, sandbox.Handle{}, true, func(_ *sandboxConn, rc sandboxrpc.RuntimeClient, _ sandbox.Handle) error {
		var err error
		ids, err = rc.List(ctx)
		return err
	})
	return ids, err
}

// dialExec opens a connection to the sandbox's agent, carried by the
// serving process; it ends with that process.
func (r *sandboxRemote) dialExec(ctx context.Context, h sandbox.Handle) (net.Conn, error) {
	var conn net.Conn
	err := r.call(ctx, h, true, func(_ *sandboxConn, rc sandboxrpc.RuntimeClient, h sandbox.Handle) error {
		var err error
		conn, err = rc.DialExec(ctx, h)
		return err
	})
	return conn, err
}

// Interface guards.
var (
	_ process.Kind             = processKind{}
	_ sandboxrpc.SandboxShapes = protocol2.SandboxShapes{}
	_ sandbox.Pauser           = (*sandboxRemote)(nil)
	_ sandbox.Lister           = listingRemote{}
	_ sandbox.ExecDialer       = dialingRemote{}
	_ sandbox.Lister           = listingDialingRemote{}
	_ sandbox.ExecDialer       = listingDialingRemote{}
)
