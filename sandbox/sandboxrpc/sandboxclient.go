package sandboxrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"sync"
	"time"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/sandboxruntimepb"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// RuntimeDescription is what a plugin's sandbox runtime says about
// itself.
type RuntimeDescription struct {
	Capabilities sandbox.Capabilities
	// Lister and ExecDialer: the runtime is a sandbox.Lister, a
	// sandbox.ExecDialer.
	Lister, ExecDialer bool
}

// SandboxShapes write a sandbox spec and read a runtime's capabilities in
// the JSON of one plugin protocol version.
type SandboxShapes interface {
	EncodeSpec(spec sandbox.Spec) ([]byte, error)
	DecodeCapabilities(data []byte) (sandbox.Capabilities, error)
}

// WireShapes are protocol 3's shapes: wire.SandboxSpec and
// wire.SandboxCapabilities. (The host keeps protocol 2's.)
var WireShapes SandboxShapes = wireShapes{}

type wireShapes struct{}

func (wireShapes) EncodeSpec(spec sandbox.Spec) ([]byte, error) {
	return json.Marshal(FromSandboxSpec(spec))
}

func (wireShapes) DecodeCapabilities(data []byte) (sandbox.Capabilities, error) {
	var w wire.SandboxCapabilities
	if err := json.Unmarshal(data, &w); err != nil {
		return sandbox.Capabilities{}, err
	}
	return SandboxCapabilities(w)
}

// DescribeRuntime asks the plugin's sandbox runtime to describe itself
// (the service makes the runtime then), reading its capabilities in
// shapes. The runtime's failure to be made is returned with its text; a
// failure of the channel wraps ErrChannel.
func DescribeRuntime(ctx context.Context, c sandboxruntimepb.SandboxRuntimeClient, shapes SandboxShapes) (RuntimeDescription, error) {
	resp, err := c.Describe(ctx, &sandboxruntimepb.DescribeRequest{})
	if err != nil {
		return RuntimeDescription{}, channelError(ctx, "describe", err)
	}
	if err := DecodeError(resp.GetError()); err != nil {
		return RuntimeDescription{}, err
	}
	d := RuntimeDescription{Lister: resp.GetLister(), ExecDialer: resp.GetExecDialer()}
	if d.Capabilities, err = shapes.DecodeCapabilities(resp.GetCapabilities()); err != nil {
		return RuntimeDescription{}, fmt.Errorf("the plugin's capabilities are not valid: %w", err)
	}
	return d, nil
}

// RuntimeClient is a sandbox.Runtime over one connection to a plugin's
// sandbox runtime service, whose capabilities are Caps, writing specs in
// Shapes (nil is WireShapes, protocol 3). It has Pause,
// Resume, List and DialExec whatever the runtime is (the runtime answers
// an *sandbox.UnsupportedError for what it cannot do);
// RuntimeDescription says which the runtime has. A runtime's errors are
// rebuilt by DecodeError; a call whose context ended returns an error
// wrapping the context's error, and any other failure of the channel one
// wrapping ErrChannel.
type RuntimeClient struct {
	Client sandboxruntimepb.SandboxRuntimeClient
	Caps   sandbox.Capabilities
	Shapes SandboxShapes
}

// channelError is the error of op whose RPC failed with err: one wrapping
// ctx's error when ctx ended (or its deadline passed, before its timer
// fired), else one wrapping ErrChannel.
func channelError(ctx context.Context, op string, err error) error {
	if cerr := ctxErr(ctx); cerr != nil {
		return fmt.Errorf("%s: %w", op, cerr)
	}
	return fmt.Errorf("%s: %w: %w", op, ErrChannel, err)
}

// ctxErr is ctx.Err(), or context.DeadlineExceeded once ctx's deadline
// has passed.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// Capabilities returns Caps.
func (c RuntimeClient) Capabilities() sandbox.Capabilities { return c.Caps }

func (c RuntimeClient) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Handle, error) {
	shapes := c.Shapes
	if shapes == nil {
		shapes = WireShapes
	}
	body, err := shapes.EncodeSpec(spec)
	if err != nil {
		return sandbox.Handle{}, err
	}
	resp, err := c.Client.Start(ctx, &sandboxruntimepb.StartRequest{Spec: body})
	if err != nil {
		return sandbox.Handle{}, channelError(ctx, "start", err)
	}
	if err := DecodeError(resp.GetError()); err != nil {
		return sandbox.Handle{}, err
	}
	return handleFromPB(resp.GetHandle()), nil
}

