package toolset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/wasm"
	"github.com/kilnhq/kiln/plugins/wireconv"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

func init() { wasm.RegisterKind(Name, wasmKind{}) }

// wasmKind carries the kind over the WASM runtime (specs/wasm-abi.md): the
// module describes its tools as {"tools": [wire.ToolSpec, ...]}, and a
// tool call is the request of op "call", {"tool": "<name>", "args":
// <json>}, answered with a wire.ToolResult.
type wasmKind struct{}

func (wasmKind) Client(m *wasm.Module, description json.RawMessage) (any, error) {
	var d struct {
		Tools []wire.ToolSpec `json:"tools"`
	}
	if err := json.Unmarshal(description, &d); err != nil {
		return nil, fmt.Errorf("malformed tool list: %w", err)
	}
	specs := wireconv.ToolSpecs(d.Tools)
	if err := checkSpecs(specs); err != nil {
		return nil, err
	}
	ts := &wasmToolset{m: m, specs: specs, idempotent: map[string]bool{}}
	for _, s := range specs {
		ts.idempotent[s.Name] = s.Idempotent
	}
	return ts, nil
}

// checkSpecs checks a plugin's tool list: names non-empty and unique,
// schemas valid JSON.
func checkSpecs(specs []core.ToolSpec) error {
	seen := map[string]bool{}
	for i, s := range specs {
		if s.Name == "" || seen[s.Name] {
			return fmt.Errorf("tool %d has an empty or duplicate name %q", i, s.Name)
		}
		seen[s.Name] = true
		if len(s.Schema) > 0 && !json.Valid(s.Schema) {
			return fmt.Errorf("tool %q: schema is not valid JSON", s.Name)
		}
	}
	return nil
}

// wasmToolset is a module's toolset.
type wasmToolset struct {
	m          *wasm.Module
	specs      []core.ToolSpec // as described at load
	idempotent map[string]bool // by tool name; read-only
}

// Tools returns the tools the module described when it was loaded.
func (t *wasmToolset) Tools(context.Context) ([]core.ToolSpec, error) {
	return append([]core.ToolSpec(nil), t.specs...), nil
}

// Call runs the tool in an instance of the module (wasm.Module.Call:
// timeout_ms, transport failures) and returns its result, parts and all.
// The module's own failure, such as an unknown tool, is a result with
// IsError; a result the host cannot read is a transport failure, after
// the tool may have acted.
func (t *wasmToolset) Call(ctx context.Context, tool string, args json.RawMessage) (core.ToolResult, error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	// The canonical body {"tool":"<name>","args":<json>} (the guest SDK
	// parses this form without encoding/json); args are validated and
	// compacted, not HTML-escaped.
	name, _ := json.Marshal(tool)
	b := bodyBuffers.Get().(*bytes.Buffer)
	defer func() {
		if b.Cap() <= maxPooledBody {
			b.Reset()
			bodyBuffers.Put(b)
		}
	}()
	b.Grow(len(name) + len(args) + 20)
	b.WriteString(`{"tool":`)
	b.Write(name)
	b.WriteString(`,"args":`)
	if err := json.Compact(b, args); err != nil {
		return core.ErrorResult(fmt.Sprintf("call %s.%s: arguments are not valid JSON: %v", t.m.ID(), tool, err)), nil
	}
	b.WriteByte('}')
	idempotent := t.idempotent[tool]
	var raw json.RawMessage
	err := t.m.Call(ctx, wasm.Request{Kind: Name, Op: "call", Body: json.RawMessage(b.Bytes()), Idempotent: idempotent}, &raw)
	var own *wasm.GuestError
	switch {
	case errors.As(err, &own):
		return core.ErrorResult(own.Message), nil
	case err != nil:
		return core.ToolResult{}, fmt.Errorf("call %s.%s: %w", t.m.ID(), tool, err)
	}
	res, ok := textResult(raw)
	if !ok {
		err = json.Unmarshal(raw, &res)
	}
	var r core.ToolResult
	if err == nil {
		r, err = wireconv.Result(res)
	}
	if err != nil {
		err = fmt.Errorf("%w: malformed result from kiln_call: %w", plugins.ErrTransport, err)
		if !idempotent {
			err = fmt.Errorf("%w: %w", core.ErrEffectUnknown, err)
		}
		return core.ToolResult{}, fmt.Errorf("call %s.%s: %w", t.m.ID(), tool, err)
	}
	return r, nil
}

// textResult reads the result of one text part as the SDK writes it,
// {"v":1,"parts":[{"type":"text","text":"..."}]}, without encoding/json,
// whose reflection and unquoting cost the host a tenth of a WASM tool
// call; ok is false for any other result, and for text it does not
// unquote as encoding/json would (then the caller decodes it with
// encoding/json).
func textResult(raw []byte) (res wire.ToolResult, ok bool) {
	const head, tail = `{"v":1,"parts":[{"type":"text","text":"`, `"}]}`
	quoted, found := bytes.CutPrefix(raw, []byte(head))
	if !found {
		return res, false
	}
	quoted, found = bytes.CutSuffix(quoted, []byte(tail))
	if !found {
		return res, false
	}
	text, ok := unquote(quoted)
	if !ok {
		return res, false
	}
	return wire.TextResult(text), true
}

// unquote returns the text of the JSON string whose content, between
// its quotes, is q, or false when q is not one, or has an escape this
// does not read (a surrogate, for which encoding/json has rules of its
// own), or is not UTF-8.
func unquote(q []byte) (string, bool) {
	i := 0
	for i < len(q) && q[i] != '\\' && q[i] != '"' && q[i] >= 0x20 {
		i++
	}
	if i == len(q) {
		return string(q), utf8.Valid(q)
	}
	var b strings.Builder
	b.Grow(len(q))
	b.Write(q[:i])
	for i < len(q) {
		switch c := q[i]; {
		case c == '"' || c < 0x20:
			return "", false
		case c != '\\':
			j := i + 1
			for j < len(q) && q[j] != '\\' && q[j] != '"' && q[j] >= 0x20 {
				j++
			}
			b.Write(q[i:j])
			i = j
			continue
		}
		if i+1 == len(q) {
			return "", false
		}
		switch e := q[i+1]; e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			if i+6 > len(q) {
				return "", false
			}
			r, err := strconv.ParseUint(string(q[i+2:i+6]), 16, 16)
			if err != nil || utf16.IsSurrogate(rune(r)) {
				return "", false
			}
			b.WriteRune(rune(r))
			i += 6
			continue
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), utf8.ValidString(b.String())
}

// bodyBuffers hold the bodies of tool calls until Module.Call has
// copied them, for the next call: the host's garbage shows in the cost of
// a call.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody is the largest body buffer kept for reuse.
const maxPooledBody = 64 << 10

// Close closes the module.
func (t *wasmToolset) Close() error { return t.m.Close() }

// Interface guard.
var _ Toolset = (*wasmToolset)(nil)
