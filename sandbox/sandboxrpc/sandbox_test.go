package sandboxrpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/sandboxrpc"
	"github.com/kilnhq/kiln/sandbox/sandboxtest"
	"github.com/kilnhq/kiln/sandbox/wasm"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/sandboxruntimepb"
)

// connect serves rt over a real gRPC connection (go-plugin's test
// connection) and returns the host's end of it.
func connect(t *testing.T, rt sandbox.Runtime) sandboxrpc.RuntimeClient {
	t.Helper()
	client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{
		sandboxrpc.SandboxRuntimeName: &sandboxrpc.SandboxRuntimePlugin{Impl: sandboxrpc.NewRuntimeServer(func(context.Context) (sandbox.Runtime, error) { return rt, nil })},
	})
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense(sandboxrpc.SandboxRuntimeName)
	if err != nil {
		t.Fatal(err)
	}
	c := raw.(sandboxruntimepb.SandboxRuntimeClient)
	d, err := sandboxrpc.DescribeRuntime(context.Background(), c, sandboxrpc.WireShapes)
	if err != nil {
		t.Fatal(err)
	}
	return sandboxrpc.RuntimeClient{Client: c, Caps: d.Capabilities}
}

// TestRuntimeConformance runs the conformance suite over the gRPC
// adapter, with the wasm runtime (which needs nothing installed) and the
// in-memory one (which can pause) behind it.
func TestRuntimeConformance(t *testing.T) {
	t.Run("wasm", func(t *testing.T) {
		dir := t.TempDir()
		sandboxtest.Run(t, func(t *testing.T) sandbox.Runtime {
			rt, err := wasm.New(wasm.Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rt.Close(context.Background()) })
			return connect(t, rt)
		})
	})
	t.Run("memory", func(t *testing.T) {
		m := sandboxtest.NewMachine()
		sandboxtest.Run(t, func(t *testing.T) sandbox.Runtime { return connect(t, m.Runtime(sandboxtest.Options{})) })
	})
}

// TestErrorsCrossTheWire: each error a runtime's methods return comes
// back with its text and what it wraps.
func TestErrorsCrossTheWire(t *testing.T) {
	unsupported := sandbox.Unsupported("docker", "pause")
	for _, err := range []error{
		sandbox.ErrNotFound,
		fmt.Errorf("start: %w", sandbox.ErrInvalid),
		sandbox.HandleVersion("docker", sandbox.Handle{Version: 9}, 1),
		fmt.Errorf("exec: %w", sandbox.ErrPaused),
		fmt.Errorf("oh: %w", unsupported),
		&fs.PathError{Op: "open", Path: "/tmp/x", Err: fs.ErrNotExist},
		fmt.Errorf("read: %w", &fs.PathError{Op: "read", Path: "x", Err: sandbox.ErrInvalid}),
		fmt.Errorf("exec: %w", context.Canceled),
		fmt.Errorf("exec: %w", context.DeadlineExceeded),
		errors.New("something else"),
	} {
		got := sandboxrpc.DecodeError(sandboxrpc.EncodeError(err))
		if got.Error() != err.Error() {
			t.Errorf("%q came back as %q", err, got)
		}
		for _, target := range []error{sandbox.ErrNotFound, sandbox.ErrBadHandle, sandbox.ErrInvalid, sandbox.ErrPaused, sandbox.ErrUnsupported, fs.ErrNotExist, context.Canceled, context.DeadlineExceeded} {
			if errors.Is(got, target) != errors.Is(err, target) {
				t.Errorf("%q: errors.Is(%v) is %v, was %v", err, target, errors.Is(got, target), errors.Is(err, target))
			}
		}
		var pe, gpe *fs.PathError
		if errors.As(err, &pe) && (!errors.As(got, &gpe) || gpe.Op != pe.Op || gpe.Path != pe.Path || gpe.Err.Error() != pe.Err.Error()) {
			t.Errorf("%q: the path error came back as %#v", err, gpe)
		}
		var ue *sandbox.UnsupportedError
		if errors.As(err, &ue) && (!errors.As(got, &ue) || *ue != *unsupported.(*sandbox.UnsupportedError)) {
			t.Errorf("%q: the unsupported error came back as %#v", err, ue)
		}
	}
	if sandboxrpc.DecodeError(sandboxrpc.EncodeError(nil)) != nil {
		t.Error("nil did not come back as nil")
	}
}

// agent is a runtime whose sandboxes each serve an HTTP agent, reached
// with DialExec over an in-memory pipe; a handle of version 2 has none.
type agent struct {
	sandbox.Runtime
	ln *pipeListener
}

func (a *agent) DialExec(ctx context.Context, h sandbox.Handle) (net.Conn, error) {
	if h.Version == 2 {
		return nil, sandbox.Unsupported("agent", "an execution agent")
	}
	c, s := net.Pipe()
	select {
	case a.ln.conns <- s:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// pipeListener accepts the server ends of agent's pipes.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "unix"} }

// TestDialExec: DialExec's connections carry many concurrent HTTP
// requests with keep-alive, and a runtime without an agent answers an
// error wrapping ErrUnsupported.
func TestDialExec(t *testing.T) {
	ln := &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s %s", r.URL.Path, body)
		}),
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c := connect(t, &agent{Runtime: sandboxtest.NewMachine().Runtime(sandboxtest.Options{}), ln: ln})

	var dials sync.Mutex
	dialled := 0
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			dials.Lock()
			dialled++
			dials.Unlock()
			return c.DialExec(ctx, sandbox.Handle{Version: 1})
		},
		MaxIdleConnsPerHost: 4,
	}, Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := strings.Repeat("x", i*5000)
			resp, err := hc.Post(fmt.Sprintf("http://sandbox/%d", i), "text/plain", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			if want := fmt.Sprintf("/%d %s", i, body); string(got) != want {
				t.Errorf("request %d: %d bytes back, want %d", i, len(got), len(want))
			}
		}()
	}
	wg.Wait()
	before := dialled
	for i := range 10 {
		resp, err := hc.Get(fmt.Sprintf("http://sandbox/again/%d", i))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if dialled != before {
		t.Errorf("sequential requests dialled %d new connections; keep-alive should reuse one", dialled-before)
	}

	if _, err := c.DialExec(context.Background(), sandbox.Handle{Version: 2}); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Errorf("a sandbox without an agent: %v, want ErrUnsupported", err)
	}

	conn, err := c.DialExec(context.Background(), sandbox.Handle{Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a read past the deadline: %v", err)
	}
	conn.Close()
	if _, err := conn.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("a write after Close: %v", err)
	}
}

// TestDescribeFailure: the runtime's failure to be made is Describe's
// error, with its text.
func TestDescribeFailure(t *testing.T) {
	client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{
		sandboxrpc.SandboxRuntimeName: &sandboxrpc.SandboxRuntimePlugin{Impl: sandboxrpc.NewRuntimeServer(func(context.Context) (sandbox.Runtime, error) {
			return nil, errors.New("no Docker engine answers")
		})},
	})
	defer client.Close()
	raw, err := client.Dispense(sandboxrpc.SandboxRuntimeName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sandboxrpc.DescribeRuntime(context.Background(), raw.(sandboxruntimepb.SandboxRuntimeClient), sandboxrpc.WireShapes); err == nil || err.Error() != "no Docker engine answers" {
		t.Errorf("Describe: %v", err)
	}
}
