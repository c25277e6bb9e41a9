//go:build wasip1

package plugin

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// ABIVersion is the Kiln WASM ABI this SDK speaks (specs/wasm-abi.md):
// version 3, which carries every kind Serve takes, dispatched by kind and
// operation, with tool results as parts and model turns as the wire
// contracts. The guest returns it from kiln_abi_version; a host that does
// not speak it refuses the module at load, naming both versions.
const ABIVersion = 3

// In a WASM build the module is a WASI reactor (go build
// -buildmode=c-shared): the host runs _initialize, which initializes the
// packages but never calls main. The first call into an export runs
// main.main once, and main's call to Serve registers the kinds. main must
// therefore call Serve and return without blocking; Serve returns at once.

//go:linkname mainMain main.main
func mainMain()

var (
	served   map[string]WASMKind // by KindName, once Serve's arguments were checked
	serveErr error               // why Serve's arguments cannot be served
	mainRan  bool
	inbox    = map[uint32][]byte{} // buffers handed out by kiln_alloc, until consumed
	outbox   []byte                // the last response, alive until the next export call
)

// Serve registers the module's kinds — a Toolset, a Provider, a kind of
// a package of its own (a WASMKind), or several — and returns. Call it
// from main (and return from main); the host calls them through the
// exports kiln_describe and kiln_call. A kind that is no WASMKind (a
// SandboxRuntime), or two of one name, are a programming error, which
// every request of the host is answered with.
func Serve(kinds ...Kind) {
	served, serveErr = wasmKinds(kinds)
}

// A WASMKind is a Kind that serves itself over the Kiln WASM ABI (Kiln's
// wazero host, specs/wasm-abi.md): in a WASM build Serve takes only
// these. Toolset and Provider are; a kind defined in a package of its own
// implements WASMDescribe and WASMCall in its WASM build (a file with the
// build constraint wasip1), and Kiln carries it once the kind's host
// package is linked (it registers the kind with the WASM runtime,
// wasm.RegisterKind).
type WASMKind interface {
	Kind
	// WASMDescribe returns the kind's description, its member of
	// kiln_describe's "kinds": a value that encodes as a JSON object
	// (encoding/json), which the kind's host package reads. It must
	// depend on the module's code only (the host keeps it). An error says
	// why the kind cannot be served (a provider without Turn).
	WASMDescribe() (any, error)
	// WASMCall runs one request of the operation op, whose members
	// besides "kind" and "op" are body (a JSON object), and returns its
	// result: a value encoding/json encodes, or a json.RawMessage sent as
	// it is. An error is the kind's own failure of the request, which the
	// host hands on as the kind reports failures; a panic is one too.
	WASMCall(ctx context.Context, op string, body json.RawMessage) (any, error)
}

// wasmKinds checks Serve's arguments: WASMKinds, one of each name.
func wasmKinds(kinds []Kind) (map[string]WASMKind, error) {
	if len(kinds) == 0 {
		return nil, errors.New("Serve needs a kind to serve: a Toolset, a Provider or both")
	}
	m := make(map[string]WASMKind, len(kinds))
	for _, k := range kinds {
		wk, ok := k.(WASMKind)
		if !ok {
			return nil, fmt.Errorf("Serve cannot serve %T over the WASM ABI (it is no WASMKind)", k)
		}
		name := k.KindName()
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("Serve got %q twice", name)
		}
		m[name] = wk
	}
	return m, nil
}

// servedKinds returns the kinds Serve registered, by name, running
// main.main on first use.
func servedKinds() (map[string]WASMKind, error) {
	if served == nil && serveErr == nil && !mainRan {
		mainRan = true
		mainMain()
	}
	if serveErr != nil {
		return nil, serveErr
	}
	if served == nil {
		return nil, errors.New("the plugin's main did not call plugin.Serve")
	}
	return served, nil
}

// toolCallHead starts a tool call as the host writes it
// (specs/wasm-abi.md), which kiln_call serves without the generic
// dispatch.
const toolCallHead = `{"kind":"toolset","op":"call",`

//go:wasmexport kiln_abi_version
func kilnABIVersion() int32 { return ABIVersion }

//go:wasmexport kiln_alloc
func kilnAlloc(size int32) uint32 {
	if size <= 0 {
		return 0
	}
	buf := make([]byte, size)
	p := ptrOf(buf)
	inbox[p] = buf
	return p
}

