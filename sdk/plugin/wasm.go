//go:build wasip1

package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"unsafe"
)

// ABIVersion is the Kiln WASM ABI this SDK speaks (specs/wasm-abi.md):
// version 2, which carries every kind Serve takes (a toolset, a model
// provider). The guest returns it from kiln_abi_version; a host that does
// not speak it refuses the module at load.
const ABIVersion = 2

// In a WASM build the module is a WASI reactor (go build
// -buildmode=c-shared): the host runs _initialize, which initializes the
// packages but never calls main. The first call into an export runs
// main.main once, and main's call to Serve registers the toolset. main must
// therefore call Serve and return without blocking; Serve returns at once.

//go:linkname mainMain main.main
func mainMain()

var (
	served   kindsServed
	serveErr error // why Serve's arguments cannot be served
	mainRan  bool
	inbox    = map[uint32][]byte{} // buffers handed out by kiln_alloc, until consumed
	outbox   []byte                // the last response, alive until the next export call
)

// Serve registers the module's kinds — a Toolset, a Provider, or both —
// and returns. Call it from main (and return from main); the host calls
// them through the exports kiln_describe and kiln_call.
func Serve(kinds ...Kind) {
	served, serveErr = collect(kinds)
}

// kinds returns what Serve registered, running main.main on first use.
func kinds() (kindsServed, error) {
	if served.toolset == nil && served.provider == nil && serveErr == nil && !mainRan {
		mainRan = true
		mainMain()
	}
	if serveErr != nil {
		return served, serveErr
	}
	if served.toolset == nil && served.provider == nil {
		return served, errors.New("the plugin's main did not call plugin.Serve")
	}
	return served, nil
}

// toolset returns the registered toolset.
func toolset() (*Toolset, error) {
	k, err := kinds()
	if err == nil && k.toolset == nil {
		err = errors.New("the plugin serves no toolset")
	}
	return k.toolset, err
}

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

// kiln_describe answers {"toolset": [tool specs], "model-provider":
// {description}}, with a member for each kind served.
//
//go:wasmexport kiln_describe
func kilnDescribe() uint64 {
	outbox = nil
	k, err := kinds()
	if err != nil {
		return respond(map[string]string{"error": err.Error()})
	}
	type spec struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema,omitempty"`
		Idempotent  bool            `json:"idempotent"`
	}
	d := map[string]any{}
	if ts := k.toolset; ts != nil {
		specs := make([]spec, 0, len(ts.Tools))
		for _, t := range ts.Tools {
			specs = append(specs, spec{t.Name, t.Description, t.Schema, t.Idempotent})
		}
		d["toolset"] = specs
	}
	if k.provider != nil {
		d["model-provider"] = k.provider.describe()
	}
	return respond(d)
}

//go:wasmexport kiln_call
func kilnCall(ptr, n uint32) uint64 {
	outbox = nil
	req, ok := inbox[ptr]
	delete(inbox, ptr)
	if !ok && n > 0 || uint32(len(req)) < n {
		return respondString("error", "kiln_call: request buffer was not allocated with kiln_alloc")
	}
	if isProviderRequest(req[:n]) {
		return callProvider(req[:n])
	}
	result, err := call(req[:n])
	if err != nil {
		return respondString("error", err.Error())
	}
	return respondString("result", result)
}

// respondJSON keeps data in outbox and returns ptr<<32|len.
func respondJSON(data []byte) uint64 {
	outbox = data
	return uint64(ptrOf(data))<<32 | uint64(len(data))
}

// isProviderRequest reports whether a kiln_call request is for the model
// provider: {"kind":"model-provider",...}; a tool call starts {"tool":.
func isProviderRequest(data []byte) bool {
	return bytes.HasPrefix(data, []byte(`{"kind":"model-provider"`))
}

// callProvider runs a model-provider request: {"op": "models"} answers
// {"models": [...]}, {"op": "turn"} streams text through the delta host
// function and answers {"response": {...}}; failures (and panics) answer
// {"error"}.
func callProvider(data []byte) (packed uint64) {
	var req struct {
		Op       string      `json:"op"`
		Settings Settings    `json:"settings"`
		Model    string      `json:"model"`
		Request  TurnRequest `json:"request"`
	}
	if err := json.Unmarshal(data, &req); err != nil {
		return respondString("error", "kiln_call: bad request: "+err.Error())
	}
	k, err := kinds()
	if err == nil && k.provider == nil {
		err = errors.New("the plugin serves no model provider")
	}
	if err != nil {
		return respondString("error", err.Error())
	}
	p := k.provider
	defer func() {
		if r := recover(); r != nil {
			packed = respondString("error", fmt.Sprintf("%s panicked: %v", req.Op, r))
		}
	}()
	ctx := context.Background()
	switch req.Op {
	case "models":
		var models []ModelInfo
		if p.ListModels != nil {
			if models, err = p.ListModels(ctx, req.Settings); err != nil {
				return respondString("error", err.Error())
			}
		}
		if models == nil {
			models = []ModelInfo{}
		}
		return respond(map[string]any{"models": models})
	case "turn":
		resp, err := p.Turn(ctx, req.Settings, req.Model, req.Request, sendDelta)
		if err != nil {
			return respondString("error", err.Error())
		}
		return respond(map[string]any{"response": resp})
	}
	return respondString("error", fmt.Sprintf("kiln_call: unknown model-provider op %q", req.Op))
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

// appendJSONString appends s as a JSON string. ASCII is escaped here;
// a string with other bytes goes through encoding/json (which also
// replaces invalid UTF-8).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	start := len(b)
	b = append(b, '"')
	run := 0 // start of the bytes not yet copied
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 0x80:
			q, _ := json.Marshal(s)
			return append(b[:start], q...)
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
	return append(b, '"')
}

// parseRequest splits a kiln_call request into the tool name and the
// arguments. The host writes the canonical form
// {"tool":"<name>","args":<json>}; a name with escapes, or any other
// layout, goes through encoding/json.
func parseRequest(data []byte) (tool string, args json.RawMessage, err error) {
	const head, mid = `{"tool":"`, `","args":`
	if bytes.HasPrefix(data, []byte(head)) && len(data) > 0 && data[len(data)-1] == '}' {
		rest := data[len(head) : len(data)-1]
		if i := bytes.IndexByte(rest, '"'); i >= 0 && bytes.IndexByte(rest[:i], '\\') < 0 && bytes.HasPrefix(rest[i:], []byte(mid)) {
			return string(rest[:i]), json.RawMessage(rest[i+len(mid):]), nil
		}
	}
	var req struct {
		Tool string          `json:"tool"`
		Args json.RawMessage `json:"args"`
	}
	if err := json.Unmarshal(data, &req); err != nil {
		return "", nil, fmt.Errorf("kiln_call: bad request: %w", err)
	}
	return req.Tool, req.Args, nil
}

// call decodes a request and runs the tool, turning a panic into an error.
func call(data []byte) (result string, err error) {
	name, args, err := parseRequest(data)
	if err != nil {
		return "", err
	}
	ts, err := toolset()
	if err != nil {
		return "", err
	}
	t := ts.find(name)
	if t == nil {
		return "", fmt.Errorf("unknown tool %q", name)
	}
	if t.Handler == nil {
		return "", fmt.Errorf("tool %q has no handler", name)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("tool %q panicked: %v", name, r)
		}
	}()
	res := t.run(context.Background(), args)
	if res.IsError {
		return "", errors.New(res.Text())
	}
	return res.Text(), nil
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
