package sandboxrpc

import (
	"context"
	"errors"
	"io/fs"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/sandboxruntimepb"
)

// SandboxRuntimeName is the go-plugin plugin name of the
// "sandbox-runtime" kind (protocol 2).
const SandboxRuntimeName = "sandbox-runtime"

// SandboxRuntimePlugin is the go-plugin adapter of the "sandbox-runtime"
// kind (protocol 2). The guest sets Impl (NewRuntimeServer); the host
// leaves it nil and gets a sandboxruntimepb.SandboxRuntimeClient from
// Dispense.
type SandboxRuntimePlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl     sandboxruntimepb.SandboxRuntimeServer
	OnBroker func(*goplugin.GRPCBroker)
}

// GRPCServer registers the sandbox runtime service.
func (p *SandboxRuntimePlugin) GRPCServer(b *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("sandboxrpc: SandboxRuntimePlugin has no Impl")
	}
	if p.OnBroker != nil {
		p.OnBroker(b)
	}
	sandboxruntimepb.RegisterSandboxRuntimeServer(s, p.Impl)
	return nil
}

// GRPCClient returns a sandboxruntimepb.SandboxRuntimeClient on conn.
func (p *SandboxRuntimePlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return sandboxruntimepb.NewSandboxRuntimeClient(conn), nil
}

// ErrChannel is wrapped by the errors of a sandbox runtime's RPC that
// failed on the channel (the process died, the connection broke), rather
// than with the runtime's own error. The call's context ending is not
// one: that error wraps ctx.Err().
var ErrChannel = errors.New("the plugin's channel failed")

// Error codes (Error.code in sandboxruntime.proto), each the error of
// package sandbox, io/fs or context it stands for.
var errorCodes = []struct {
	code string
	err  error
}{
	{"not_found", sandbox.ErrNotFound},
	{"bad_handle", sandbox.ErrBadHandle},
	{"paused", sandbox.ErrPaused},
	{"unsupported", sandbox.ErrUnsupported},
	{"invalid", sandbox.ErrInvalid},
	{"not_exist", fs.ErrNotExist},
	{"exist", fs.ErrExist},
	{"permission", fs.ErrPermission},
	{"canceled", context.Canceled},
	{"deadline_exceeded", context.DeadlineExceeded},
}

// EncodeError is err on the wire, or nil for nil: its text, the first
// error of errorCodes it wraps, the runtime and operation of an
// *sandbox.UnsupportedError, and the operation, path and inner error of an
// *fs.PathError.
func EncodeError(err error) *sandboxruntimepb.Error {
	if err == nil {
		return nil
	}
	e := &sandboxruntimepb.Error{Message: err.Error(), Code: codeOf(err)}
	var ue *sandbox.UnsupportedError
	if errors.As(err, &ue) {
		e.Runtime, e.Op = ue.Runtime, ue.Op
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		e.Path = &sandboxruntimepb.PathError{Op: pe.Op, Path: pe.Path, Message: pe.Err.Error()}
	}
	return e
}

func codeOf(err error) string {
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}

// DecodeError rebuilds the error EncodeError encoded, or returns nil for
// nil: an error with the same text that wraps the same error of package
// sandbox, io/fs or context (an *sandbox.UnsupportedError of the same
// runtime and operation for "unsupported"), through an *fs.PathError of
// the same operation and path when there was one. An unknown code wraps
// nothing.
func DecodeError(e *sandboxruntimepb.Error) error {
	if e == nil {
		return nil
	}
	var base error
	for _, c := range errorCodes {
		if c.code == e.GetCode() {
			base = c.err
		}
	}
	if e.GetCode() == "unsupported" {
		base = &sandbox.UnsupportedError{Runtime: e.GetRuntime(), Op: e.GetOp()}
	}
	if p := e.GetPath(); p != nil {
		base = &fs.PathError{Op: p.GetOp(), Path: p.GetPath(), Err: withText(p.GetMessage(), base)}
	}
	return withText(e.GetMessage(), base)
}

// withText is an error reading msg that wraps err, err itself when its
// text is msg already.
func withText(msg string, err error) error {
	switch {
	case err == nil:
		return errors.New(msg)
	case err.Error() == msg:
		return err
	}
	return &remoteError{msg, err}
}

// remoteError is a runtime's error rebuilt on the host.
type remoteError struct {
	msg string
	err error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.err }

func handleToPB(h sandbox.Handle) *sandboxruntimepb.Handle {
	return &sandboxruntimepb.Handle{Version: int32(h.Version), Data: h.Data}
}

func handleFromPB(h *sandboxruntimepb.Handle) sandbox.Handle {
	return sandbox.Handle{Version: int(h.GetVersion()), Data: h.GetData()}
}

func infoToPB(fi sandbox.FileInfo) *sandboxruntimepb.FileInfo {
	return &sandboxruntimepb.FileInfo{Name: fi.Name, Size: fi.Size, Mode: uint32(fi.Mode), ModTime: fi.ModTime.UnixNano()}
}

// Interface guard.
var _ goplugin.GRPCPlugin = (*SandboxRuntimePlugin)(nil)