// kiln_describe answers {"kinds": {"<kind>": <its description>, ...}},
// a member for each kind served.
//
//go:wasmexport kiln_describe
func kilnDescribe() uint64 {
	outbox = nil
	served, err := servedKinds()
	if err != nil {
		return respondString("error", err.Error())
	}
	d := map[string]any{}
	for name, wk := range served {
		if d[name], err = wk.WASMDescribe(); err != nil {
			return respondString("error", fmt.Sprintf("%s: %v", name, err))
		}
	}
	return respond(map[string]any{"kinds": d})
}

// kiln_call runs the request {"kind", "op", ...} with the kind served
// and answers {"result": ...}, or {"error": "<message>"} for its own
// failure (a panic included).
//
//go:wasmexport kiln_call
func kilnCall(ptr, n uint32) (packed uint64) {
	outbox = nil
	req, ok := inbox[ptr]
	delete(inbox, ptr)
	if !ok && n > 0 || uint32(len(req)) < n {
		return respondString("error", "kiln_call: request buffer was not allocated with kiln_alloc")
	}
	served, err := servedKinds()
	if err != nil {
		return respondString("error", err.Error())
	}
	if ts, ok := served[Toolset{}.KindName()].(Toolset); ok && bytes.HasPrefix(req[:n], []byte(toolCallHead)) {
		// The hot path of most plugins, without the generic dispatch:
		// at this scale a Go guest's function calls show.
		body := req[len(toolCallHead)-1 : n]
		body[0] = '{' // the request's buffer is the guest's own
		return respondResult(ts.callTool(context.Background(), body))
	}
	kind, op, body, err := parseHead(req[:n])
	if err != nil {
		return respondString("error", err.Error())
	}
	wk, ok := served[string(kind)]
	if !ok {
		return respondString("error", fmt.Sprintf("the plugin serves no %q", kind))
	}
	defer func() {
		if r := recover(); r != nil {
			Log(slog.LevelError, fmt.Sprintf("%s %s panicked: %v\n%s", kind, op, r, debug.Stack()))
			packed = respondString("error", fmt.Sprintf("%s %s panicked: %v", kind, op, r))
		}
	}()
	ctx := context.Background()
	if ts, ok := wk.(Toolset); ok {
		if string(op) != "call" {
			return respondString("error", fmt.Sprintf("kiln_call: unknown toolset op %q", op))
		}
		return respondResult(ts.callTool(ctx, body))
	}
	res, err := wk.WASMCall(ctx, string(op), body)
	if err != nil {
		return respondString("error", err.Error())
	}
	raw, ok := res.(json.RawMessage)
	if !ok {
		if raw, err = json.Marshal(res); err != nil {
			return respondString("error", fmt.Sprintf("encode the %s result: %v", op, err))
		}
	}
	out := make([]byte, 0, len(resultHead)+len(raw)+1)
	out = append(out, resultHead...)
	out = append(out, raw...)
	return respondJSON(append(out, '}'))
}

// resultHead starts kiln_call's answer of a result.
const resultHead = `{"result":`

// respondResult answers a tool's result, {"result": <wire.ToolResult>},
// or its tool call's failure (a malformed request), {"error"}.
func respondResult(res Result, err error) uint64 {
	if err != nil {
		return respondString("error", err.Error())
	}
	out := append(make([]byte, 0, len(resultHead)+resultSize(res)+1), resultHead...)
	return respondJSON(append(appendResult(out, res), '}'))
}

// respondJSON keeps data in outbox and returns ptr<<32|len.
func respondJSON(data []byte) uint64 {
	outbox = data
	return uint64(ptrOf(data))<<32 | uint64(len(data))
}