func (c RuntimeClient) Exec(ctx context.Context, h sandbox.Handle, req sandbox.ExecRequest, events func(sandbox.ExecEvent)) (sandbox.ExitStatus, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Client.Exec(sctx)
	if err != nil {
		return sandbox.ExitStatus{}, channelError(ctx, "exec", err)
	}
	start := &sandboxruntimepb.ExecStart{Handle: handleToPB(h), Command: req.Command, Env: req.Env, Dir: req.Dir, Stdin: req.Stdin != nil}
	if err := stream.Send(&sandboxruntimepb.ExecInput{Input: &sandboxruntimepb.ExecInput_Start{Start: start}}); err != nil {
		return sandbox.ExitStatus{}, channelError(ctx, "exec", err)
	}
	if req.Stdin == nil {
		stream.CloseSend()
	} else {
		// The input is sent until it ends (a read error ends it too) or
		// the command does; a read still blocked then ends with the input.
		go func() {
			defer stream.CloseSend()
			buf := make([]byte, chunkSize)
			for {
				n, err := req.Stdin.Read(buf)
				if n > 0 {
					if stream.Send(&sandboxruntimepb.ExecInput{Input: &sandboxruntimepb.ExecInput_Stdin{Stdin: buf[:n]}}) != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
	for {
		out, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return sandbox.ExitStatus{}, channelError(ctx, "exec", errors.New("the plugin ended the command without its exit status"))
		}
		if err != nil {
			return sandbox.ExitStatus{}, channelError(ctx, "exec", err)
		}
		switch e := out.GetEvent().(type) {
		case *sandboxruntimepb.ExecOutput_Output:
			if events != nil {
				events(sandbox.ExecEvent{Stream: sandbox.Stream(e.Output.GetStream()), Data: e.Output.GetData()})
			}
		case *sandboxruntimepb.ExecOutput_ExitCode:
			return sandbox.ExitStatus{Code: int(e.ExitCode)}, nil
		case *sandboxruntimepb.ExecOutput_Error:
			return sandbox.ExitStatus{}, DecodeError(e.Error)
		}
	}
}

func (c RuntimeClient) ReadFile(ctx context.Context, h sandbox.Handle, path string) (io.ReadCloser, error) {
	sctx, cancel := context.WithCancel(ctx)
	stream, err := c.Client.ReadFile(sctx, &sandboxruntimepb.FileRequest{Handle: handleToPB(h), Path: path})
	if err != nil {
		cancel()
		return nil, channelError(ctx, "read file", err)
	}
	first, err := stream.Recv()
	if err != nil {
		cancel()
		return nil, channelError(ctx, "read file", err)
	}
	if err := DecodeError(first.GetError()); err != nil {
		cancel()
		return nil, err
	}
	return &fileReader{ctx: ctx, stream: stream, cancel: cancel, buf: first.GetData()}, nil
}

// fileReader reads a ReadFile stream; Close cancels it.
type fileReader struct {
	ctx    context.Context
	stream sandboxruntimepb.SandboxRuntime_ReadFileClient
	cancel context.CancelFunc
	buf    []byte
	err    error // once the stream ended
}

func (r *fileReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		chunk, err := r.stream.Recv()
		switch {
		case errors.Is(err, io.EOF):
			r.err = io.EOF
		case err != nil:
			r.err = channelError(r.ctx, "read file", err)
		case chunk.GetError() != nil:
			r.err = DecodeError(chunk.GetError())
		default:
			r.buf = chunk.GetData()
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *fileReader) Close() error {
	r.cancel()
	return nil
}

func (c RuntimeClient) WriteFile(ctx context.Context, h sandbox.Handle, path string, data io.Reader, perm fs.FileMode) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Client.WriteFile(sctx)
	if err != nil {
		return channelError(ctx, "write file", err)
	}
	start := &sandboxruntimepb.WriteStart{Handle: handleToPB(h), Path: path, Perm: uint32(perm)}
	if err := stream.Send(&sandboxruntimepb.WriteInput{Input: &sandboxruntimepb.WriteInput_Start{Start: start}}); err != nil {
		return channelError(ctx, "write file", err)
	}
	buf := make([]byte, chunkSize)
	for {
		n, rerr := data.Read(buf)
		if n > 0 {
			if err := stream.Send(&sandboxruntimepb.WriteInput{Input: &sandboxruntimepb.WriteInput_Data{Data: buf[:n]}}); err != nil {
				if errors.Is(err, io.EOF) {
					break // the plugin answered already: an error, below
				}
				return channelError(ctx, "write file", err)
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			// Cancelling the stream fails the write in the plugin.
			return fmt.Errorf("write file %s: %w", path, rerr)
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return channelError(ctx, "write file", err)
	}
	return DecodeError(resp.GetError())
}

func (c RuntimeClient) Stat(ctx context.Context, h sandbox.Handle, path string) (sandbox.FileInfo, error) {
	resp, err := c.Client.Stat(ctx, &sandboxruntimepb.FileRequest{Handle: handleToPB(h), Path: path})
	if err != nil {
		return sandbox.FileInfo{}, channelError(ctx, "stat", err)
	}
	if err := DecodeError(resp.GetError()); err != nil {
		return sandbox.FileInfo{}, err
	}
	return infoFromPB(resp.GetInfo()), nil
}

func (c RuntimeClient) ReadDir(ctx context.Context, h sandbox.Handle, path string) ([]sandbox.FileInfo, error) {
	resp, err := c.Client.ReadDir(ctx, &sandboxruntimepb.FileRequest{Handle: handleToPB(h), Path: path})
	if err != nil {
		return nil, channelError(ctx, "read dir", err)
	}
	if err := DecodeError(resp.GetError()); err != nil {
		return nil, err
	}
	list := make([]sandbox.FileInfo, len(resp.GetEntries()))
	for i, fi := range resp.GetEntries() {
		list[i] = infoFromPB(fi)
	}
	return list, nil
}

func infoFromPB(fi *sandboxruntimepb.FileInfo) sandbox.FileInfo {
	return sandbox.FileInfo{Name: fi.GetName(), Size: fi.GetSize(), Mode: fs.FileMode(fi.GetMode()), ModTime: time.Unix(0, fi.GetModTime())}
}

func (c RuntimeClient) Remove(ctx context.Context, h sandbox.Handle, path string) error {
	resp, err := c.Client.Remove(ctx, &sandboxruntimepb.FileRequest{Handle: handleToPB(h), Path: path})
	if err != nil {
		return channelError(ctx, "remove", err)
	}
	return DecodeError(resp.GetError())
}

func (c RuntimeClient) Destroy(ctx context.Context, h sandbox.Handle) error {
	resp, err := c.Client.Destroy(ctx, &sandboxruntimepb.HandleRequest{Handle: handleToPB(h)})
	if err != nil {
		return channelError(ctx, "destroy", err)
	}
	return DecodeError(resp.GetError())
}

func (c RuntimeClient) Recover(ctx context.Context, h sandbox.Handle) (sandbox.State, error) {
	resp, err := c.Client.Recover(ctx, &sandboxruntimepb.HandleRequest{Handle: handleToPB(h)})
	if err != nil {
		return sandbox.State{}, channelError(ctx, "recover", err)
	}
	if err := DecodeError(resp.GetError()); err != nil {
		return sandbox.State{}, err
	}
	return sandbox.State{Status: sandbox.Status(resp.GetStatus()), Handle: handleFromPB(resp.GetHandle())}, nil
}

func (c RuntimeClient) Pause(ctx context.Context, h sandbox.Handle) error {
	resp, err := c.Client.Pause(ctx, &sandboxruntimepb.HandleRequest{Handle: handleToPB(h)})
	if err != nil {
		return channelError(ctx, "pause", err)
	}
	return DecodeError(resp.GetError())
}

func (c RuntimeClient) Resume(ctx context.Context, h sandbox.Handle) error {
	resp, err := c.Client.Resume(ctx, &sandboxruntimepb.HandleRequest{Handle: handleToPB(h)})
	if err != nil {
		return channelError(ctx, "resume", err)
	}
	return DecodeError(resp.GetError())
}

func (c RuntimeClient) List(ctx context.Context) ([]string, error) {
	resp, err := c.Client.List(ctx, &sandboxruntimepb.ListRequest{})
	if err != nil {
		return nil, channelError(ctx, "list", err)
	}
	if err := DecodeError(resp.GetError()); err != nil {
		return nil, err
	}
	return resp.GetIds(), nil
}

// DialExec opens a connection to the execution API of the sandbox of h,
// carried by one stream of the plugin's connection: many may be open at
// once, each for as long as its user keeps it (an HTTP client's
// keep-alive). ctx bounds the dial only.
func (c RuntimeClient) DialExec(ctx context.Context, h sandbox.Handle) (net.Conn, error) {
	sctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel) // until the dial is answered
	stream, err := c.Client.DialExec(sctx)
	if err != nil {
		stop()
		cancel()
		return nil, channelError(ctx, "dial exec", err)
	}
	fail := func(err error) (net.Conn, error) {
		stop()
		cancel()
		return nil, err
	}
	if err := stream.Send(&sandboxruntimepb.DialInput{Input: &sandboxruntimepb.DialInput_Handle{Handle: handleToPB(h)}}); err != nil {
		return fail(channelError(ctx, "dial exec", err))
	}
	first, err := stream.Recv()
	if err != nil {
		return fail(channelError(ctx, "dial exec", err))
	}
	if err := DecodeError(first.GetError()); err != nil {
		return fail(err)
	}
	if !stop() {
		cancel()
		return nil, fmt.Errorf("dial exec: %w", context.Cause(ctx))
	}
	conn := &streamConn{stream: stream, cancel: cancel, data: make(chan []byte, 1), closed: make(chan struct{}), rChanged: make(chan struct{})}
	go conn.pump()
	return conn, nil
}

// streamConn is a DialExec stream as a net.Conn. A read deadline ends a
// blocked Read; a write deadline is checked before each Write, and a
// Write blocked on the stream's flow control is ended by Close.
type streamConn struct {
	stream sandboxruntimepb.SandboxRuntime_DialExecClient
	cancel context.CancelFunc

	data    chan []byte   // from pump; closed when the stream ends
	readErr error         // why data was closed: set before
	buf     []byte        // the rest of the last chunk read
	closed  chan struct{} // closed by Close
	close   sync.Once

	mu        sync.Mutex
	rDeadline time.Time
	rChanged  chan struct{} // closed and replaced when rDeadline changes
	wDeadline time.Time

	wmu sync.Mutex // serialises the stream's sends
}

// pump receives the stream's bytes into data until it ends.
func (c *streamConn) pump() {
	defer close(c.data)
	for {
		out, err := c.stream.Recv()
		if err != nil {
			c.readErr = io.EOF
			if !errors.Is(err, io.EOF) {
				c.readErr = fmt.Errorf("sandbox agent connection: %w: %w", ErrChannel, err)
			}
			return
		}
		if e := out.GetError(); e != nil {
			c.readErr = DecodeError(e)
			return
		}
		select {
		case c.data <- out.GetData():
		case <-c.closed:
			c.readErr = net.ErrClosed
			return
		}
	}
}

func (c *streamConn) Read(p []byte) (int, error) {
	for len(c.buf) == 0 {
		if err := c.wait(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	return n, nil
}

// wait waits for the next chunk, the read deadline, a new deadline or
// Close.
func (c *streamConn) wait() error {
	c.mu.Lock()
	deadline, changed := c.rDeadline, c.rChanged
	c.mu.Unlock()
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if d <= 0 {
			return os.ErrDeadlineExceeded
		}
		timer := time.NewTimer(d)
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case b, ok := <-c.data:
		if !ok {
			return c.readErr
		}
		c.buf = b
		return nil
	case <-timeout:
		return os.ErrDeadlineExceeded
	case <-changed:
		return nil
	case <-c.closed:
		return net.ErrClosed
	}
}

func (c *streamConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
	}
	c.mu.Lock()
	deadline := c.wDeadline
	c.mu.Unlock()
	if !deadline.IsZero() && !time.Now().Before(deadline) {
		return 0, os.ErrDeadlineExceeded
	}
	for n := 0; n < len(p); {
		m := min(len(p)-n, chunkSize)
		if err := c.stream.Send(&sandboxruntimepb.DialInput{Input: &sandboxruntimepb.DialInput_Data{Data: p[n : n+m]}}); err != nil {
			return n, fmt.Errorf("sandbox agent connection: %w: %w", ErrChannel, err)
		}
		n += m
	}
	return len(p), nil
}

// CloseWrite half-closes the connection: the agent reads its end.
func (c *streamConn) CloseWrite() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.stream.CloseSend()
}

// Close ends the stream; it is idempotent.
func (c *streamConn) Close() error {
	c.close.Do(func() {
		close(c.closed)
		c.cancel()
	})
	return nil
}

func (c *streamConn) LocalAddr() net.Addr  { return streamAddr{} }
func (c *streamConn) RemoteAddr() net.Addr { return streamAddr{} }

func (c *streamConn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

func (c *streamConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rDeadline = t
	close(c.rChanged)
	c.rChanged = make(chan struct{})
	return nil
}

func (c *streamConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wDeadline = t
	return nil
}

// streamAddr is both ends' address of a streamConn.
type streamAddr struct{}

func (streamAddr) Network() string { return "kiln-plugin" }
func (streamAddr) String() string  { return "sandbox-agent" }

// Interface guards.
var (
	_ sandbox.Runtime    = RuntimeClient{}
	_ sandbox.Pauser     = RuntimeClient{}
	_ sandbox.Lister     = RuntimeClient{}
	_ sandbox.ExecDialer = RuntimeClient{}
	_ net.Conn           = (*streamConn)(nil)
)
