package sandboxrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"sync"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/sandboxruntimepb"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// chunkSize is the most bytes one message of a stream carries: file
// contents, a command's input and output, a connection's bytes.
const chunkSize = 64 << 10

// NewRuntimeServer returns the gRPC sandbox runtime service over the
// runtime open returns. open is called by the first Describe (the host
// calls it at each start, before anything else) with its context, until
// it succeeds; its error is Describe's, which fails the start with its
// text. Every other call before open succeeded fails with an error.
//
// The service speaks protocol 3: the capabilities and a spec are
// wire.SandboxCapabilities and wire.SandboxSpec as JSON. A runtime's own
// errors travel as Error messages (EncodeError); the service returns a
// gRPC error only for a malformed request.
func NewRuntimeServer(open func(context.Context) (sandbox.Runtime, error)) sandboxruntimepb.SandboxRuntimeServer {
	return &runtimeServer{open: open}
}

type runtimeServer struct {
	sandboxruntimepb.UnimplementedSandboxRuntimeServer
	open func(context.Context) (sandbox.Runtime, error)

	mu sync.Mutex
	rt sandbox.Runtime
}

// runtime returns the runtime open made, or an error before it did.
func (s *runtimeServer) runtime() (sandbox.Runtime, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rt == nil {
		return nil, errors.New("the sandbox runtime was not described yet")
	}
	return s.rt, nil
}

func (s *runtimeServer) Describe(ctx context.Context, _ *sandboxruntimepb.DescribeRequest) (*sandboxruntimepb.DescribeResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rt == nil {
		rt, err := s.open(ctx)
		if err != nil {
			return &sandboxruntimepb.DescribeResponse{Error: EncodeError(err)}, nil
		}
		s.rt = rt
	}
	caps, err := json.Marshal(FromSandboxCapabilities(s.rt.Capabilities()))
	if err != nil {
		return nil, err
	}
	_, lister := s.rt.(sandbox.Lister)
	_, dialer := s.rt.(sandbox.ExecDialer)
	return &sandboxruntimepb.DescribeResponse{Capabilities: caps, Lister: lister, ExecDialer: dialer}, nil
}

func (s *runtimeServer) Start(ctx context.Context, req *sandboxruntimepb.StartRequest) (*sandboxruntimepb.HandleResponse, error) {
	rt, err := s.runtime()
	if err != nil {
		return nil, err
	}
	var w wire.SandboxSpec
	err = json.Unmarshal(req.GetSpec(), &w)
	var spec sandbox.Spec
	if err == nil {
		spec, err = SandboxSpec(w)
	}
	if err != nil {
		return &sandboxruntimepb.HandleResponse{Error: EncodeError(fmt.Errorf("%w: the spec: %w", sandbox.ErrInvalid, err))}, nil
	}
	h, err := rt.Start(ctx, spec)
	if err != nil {
		return &sandboxruntimepb.HandleResponse{Error: EncodeError(err)}, nil
	}
	return &sandboxruntimepb.HandleResponse{Handle: handleToPB(h)}, nil
}

func (s *runtimeServer) Exec(stream sandboxruntimepb.SandboxRuntime_ExecServer) error {
	rt, err := s.runtime()
	if err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return errors.New("exec: the first message is not the command")
	}
	req := sandbox.ExecRequest{Command: start.GetCommand(), Env: start.GetEnv(), Dir: start.GetDir()}
	if start.GetStdin() {
		pr, pw := io.Pipe()
		defer pr.Close()
		go func() {
			for {
				in, err := stream.Recv()
				if err != nil {
					if errors.Is(err, io.EOF) {
						err = nil
					}
					pw.CloseWithError(err)
					return
				}
				if _, err := pw.Write(in.GetStdin()); err != nil {
					return // the command ended
				}
			}
		}()
		req.Stdin = pr
	}
	st, err := rt.Exec(stream.Context(), handleFromPB(start.GetHandle()), req, func(ev sandbox.ExecEvent) {
		for data := ev.Data; len(data) > 0; {
			n := min(len(data), chunkSize)
			// A failed send means the host is gone: the call's context
			// ends and the command with it.
			_ = stream.Send(&sandboxruntimepb.ExecOutput{Event: &sandboxruntimepb.ExecOutput_Output{Output: &sandboxruntimepb.Output{Stream: int32(ev.Stream), Data: data[:n]}}})
			data = data[n:]
		}
	})
	if err != nil {
		return stream.Send(&sandboxruntimepb.ExecOutput{Event: &sandboxruntimepb.ExecOutput_Error{Error: EncodeError(err)}})
	}
	return stream.Send(&sandboxruntimepb.ExecOutput{Event: &sandboxruntimepb.ExecOutput_ExitCode{ExitCode: int32(st.Code)}})
}