// parseHead splits a kiln_call request into its kind, its op and its
// other members as a JSON object. The host writes
// {"kind":"<kind>","op":"<op>",...} with names that need no escaping,
// which is split in place, without encoding/json or an allocation (JSON
// and garbage cost a Go WASM guest most); any other layout goes through
// encoding/json (parseHeadJSON).
func parseHead(data []byte) (kind, op, body []byte, err error) {
	const kindHead, opHead = `{"kind":"`, `","op":"`
	if rest, ok := bytes.CutPrefix(data, []byte(kindHead)); ok {
		if i := bytes.IndexByte(rest, '"'); i >= 0 && bytes.IndexByte(rest[:i], '\\') < 0 && bytes.HasPrefix(rest[i:], []byte(opHead)) {
			kind, rest = rest[:i], rest[i+len(opHead):]
			if j := bytes.IndexByte(rest, '"'); j >= 0 && bytes.IndexByte(rest[:j], '\\') < 0 {
				op, rest = rest[:j], rest[j+1:]
				switch {
				case len(rest) == 1 && rest[0] == '}':
					return kind, op, []byte("{}"), nil
				case len(rest) > 1 && rest[0] == ',':
					rest[0] = '{' // the request's buffer is the guest's own
					return kind, op, rest, nil
				}
			}
		}
	}
	return parseHeadJSON(data)
}

// parseHeadJSON is parseHead through encoding/json, for any layout.
func parseHeadJSON(data []byte) (kind, op, body []byte, err error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return nil, nil, nil, fmt.Errorf("kiln_call: bad request: %w", err)
	}
	var k, o string
	if json.Unmarshal(members["kind"], &k) != nil || json.Unmarshal(members["op"], &o) != nil || k == "" || o == "" {
		return nil, nil, nil, errors.New(`kiln_call: bad request: want {"kind": "<kind>", "op": "<op>", ...}`)
	}
	delete(members, "kind")
	delete(members, "op")
	body, err = json.Marshal(members)
	return []byte(k), []byte(o), body, err
}

// WASMDescribe describes the toolset: {"tools": [tool specs]}.
func (ts Toolset) WASMDescribe() (any, error) {
	specs := make([]wire.ToolSpec, 0, len(ts.Tools))
	for _, t := range ts.Tools {
		specs = append(specs, wire.ToolSpec{Name: t.Name, Description: t.Description, Schema: t.Schema, Idempotent: t.Idempotent})
	}
	return map[string]any{"tools": specs}, nil
}

// WASMCall runs the operation "call": {"tool": "<name>", "args": <json>}
// runs the tool and answers its result (wire.ToolResult). An unknown
// tool, a handler's error or panic and a result that breaks the contract
// are the tool's failure: a result with IsError.
//
// kiln_call does not go through WASMCall: it writes the result into the
// answer's buffer by hand (appendResult), without reflection or garbage,
// which a Go guest pays for most.
func (ts Toolset) WASMCall(ctx context.Context, op string, body json.RawMessage) (any, error) {
	if op != "call" {
		return nil, fmt.Errorf("kiln_call: unknown toolset op %q", op)
	}
	res, err := ts.callTool(ctx, body)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(appendResult(make([]byte, 0, resultSize(res)), res)), nil
}

// callTool runs the tool call body, {"tool": "<name>", "args": <json>},
// and returns the tool's result; an error is a malformed body.
func (ts Toolset) callTool(ctx context.Context, body []byte) (Result, error) {
	name, args, err := parseToolCall(body)
	if err != nil {
		return Result{}, err
	}
	var res Result
	switch t := ts.find(name); {
	case t == nil:
		res = wire.ErrorResult(fmt.Sprintf("unknown tool %q", name))
	case t.Handler == nil:
		res = wire.ErrorResult(fmt.Sprintf("tool %q has no handler", name))
	default:
		res = runTool(ctx, t, args)
	}
	if !plainText(res) {
		if err := res.Check(); err != nil {
			res = wire.ErrorResult(fmt.Sprintf("tool %q returned a result Kiln cannot read: %v", name, err))
		}
	}
	return res, nil
}

// plainText reports whether r is of text parts only, each with nothing
// but its text: a result Check would pass but for text that is not
// UTF-8, which appendResult replaces. Such a result is not checked, so
// that a tool's text is read once, not twice.
func plainText(r Result) bool {
	if r.V < 0 || r.V > wire.Version {
		return false
	}
	for _, p := range r.Parts {
		if p.Type != wire.PartText || p.MIME != "" || p.Name != "" || p.Data != nil || p.URI != "" || p.JSON != nil {
			return false
		}
	}
	return true
}

// resultSize estimates the length of r's JSON, so that appendResult
// allocates once: garbage is what a Go guest pays for most (its
// collector is slow), after JSON.
func resultSize(r Result) int {
	n := 64
	for _, p := range r.Parts {
		text := len(p.Text) + len(p.MIME) + len(p.Name) + len(p.URI)
		n += 64 + text + text/8 + base64.StdEncoding.EncodedLen(len(p.Data)) + len(p.JSON)
	}
	return n
}

