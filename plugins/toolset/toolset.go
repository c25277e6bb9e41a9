// Package toolset is the "toolset" extension kind: a set of tools a model
// can call, from one plugin. A built-in, a WASM module and a process
// plugin all hand out a Toolset; the kind registers each of its tools with
// the core as "<plugin-id>.<tool>" (a built-in's own tools keep their bare
// names) under the plugin's default approval policy (its manifest's
// interruptOn). plugins/plugintest is its conformance kit.
package toolset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
)

// Name is the kind's name, as manifests list it in "provides".
const Name plugins.Capability = "toolset"

// Toolset is the client of the "toolset" kind.
type Toolset interface {
	// Tools describes the tools. It is called once after loading and may
	// be cached by the caller.
	Tools(ctx context.Context) ([]core.ToolSpec, error)
	// Call runs one tool and returns its result: content parts, and
	// IsError for the tool's own failure (bad arguments, an unknown tool,
	// a refused request), which the model is shown. An error means the
	// tool could not be run: a failure of the channel to the plugin (a
	// trapped module, a dead or closed process) wraps plugins.ErrTransport,
	// and also core.ErrEffectUnknown when the call may have taken effect;
	// a call whose ctx ended or that ran past its deadline returns an
	// error wrapping ctx's error or context.DeadlineExceeded.
	Call(ctx context.Context, tool string, args json.RawMessage) (core.ToolResult, error)
	// Close releases the toolset; calls after Close fail.
	Close() error
}

// Host is where the tools go while the plugin is attached: core.Service.
type Host interface {
	AddTools(source string, tools []core.Tool, defaults core.Policy) error
	AddBareTools(source string, tools []core.Tool, defaults core.Policy) error
	RemoveTools(source string) error
}

func init() { plugins.RegisterKind(Kind{}) }

// Kind is the "toolset" kind.
type Kind struct{}

// Name is "toolset".
func (Kind) Name() plugins.Capability { return Name }

// Attach lists the toolset's tools and adds them to the host (a Host).
func (Kind) Attach(ctx context.Context, a plugins.Attach) (plugins.Attached, error) {
	ts, ok := a.Client.(Toolset)
	if !ok {
		return plugins.Attached{}, fmt.Errorf("the runtime handed out %T for %q, not a toolset", a.Client, Name)
	}
	host, ok := a.Host.(Host)
	if !ok {
		return plugins.Attached{}, errors.New("this server takes no tools")
	}
	specs, err := ts.Tools(ctx)
	if err != nil {
		return plugins.Attached{}, fmt.Errorf("list tools: %w", err)
	}
	bare := a.Builtin != nil && a.Builtin.BareTools
	tools := make([]core.Tool, len(specs))
	names := make([]string, len(specs))
	own, direct := ts.(*of)
	for i, sp := range specs {
		tools[i] = tool{ts: ts, spec: sp, plugin: a.ID, onCall: a.OnCall}
		if direct {
			if lc, ok := own.tools[i].(core.LocalCaller); ok {
				tools[i] = localTool{tool: tools[i].(tool), local: lc}
			}
		}
		names[i] = a.ID + "." + sp.Name
		if bare {
			names[i] = sp.Name
		}
	}
	add := host.AddTools
	if bare {
		add = host.AddBareTools
	}
	if err := add(a.ID, tools, a.Manifest.InterruptOn); err != nil {
		return plugins.Attached{}, err
	}
	// RemoveTools fails only for a source that is not added.
	return plugins.Attached{Items: names, Detach: func() { host.RemoveTools(a.ID) }}, nil
}

// tool is one plugin tool as a core.Tool.
type tool struct {
	ts     Toolset
	spec   core.ToolSpec
	plugin string
	onCall func(plugin string, d time.Duration, err error) // plugins.Attach.OnCall
}

func (t tool) Spec() core.ToolSpec { return t.spec }

// Call returns the toolset's result. An error that wraps
// plugins.ErrTransport is a failure to run the tool and is returned as it
// is (wrapping core.ErrEffectUnknown when the runtime says so); any other
// (a deadline passed, the call cancelled) is shown to the model as a
// result with IsError, as the tool's own failure is. onCall hears the
// error, or the failure's text for a result with IsError.
func (t tool) Call(ctx context.Context, args json.RawMessage) (core.ToolResult, error) {
	start := time.Now()
	res, err := t.ts.Call(ctx, t.spec.Name, args)
	if t.onCall != nil {
		failed := err
		if err == nil && res.IsError {
			failed = errors.New(res.Text())
		}
		t.onCall(t.plugin, time.Since(start), failed)
	}
	switch {
	case errors.Is(err, plugins.ErrTransport):
		return core.ToolResult{}, err
	case err != nil:
		return core.ErrorResult(err.Error()), nil
	}
	return res, nil
}

// localTool is an in-process tool that says which of its calls are
// local (core.LocalCaller).
type localTool struct {
	tool
	local core.LocalCaller
}

func (t localTool) Local(args json.RawMessage) bool { return t.local.Local(args) }

// Of is a Toolset of tools already running in-process (a built-in's core
// tools), in their order: Call calls them directly. A tool that panics
// fails its call, not the server (the panic and its stack go to the
// server's log); after Close, calls fail with plugins.ErrTransport.
func Of(tools ...core.Tool) Toolset { return &of{tools: tools} }

type of struct {
	tools  []core.Tool
	closed atomic.Bool
}

func (o *of) Tools(context.Context) ([]core.ToolSpec, error) {
	specs := make([]core.ToolSpec, len(o.tools))
	for i, t := range o.tools {
		specs[i] = t.Spec()
	}
	return specs, nil
}

// Call runs the tool and returns its result, parts and all; a failure to
// run it (its error, a closed toolset) wraps plugins.ErrTransport, a
// panic is an error the model is shown as the tool's failure, and an
// unknown tool is a result with IsError.
func (o *of) Call(ctx context.Context, tool string, args json.RawMessage) (res core.ToolResult, err error) {
	if o.closed.Load() {
		return core.ToolResult{}, fmt.Errorf("call %s: %w: the toolset is closed", tool, plugins.ErrTransport)
	}
	for _, t := range o.tools {
		if t.Spec().Name != tool {
			continue
		}
		defer func() {
			if v := recover(); v != nil {
				slog.Default().Error("built-in tool panicked", "tool", tool, "panic", v, "stack", string(debug.Stack()))
				res, err = core.ToolResult{}, fmt.Errorf("tool %q panicked: %v", tool, v)
			}
		}()
		res, err := t.Call(ctx, args)
		if err != nil {
			return core.ToolResult{}, fmt.Errorf("%w: %w", plugins.ErrTransport, err)
		}
		return res, nil
	}
	return core.ErrorResult(fmt.Sprintf("unknown tool %q", tool)), nil
}

// Close makes later calls fail; calls in flight run to their end.
func (o *of) Close() error {
	o.closed.Store(true)
	return nil
}

// Interface guards.
var (
	_ plugins.Kind     = Kind{}
	_ Host             = (*core.Service)(nil)
	_ Toolset          = (*of)(nil)
	_ core.Tool        = tool{}
	_ core.LocalCaller = localTool{}
)
