// Package inproc runs a plugin author's toolset (sdk/plugin) inside the
// host process, as a toolset.Toolset: the built-in transport. It lives apart
// from package plugins so that reading manifests does not pull in the
// process SDK's gRPC dependencies.
package inproc

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/toolset"
	"github.com/kilnhq/kiln/plugins/wireconv"
	sdkplugin "github.com/kilnhq/kiln/sdk/plugin"
)

// New runs a plugin author's toolset (sdk/plugin) inside the host
// process, behind the same Toolset as the WASM and process hosts: a
// handler's error, an unknown tool and a panic in a handler are tool
// errors; a call after Close, and a call in flight when Close is called,
// wrap plugins.ErrTransport. Each call runs the handler on its own
// goroutine with a context that ends with the caller's and at Close; when
// that context ends first, Call returns at once (the caller's error, or
// the transport error after Close), and the handler runs on until it
// returns (nothing can stop Go code in-process: code that may not honour
// its context belongs in a WASM module). No manifest applies: no
// timeout_ms, no permissions, no memory cap.
//
// New panics if ts has a tool without a name or a handler, or two
// tools of the same name: the programming errors plugin.Serve refuses.
func New(ts sdkplugin.Toolset) toolset.Toolset {
	p := &inProcess{tools: make(map[string]sdkplugin.Tool, len(ts.Tools))}
	p.life, p.end = context.WithCancel(context.Background())
	for i, t := range ts.Tools {
		switch {
		case t.Name == "":
			panic(fmt.Sprintf("inproc.New: tool %d has no name", i))
		case t.Handler == nil:
			panic(fmt.Sprintf("inproc.New: tool %q has no handler", t.Name))
		case p.tools[t.Name].Name != "":
			panic(fmt.Sprintf("inproc.New: tool %q is defined twice", t.Name))
		}
		p.tools[t.Name] = t
		p.specs = append(p.specs, core.ToolSpec{
			Name:        t.Name,
			Description: t.Description,
			Schema:      slices.Clone(t.Schema),
			Idempotent:  t.Idempotent,
		})
	}
	return p
}

// inProcess is the Toolset New returns; it is safe for concurrent
// use.
type inProcess struct {
	tools map[string]sdkplugin.Tool // read-only after New
	specs []core.ToolSpec           // read-only after New
	life  context.Context           // ends at Close
	end   context.CancelFunc
}

var (
	errInProcessClosed = fmt.Errorf("%w: toolset is closed", plugins.ErrTransport)
	errClosedInCall    = fmt.Errorf("%w: toolset was closed during the call", plugins.ErrTransport)
)

// Tools returns copies of the specs, so a caller cannot change them.
func (p *inProcess) Tools(context.Context) ([]core.ToolSpec, error) {
	if p.life.Err() != nil {
		return nil, errInProcessClosed
	}
	out := slices.Clone(p.specs)
	for i := range out {
		out[i].Schema = slices.Clone(out[i].Schema)
	}
	return out, nil
}

// callResult is a handler's outcome.
type callResult struct {
	res core.ToolResult
	err error
}

func (p *inProcess) Call(ctx context.Context, tool string, args json.RawMessage) (core.ToolResult, error) {
	if p.life.Err() != nil {
		return core.ToolResult{}, fmt.Errorf("call %s: %w", tool, errInProcessClosed)
	}
	if err := ctx.Err(); err != nil {
		return core.ToolResult{}, fmt.Errorf("call %s: %w", tool, err)
	}
	t, ok := p.tools[tool]
	if !ok {
		return core.ErrorResult(fmt.Sprintf("unknown tool %q", tool)), nil
	}
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(p.life, func() { cancel(errClosedInCall) })
	defer stop()
	done := make(chan callResult, 1) // buffered: an abandoned handler does not block
	go func() { done <- runInProcess(hctx, &t, slices.Clone(args)) }()
	select {
	case r := <-done:
		if (r.err != nil || r.res.IsError) && context.Cause(hctx) == errClosedInCall {
			// The handler may have failed because Close cancelled it.
			return core.ToolResult{}, fmt.Errorf("call %s: %w", tool, errClosedInCall)
		}
		return r.res, r.err
	case <-hctx.Done():
		if context.Cause(hctx) == errClosedInCall {
			return core.ToolResult{}, fmt.Errorf("call %s: %w", tool, errClosedInCall)
		}
		return core.ToolResult{}, fmt.Errorf("call %s: %w", tool, ctx.Err())
	}
}

// runInProcess calls t's handler, turning a panic into a tool error (its
// stack goes to slog.Default) and an empty error message into "tool
// failed", as the SDK's transports do. A result with a bad part is a
// broken contract, not the tool's failure: it wraps plugins.ErrTransport.
func runInProcess(ctx context.Context, t *sdkplugin.Tool, args json.RawMessage) (r callResult) {
	defer func() {
		if v := recover(); v != nil {
			slog.Default().Error("plugin tool panicked", "tool", t.Name, "panic", v, "stack", string(debug.Stack()))
			r = callResult{res: core.ErrorResult(fmt.Sprintf("tool %q panicked: %v", t.Name, v))}
		}
	}()
	out, err := t.Handler(ctx, args)
	if err != nil {
		msg := cmp.Or(err.Error(), "tool failed")
		return callResult{res: core.ErrorResult(msg)}
	}
	res, err := wireconv.Result(out)
	if err != nil {
		return callResult{err: fmt.Errorf("tool %q: %w: %w", t.Name, plugins.ErrTransport, err)}
	}
	return callResult{res: res}
}

// Close makes later calls fail with plugins.ErrTransport and ends the
// calls in flight at once: their handlers' contexts are cancelled and the
// calls return errors wrapping plugins.ErrTransport. It does not wait for
// the handlers to return. Close is idempotent and returns nil.
func (p *inProcess) Close() error {
	p.end()
	return nil
}

// Interface guard.
var _ toolset.Toolset = (*inProcess)(nil)