// runTool runs t, turning a panic into the tool's failure.
func runTool(ctx context.Context, t *Tool, args json.RawMessage) (res Result) {
	defer func() {
		if r := recover(); r != nil {
			Log(slog.LevelError, fmt.Sprintf("tool %q panicked: %v\n%s", t.Name, r, debug.Stack()))
			res = wire.ErrorResult(fmt.Sprintf("tool %q panicked: %v", t.Name, r))
		}
	}()
	return t.run(ctx, args)
}

// parseToolCall splits the body of a tool call into the tool's name and
// its arguments. The host writes the canonical form
// {"tool":"<name>","args":<json>}; a name with escapes, or any other
// layout, goes through encoding/json.
func parseToolCall(body []byte) (tool string, args json.RawMessage, err error) {
	const head, mid = `{"tool":"`, `","args":`
	if bytes.HasPrefix(body, []byte(head)) && body[len(body)-1] == '}' {
		rest := body[len(head) : len(body)-1]
		if i := bytes.IndexByte(rest, '"'); i >= 0 && bytes.IndexByte(rest[:i], '\\') < 0 && bytes.HasPrefix(rest[i:], []byte(mid)) {
			return string(rest[:i]), json.RawMessage(rest[i+len(mid):]), nil
		}
	}
	var req struct {
		Tool string          `json:"tool"`
		Args json.RawMessage `json:"args"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return "", nil, fmt.Errorf("kiln_call: bad tool call: %w", err)
	}
	return req.Tool, req.Args, nil
}

// appendResult appends r as JSON (wire.ToolResult) without reflection;
// Check has passed (or r is plainText), so a JSON part's JSON is valid.
func appendResult(b []byte, r Result) []byte {
	if len(r.Parts) == 1 && r.Parts[0].Type == wire.PartText && !r.IsError && r.V <= wire.Version {
		// Most results: one text part, in fewer steps.
		b = append(b, `{"v":1,"parts":[{"type":"text","text":`...)
		b = appendJSONString(b, r.Parts[0].Text)
		return append(b, `}]}`...)
	}
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(max(r.V, wire.Version)), 10)
	b = append(b, `,"parts":[`...)
	for i, p := range r.Parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":`...)
		b = appendJSONString(b, p.Type)
		for _, f := range [...]struct{ key, value string }{{"text", p.Text}, {"mime_type", p.MIME}, {"name", p.Name}, {"uri", p.URI}} {
			if f.value != "" || f.key == "text" && p.Type == wire.PartText {
				b = append(b, `,"`...)
				b = append(b, f.key...)
				b = append(b, `":`...)
				b = appendJSONString(b, f.value)
			}
		}
		if p.Data != nil {
			b = append(b, `,"data":"`...)
			b = base64.StdEncoding.AppendEncode(b, p.Data)
			b = append(b, '"')
		}
		if p.JSON != nil {
			b = append(b, `,"json":`...)
			b = append(b, p.JSON...)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if r.IsError {
		b = append(b, `,"is_error":true`...)
	}
	return append(b, '}')
}

// WASMDescribe describes the provider (wire.ProviderDescription). A
// provider without Turn cannot be served.
func (p Provider) WASMDescribe() (any, error) {
	if p.Turn == nil {
		return nil, errors.New("the provider has no Turn")
	}
	return p.describe(), nil
}

// WASMCall runs the operations "models", {"settings"} answered with
// {"models": [wire.ModelInfo]}, and "turn", {"settings", "model",
// "request": wire.TurnRequest} answered with a wire.TurnResponse, its
// text streamed through the delta host function as Turn produces it.
func (p Provider) WASMCall(ctx context.Context, op string, body json.RawMessage) (any, error) {
	var req struct {
		Settings Settings         `json:"settings"`
		Model    string           `json:"model"`
		Request  wire.TurnRequest `json:"request"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("kiln_call: bad model-provider request: %w", err)
	}
	switch op {
	case "models":
		var models []ModelInfo
		if p.ListModels != nil {
			var err error
			if models, err = p.ListModels(ctx, req.Settings); err != nil {
				return nil, err
			}
		}
		return map[string]any{"models": wireModels(models)}, nil
	case "turn":
		tr, err := turnRequest(req.Request)
		if err != nil {
			return nil, err
		}
		resp, err := p.Turn(ctx, req.Settings, req.Model, tr, sendDelta)
		if err != nil {
			return nil, err
		}
		return resp.wire(), nil
	}
	return nil, fmt.Errorf("kiln_call: unknown model-provider op %q", op)
}

// sendDelta streams text of the turn in flight to the host.
func sendDelta(text string) {
	if text == "" {
		return
	}
	b := []byte(text)
	hostDelta(unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b)))
	runtime.KeepAlive(b)
}

// respondString answers {"<key>": s} without reflection: JSON in a Go
// WASM guest costs tens of nanoseconds a byte, which dominates small calls.
func respondString(key, s string) uint64 {
	b := make([]byte, 0, len(key)+len(s)+8)
	b = append(b, `{"`...)
	b = append(b, key...)
	b = append(b, `":`...)
	b = appendJSONString(b, s)
	b = append(b, '}')
	outbox = b
	return uint64(ptrOf(b))<<32 | uint64(len(b))
}

// appendJSONString appends s as a JSON string: '"', '\\' and control
// characters escaped, other bytes as they are, and invalid UTF-8 replaced
// by U+FFFD. No reflection, and ASCII is read once: JSON costs a Go guest
// tens of nanoseconds a byte, which dominates small calls.
func appendJSONString(b []byte, s string) []byte {
	start := len(b)
	b, high := appendEscaped(b, s)
	if high >= utf8.RuneSelf && !utf8.ValidString(s) {
		b, _ = appendEscaped(b[:start], strings.ToValidUTF8(s, "\uFFFD"))
	}
	return b
}

// appendEscaped appends s as a JSON string, '"', '\\' and control
// characters escaped and other bytes as they are, and returns the OR of
// its bytes (utf8.RuneSelf or more: s is not ASCII).
func appendEscaped(b []byte, s string) ([]byte, byte) {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	var high byte
	run := 0 // start of the bytes not yet copied
	for i := 0; i < len(s); i++ {
		c := s[i]
		high |= c
		switch {
		case c == '"' || c == '\\':
			b = append(b, s[run:i]...)
			b = append(b, '\\', c)
			run = i + 1
		case c < 0x20:
			b = append(b, s[run:i]...)
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			run = i + 1
		}
	}
	b = append(b, s[run:]...)
	return append(b, '"'), high
}

// respond keeps v's JSON alive in outbox and returns ptr<<32|len.
func respond(v any) uint64 {
	data, err := json.Marshal(v)
	if err != nil {
		data, _ = json.Marshal(map[string]string{"error": "encode response: " + err.Error()})
	}
	outbox = data
	return uint64(ptrOf(data))<<32 | uint64(len(data))
}

func ptrOf(b []byte) uint32 {
	if len(b) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// Host functions of the "kiln" import module (specs/wasm-abi.md).

//go:wasmimport kiln log
func hostLog(level int32, ptr unsafe.Pointer, n uint32)

//go:wasmimport kiln http_request
func hostHTTPRequest(ptr unsafe.Pointer, n uint32) int64

//go:wasmimport kiln http_open
func hostHTTPOpen(ptr unsafe.Pointer, n uint32) int64

//go:wasmimport kiln http_read
func hostHTTPRead(handle int64, ptr unsafe.Pointer, n uint32) int64

//go:wasmimport kiln http_close
func hostHTTPClose(ptr unsafe.Pointer, n uint32) int64

//go:wasmimport kiln fs_read
func hostFSRead(ptr unsafe.Pointer, n uint32) int64

//go:wasmimport kiln fs_write
func hostFSWrite(ptr unsafe.Pointer, n uint32) int64

//go:wasmimport kiln kv_get
func hostKVGet(ptr unsafe.Pointer, n uint32) int64

//go:wasmimport kiln kv_put
func hostKVPut(ptr unsafe.Pointer, n uint32) int64

//go:wasmimport kiln kv_delete
func hostKVDelete(ptr unsafe.Pointer, n uint32) int64

//go:wasmimport kiln kv_list
func hostKVList(ptr unsafe.Pointer, n uint32) int64

//go:wasmimport kiln result_take
func hostResultTake(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport kiln clock_now
func hostClockNow() int64

//go:wasmimport kiln random
func hostRandom(ptr unsafe.Pointer, n uint32)

//go:wasmimport kiln emit
func hostEmit(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport kiln delta
func hostDelta(ptr unsafe.Pointer, n uint32) int32

// hostCall sends req's JSON to a host function that answers with the
// length of a JSON result it holds, fetches that result and decodes it
// into out. A {"error": ...} result is returned as an error.
func hostCall(fn func(unsafe.Pointer, uint32) int64, req, out any) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	n := fn(unsafe.Pointer(unsafe.SliceData(data)), uint32(len(data)))
	runtime.KeepAlive(data)
	if n <= 0 {
		return fmt.Errorf("kiln host call failed (%d)", n)
	}
	buf := make([]byte, n)
	if got := hostResultTake(unsafe.Pointer(unsafe.SliceData(buf)), uint32(n)); int64(got) != n {
		return fmt.Errorf("kiln host result: got %d of %d bytes", got, n)
	}
	return decodeResult(buf, out)
}

// decodeResult decodes a host function's JSON result into out (which may
// be nil); a {"error": ...} result is returned as an error.
func decodeResult(buf []byte, out any) error {
	var e struct {
		Error *string `json:"error"`
	}
	if err := json.Unmarshal(buf, &e); err != nil {
		return fmt.Errorf("kiln host result: %w", err)
	}
	if e.Error != nil {
		return errors.New(*e.Error)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(buf, out)
}

// HTTP performs req through the host. It fails with the host's reason when
// the permission is missing, the connection fails, or the call's deadline
// passes. ctx is accepted for symmetry with the native build; the host
// enforces the call's deadline.
func HTTP(ctx context.Context, req HTTPRequest) (*HTTPResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var resp HTTPResponse
	if err := hostCall(hostHTTPRequest, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// HTTPStream sends req through the host, as HTTP does with the same
// checks (permissions.network before connecting and at every redirect),
// and returns as soon as the response's headers arrive; the body is read
// from the host as it arrives, a chunk per Read. Close the body when done:
// at most MaxHTTPStreams may be open at once. Every stream is closed by
// the host when the tool call returns, and the call's deadline ends a
// Read that waits for bytes. A body over MaxHTTPStreamBody is an error.
// ctx is checked before the request and before every Read; the host
// enforces the call's deadline.
//
// The host functions behind it (http_open, http_read, http_close) were
// added to ABI v1 after its first version: a plugin that calls HTTPStream
// needs a WASM host that provides them, and an older one refuses the
// plugin at load, naming the missing import. A plugin that does not call
// HTTPStream does not import them.
func HTTPStream(ctx context.Context, req HTTPRequest) (*HTTPStreamResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out struct {
		Handle  int64               `json:"handle"`
		Status  int                 `json:"status"`
		Headers map[string][]string `json:"headers"`
	}
	if err := hostCall(hostHTTPOpen, req, &out); err != nil {
		return nil, err
	}
	return &HTTPStreamResponse{
		Status:  out.Status,
		Headers: out.Headers,
		Body:    &hostBody{ctx: ctx, handle: out.Handle},
	}, nil
}

// errBodyClosed is returned by a Read after Close.
var errBodyClosed = errors.New("http: read on closed response body")

// hostBody reads a host stream with http_read.
type hostBody struct {
	ctx    context.Context
	handle int64
	eof    bool
	err    error // sticky
	closed bool
}

func (b *hostBody) Read(p []byte) (int, error) {
	switch {
	case b.closed:
		return 0, errBodyClosed
	case b.err != nil:
		return 0, b.err
	case b.eof:
		return 0, io.EOF
	case len(p) == 0:
		return 0, nil
	}
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	n := hostHTTPRead(b.handle, unsafe.Pointer(unsafe.SliceData(p)), uint32(min(len(p), MaxHTTPReadChunk)))
	runtime.KeepAlive(p)
	switch {
	case n > 0:
		return int(n), nil
	case n == 0:
		b.eof = true
		return 0, io.EOF
	}
	// -n is the length of the {"error": ...} result the host holds.
	buf := make([]byte, -n)
	if got := hostResultTake(unsafe.Pointer(unsafe.SliceData(buf)), uint32(-n)); int64(got) != -n {
		b.err = fmt.Errorf("kiln host result: got %d of %d bytes", got, -n)
	} else if err := decodeResult(buf, nil); err != nil {
		b.err = err
	} else {
		b.err = errors.New("http_read failed")
	}
	return 0, b.err
}

// Close closes the stream in the host and frees its handle. A second
// Close does nothing.
func (b *hostBody) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	return hostCall(hostHTTPClose, struct {
		Handle int64 `json:"handle"`
	}{b.handle}, nil)
}

// ReadFile reads a file by its permission path ("data:/notes.txt",
// "grant:docs/a.md"). The host refuses paths the manifest does not grant
// for reading, grant: paths whose folder grant the user does not have,
// paths that leave their folder through ".." or a symlink, and files with
// more than one hard link in a grant: folder.
func ReadFile(path string) ([]byte, error) {
	var out struct {
		Data []byte `json:"data"`
	}
	if err := hostCall(hostFSRead, map[string]string{"path": path}, &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}

// WriteFile writes data to a file by its permission path, creating or
// replacing it. In data:/ it does not create parent folders; in a grant:
// folder it does. The host refuses paths the manifest does not grant for
// writing, and grant: paths whose folder grant the user does not have, or
// has read-only.
func WriteFile(path string, data []byte) error {
	return hostCall(hostFSWrite, struct {
		Path string `json:"path"`
		Data []byte `json:"data"`
	}{path, data}, nil)
}

// KVGet returns the value of key in the plugin's own key/value namespace,
// or found false when there is none. Keys are 1 to 512 bytes of UTF-8
// without NUL; the host refuses others. It fails when the host gave the
// plugin no key/value store.
func KVGet(key string) (value []byte, found bool, err error) {
	var out struct {
		Found bool   `json:"found"`
		Value []byte `json:"value"`
	}
	if err := hostCall(hostKVGet, map[string]string{"key": key}, &out); err != nil {
		return nil, false, err
	}
	if !out.Found {
		return nil, false, nil
	}
	if out.Value == nil {
		out.Value = []byte{}
	}
	return out.Value, true, nil
}

// KVPut sets key to value in the plugin's key/value namespace. The host
// refuses a bad key, a value over 1 MiB, and a put that would take the
// namespace over its quota (64 MiB of keys and values, 100,000 keys).
// The value is stored when KVPut returns.
func KVPut(key string, value []byte) error {
	return hostCall(hostKVPut, struct {
		Key   string `json:"key"`
		Value []byte `json:"value"`
	}{key, value}, nil)
}

// KVDelete removes key from the plugin's key/value namespace; a missing
// key is not an error.
func KVDelete(key string) error {
	return hostCall(hostKVDelete, map[string]string{"key": key}, nil)
}

// KVList returns the keys of the plugin's key/value namespace that start
// with prefix ("" for all) and sort after after ("" to start at the
// beginning), in byte order, at most limit of them (limit <= 0 or over
// 1000 means 1000). A page shorter than limit is the last; pass the last
// key of a page as after to get the next.
func KVList(prefix, after string, limit int) ([]string, error) {
	var out struct {
		Keys []string `json:"keys"`
	}
	err := hostCall(hostKVList, struct {
		Prefix string `json:"prefix,omitempty"`
		After  string `json:"after,omitempty"`
		Limit  int    `json:"limit,omitempty"`
	}{prefix, after, limit}, &out)
	if err != nil {
		return nil, err
	}
	return out.Keys, nil
}

// Log writes msg to the host's log at level.
func Log(level slog.Level, msg string) {
	b := []byte(msg)
	hostLog(int32(level), unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b)))
	runtime.KeepAlive(b)
}

// Emit sends a progress event (any JSON value) of the call in flight to
// the host. (A WASM instance runs one call at a time, so ctx is not
// needed to tell which; it is taken for the same signature as a native
// build.)
func Emit(_ context.Context, event any) error {
	data, err := json.Marshal(event)
	if err != nil {
		return err
	}
	rc := hostEmit(unsafe.Pointer(unsafe.SliceData(data)), uint32(len(data)))
	runtime.KeepAlive(data)
	if rc != 0 {
		return errors.New("kiln emit: the host refused the event")
	}
	return nil
}

// Now returns the host's wall clock.
func Now() int64 { return hostClockNow() }

// Random fills b with bytes from the host's cryptographic random source.
func Random(b []byte) {
	if len(b) == 0 {
		return
	}
	hostRandom(unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b)))
	runtime.KeepAlive(b)
}