func (s *runtimeServer) ReadFile(req *sandboxruntimepb.FileRequest, stream sandboxruntimepb.SandboxRuntime_ReadFileServer) error {
	rt, err := s.runtime()
	if err != nil {
		return err
	}
	rc, err := rt.ReadFile(stream.Context(), handleFromPB(req.GetHandle()), req.GetPath())
	if err != nil {
		return stream.Send(&sandboxruntimepb.Chunk{Error: EncodeError(err)})
	}
	defer rc.Close()
	if err := stream.Send(&sandboxruntimepb.Chunk{}); err != nil {
		return err
	}
	buf := make([]byte, chunkSize)
	for {
		n, err := rc.Read(buf)
		if n > 0 {
			if err := stream.Send(&sandboxruntimepb.Chunk{Data: buf[:n]}); err != nil {
				return err
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return stream.Send(&sandboxruntimepb.Chunk{Error: EncodeError(err)})
		}
	}
}

func (s *runtimeServer) WriteFile(stream sandboxruntimepb.SandboxRuntime_WriteFileServer) error {
	rt, err := s.runtime()
	if err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return errors.New("write file: the first message does not name the file")
	}
	err = rt.WriteFile(stream.Context(), handleFromPB(start.GetHandle()), start.GetPath(), &writeReader{stream: stream}, fs.FileMode(start.GetPerm()))
	return stream.SendAndClose(&sandboxruntimepb.ErrorResponse{Error: EncodeError(err)})
}

// writeReader reads the bytes of a WriteFile stream.
type writeReader struct {
	stream sandboxruntimepb.SandboxRuntime_WriteFileServer
	buf    []byte
}

func (r *writeReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		in, err := r.stream.Recv()
		if err != nil {
			return 0, err // io.EOF once the host closed its side
		}
		r.buf = in.GetData()
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (s *runtimeServer) Stat(ctx context.Context, req *sandboxruntimepb.FileRequest) (*sandboxruntimepb.StatResponse, error) {
	rt, err := s.runtime()
	if err != nil {
		return nil, err
	}
	fi, err := rt.Stat(ctx, handleFromPB(req.GetHandle()), req.GetPath())
	if err != nil {
		return &sandboxruntimepb.StatResponse{Error: EncodeError(err)}, nil
	}
	return &sandboxruntimepb.StatResponse{Info: infoToPB(fi)}, nil
}

func (s *runtimeServer) ReadDir(ctx context.Context, req *sandboxruntimepb.FileRequest) (*sandboxruntimepb.ReadDirResponse, error) {
	rt, err := s.runtime()
	if err != nil {
		return nil, err
	}
	list, err := rt.ReadDir(ctx, handleFromPB(req.GetHandle()), req.GetPath())
	if err != nil {
		return &sandboxruntimepb.ReadDirResponse{Error: EncodeError(err)}, nil
	}
	resp := &sandboxruntimepb.ReadDirResponse{Entries: make([]*sandboxruntimepb.FileInfo, len(list))}
	for i, fi := range list {
		resp.Entries[i] = infoToPB(fi)
	}
	return resp, nil
}

func (s *runtimeServer) Remove(ctx context.Context, req *sandboxruntimepb.FileRequest) (*sandboxruntimepb.ErrorResponse, error) {
	rt, err := s.runtime()
	if err != nil {
		return nil, err
	}
	return &sandboxruntimepb.ErrorResponse{Error: EncodeError(rt.Remove(ctx, handleFromPB(req.GetHandle()), req.GetPath()))}, nil
}

func (s *runtimeServer) Destroy(ctx context.Context, req *sandboxruntimepb.HandleRequest) (*sandboxruntimepb.ErrorResponse, error) {
	rt, err := s.runtime()
	if err != nil {
		return nil, err
	}
	return &sandboxruntimepb.ErrorResponse{Error: EncodeError(rt.Destroy(ctx, handleFromPB(req.GetHandle())))}, nil
}

func (s *runtimeServer) Recover(ctx context.Context, req *sandboxruntimepb.HandleRequest) (*sandboxruntimepb.RecoverResponse, error) {
	rt, err := s.runtime()
	if err != nil {
		return nil, err
	}
	st, err := rt.Recover(ctx, handleFromPB(req.GetHandle()))
	if err != nil {
		return &sandboxruntimepb.RecoverResponse{Error: EncodeError(err)}, nil
	}
	return &sandboxruntimepb.RecoverResponse{Status: string(st.Status), Handle: handleToPB(st.Handle)}, nil
}

func (s *runtimeServer) Pause(ctx context.Context, req *sandboxruntimepb.HandleRequest) (*sandboxruntimepb.ErrorResponse, error) {
	rt, err := s.runtime()
	if err != nil {
		return nil, err
	}
	return &sandboxruntimepb.ErrorResponse{Error: EncodeError(sandbox.Pause(ctx, rt, handleFromPB(req.GetHandle())))}, nil
}

func (s *runtimeServer) Resume(ctx context.Context, req *sandboxruntimepb.HandleRequest) (*sandboxruntimepb.ErrorResponse, error) {
	rt, err := s.runtime()
	if err != nil {
		return nil, err
	}
	return &sandboxruntimepb.ErrorResponse{Error: EncodeError(sandbox.Resume(ctx, rt, handleFromPB(req.GetHandle())))}, nil
}

func (s *runtimeServer) List(ctx context.Context, _ *sandboxruntimepb.ListRequest) (*sandboxruntimepb.ListResponse, error) {
	rt, err := s.runtime()
	if err != nil {
		return nil, err
	}
	l, ok := rt.(sandbox.Lister)
	if !ok {
		return &sandboxruntimepb.ListResponse{Error: EncodeError(sandbox.Unsupported(rt.Capabilities().Name, "list"))}, nil
	}
	ids, err := l.List(ctx)
	return &sandboxruntimepb.ListResponse{Ids: ids, Error: EncodeError(err)}, nil
}

// DialExec dials the sandbox's agent and copies bytes both ways until the
// agent closes the connection or the host ends the stream. The host
// closing its side half-closes the connection, when it can be.
func (s *runtimeServer) DialExec(stream sandboxruntimepb.SandboxRuntime_DialExecServer) error {
	rt, err := s.runtime()
	if err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	d, ok := rt.(sandbox.ExecDialer)
	if !ok {
		return stream.Send(&sandboxruntimepb.DialOutput{Output: &sandboxruntimepb.DialOutput_Error{Error: EncodeError(sandbox.Unsupported(rt.Capabilities().Name, "an execution agent"))}})
	}
	ctx := stream.Context()
	conn, err := d.DialExec(ctx, handleFromPB(first.GetHandle()))
	if err != nil {
		return stream.Send(&sandboxruntimepb.DialOutput{Output: &sandboxruntimepb.DialOutput_Error{Error: EncodeError(err)}})
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := stream.Send(&sandboxruntimepb.DialOutput{Output: &sandboxruntimepb.DialOutput_Data{}}); err != nil {
		return err
	}
	go func() {
		for {
			in, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				if cw, ok := conn.(interface{ CloseWrite() error }); ok {
					cw.CloseWrite()
				}
				return
			}
			if err != nil {
				conn.Close()
				return
			}
			if _, err := conn.Write(in.GetData()); err != nil {
				conn.Close()
				return
			}
		}
	}()
	buf := make([]byte, chunkSize)
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			if err := stream.Send(&sandboxruntimepb.DialOutput{Output: &sandboxruntimepb.DialOutput_Data{Data: buf[:n]}}); err != nil {
				return err
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
	}
}
