package wasm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/integrity"
)

// maxResponse caps what a guest may return from kiln_describe or
// kiln_call (16 MiB).
const maxResponse = 16 << 20

// Module is a loaded WASM plugin: a module and its instances, which
// serve the kinds the module describes. A registered Kind makes the kind's
// client of it, which sends it requests with Call.
type Module struct {
	id      string
	host    *Host
	dir     string            // the plugin folder
	m       *plugins.Manifest // its manifest
	key     compiledKey
	rt      wazero.Runtime
	perms   plugins.Permissions
	timeout time.Duration
	logger  *slog.Logger
	emit    func(context.Context, json.RawMessage)
	kv      KV // or nil
	now     func() time.Time
	client  *http.Client
	data    *os.Root              // "data:/", or nil
	grants  plugins.GrantResolver // "grant:<name>", or nil
	max     int                   // most instances at once (MaxInstances)
	mem     *budget               // memory_mib, shared by the instances
	output  *logLimit             // stdout and stderr lines, shared by the instances

	life context.Context // ends at Close, and with it every call in flight
	end  context.CancelFunc

	compiling sync.Mutex // held while the first call compiles the module

	mu       sync.Mutex            // guards the fields below; never held during a call
	compiled wazero.CompiledModule // nil until the first call when Load used a description
	idle     []*instance           // instances between calls, the most recently used last
	count    int                   // instances idle, in a call or starting
	need     uint64                // memory of an instance just started (the largest seen), reserved for the next
	wake     chan struct{}
	closed   bool

	// abi is the module's ABI version and kinds its description of each
	// kind it serves, by kind, as ABI 3's kiln_describe has them (an
	// older module's translated; see legacy.go), both from describe. Set
	// at Load, read-only after.
	abi   int
	kinds map[string]json.RawMessage
}

// instance is one instantiation of the module.
type instance struct {
	m        *Module
	mod      api.Module
	mem      *linearMemory // nil until instantiation allocates it
	reserved uint64        // budget reserved by acquire, until mem takes it
	alloc    api.Function
	call     api.Function
	pending  []byte        // a host function's result, until result_take
	stderr   tail          // the start of stderr in the current call, for errors
	logs     [2]*logWriter // stdout, stderr; nil until instantiated
	streams  httpStreams   // open http_open streams, closed when a call returns

	interrupt     chan struct{} // closed when a call's context ends
	interruptOnce sync.Once
}

func (in *instance) stop() { in.interruptOnce.Do(func() { close(in.interrupt) }) }

// sleep is the guest's nanosleep (WASI poll_oneoff): real time, but cut
// short when the call's context ends, so a sleeping guest meets its
// deadline too.
func (in *instance) sleep(ns int64) {
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-in.interrupt:
	}
}

type instanceKey struct{}

// instanceFrom returns the instance a host function runs for.
func instanceFrom(ctx context.Context) *instance {
	in, _ := ctx.Value(instanceKey{}).(*instance)
	return in
}

var errClosed = errors.New("module is closed")

// ID returns the plugin's ID.
func (t *Module) ID() string { return t.id }

// Manifest returns the plugin's manifest; the caller must not modify it.
// The host enforces its permissions on the module.
func (t *Module) Manifest() *plugins.Manifest { return t.m }

// Request is one request to a kind a module serves: kiln_call's
// {"kind": Kind, "op": Op, ...the members of Body} (specs/wasm-abi.md).
type Request struct {
	Kind plugins.Capability
	Op   string
	// Body holds the request's other members: a JSON object, as a
	// json.RawMessage sent as it is (the caller made sure it is valid,
	// compact JSON) or a value encoding/json encodes as one; nil sends
	// none.
	Body any
	// Idempotent says that the request may run again after it was cut
	// off. When it is false, a failure once the guest's kiln_call began
	// also wraps core.ErrEffectUnknown, unless the caller's ctx ended:
	// the guest may have acted through the host functions.
	Idempotent bool
	// Delta receives the text the guest streams with the delta host
	// function while the request runs (a model turn's text); nil refuses
	// it.
	Delta func(text string)
}

// GuestError is a module's own failure of a request: its answer
// {"error": Message}, such as an unknown tool or a refused API call. It
// is not a transport failure: the instance stays in use.
type GuestError struct {
	Message string
}

func (e *GuestError) Error() string { return e.Message }

// Call sends req to the module and decodes the "result" of its answer
// into result (a pointer, or nil to drop it; a *json.RawMessage receives
// the result's bytes as they are, unchecked, for the caller to decode). A module of ABI version 1
// or 2 gets the request as its version carries it (legacy.go), and fails
// one its version cannot carry.
//
// It returns a *GuestError for the module's own failure; any other error
// is a failure to run the request: a trap, exit, out-of-memory, deadline
// (timeout_ms), cancellation (wrapping ctx's error), a closed module or a
// malformed answer wraps plugins.ErrTransport — and core.ErrEffectUnknown
// when the request is not Idempotent, kiln_call began and ctx did not
// end — and the instance is replaced on the next call.
func (t *Module) Call(ctx context.Context, req Request, result any) error {
	buf := requestBuffers.Get().(*[]byte)
	body, err := t.encode((*buf)[:0], req)
	if err != nil {
		return err
	}
	defer func(enc []byte) {
		if cap(enc) <= maxPooledRequest {
			*buf = enc[:0]
			requestBuffers.Put(buf)
		}
	}(body)
	answer := func(out []byte) ([]byte, error) { return out, nil }
	if t.abi < 3 {
		if body, answer, err = legacyRequest(t.abi, string(req.Kind), req.Op, body); err != nil {
			return err
		}
	}
	if req.Delta != nil {
		ctx = context.WithValue(ctx, deltaKey{}, req.Delta)
	}
	entered := false // the guest's kiln_call began
	out, err := t.request(ctx, body, &entered)
	if err == nil {
		if out, err = answer(out); err == nil {
			err = decodeAnswer(out, result)
		}
		if err != nil {
			var ge *GuestError
			if errors.As(err, &ge) {
				if ge.Message == "" {
					ge.Message = fmt.Sprintf("%s %s failed", req.Kind, req.Op)
				}
				return ge
			}
			err = fmt.Errorf("%w: malformed response from kiln_call: %w", plugins.ErrTransport, err)
		}
	}
	if err != nil && entered && ctx.Err() == nil && !req.Idempotent {
		return fmt.Errorf("%w: %w", core.ErrEffectUnknown, err)
	}
	return err
}

// requestBuffers hold kiln_call requests until they are written into an
// instance's memory, for the next call: a tool call's request is as large
// as its arguments, and the host's garbage shows in the cost of a call.
var requestBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledRequest is the largest request buffer kept for reuse.
const maxPooledRequest = 64 << 10

// encode appends to b the kiln_call request of req: {"kind":"<kind>",
// "op":"<op>"} with Body's members after these two. Kind and op come
// first, so that the guest dispatches on the request's first bytes.
func (t *Module) encode(b []byte, req Request) ([]byte, error) {
	var body []byte
	switch b := req.Body.(type) {
	case nil:
	case json.RawMessage:
		body = b
	default:
		var err error
		if body, err = json.Marshal(b); err != nil {
			return nil, fmt.Errorf("encode the %s %s request: %w", req.Kind, req.Op, err)
		}
	}
	body = bytes.TrimSpace(body)
	if len(body) > 0 && (body[0] != '{' || body[len(body)-1] != '}') {
		return nil, fmt.Errorf("the %s %s request's body is not a JSON object", req.Kind, req.Op)
	}
	b = slices.Grow(b, len(req.Kind)+len(req.Op)+len(body)+24)
	b = append(b, `{"kind":`...)
	b = appendName(b, string(req.Kind))
	b = append(b, `,"op":`...)
	b = appendName(b, req.Op)
	if inner := bytes.TrimSpace(body[min(1, len(body)):max(len(body)-1, 0)]); len(inner) > 0 {
		b = append(b, ',')
		b = append(b, inner...)
	}
	return append(b, '}'), nil
}

// appendName appends a kind's or an operation's name as a JSON string:
// as it is when it needs no escaping (names are lowercase words), else
// through encoding/json.
func appendName(b []byte, name string) []byte {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(name)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"')
}

// decodeAnswer decodes kiln_call's answer: {"result": ...} into result,
// or {"error": "<message>"} as a *GuestError. The SDK writes the answer
// as {"result":<json>}, which is decoded in one pass; any other layout
// goes through a generic decoding.
func decodeAnswer(out []byte, result any) error {
	const head = `{"result":`
	if result != nil && bytes.HasPrefix(out, []byte(head)) && bytes.HasSuffix(out, []byte("}")) {
		if raw, ok := result.(*json.RawMessage); ok {
			*raw = out[len(head) : len(out)-1]
			return nil
		}
		if json.Unmarshal(out[len(head):len(out)-1], result) == nil {
			return nil
		}
	}
	var a struct {
		Result json.RawMessage `json:"result"`
		Error  *string         `json:"error"`
	}
	switch err := json.Unmarshal(out, &a); {
	case err != nil:
		return err
	case a.Error != nil:
		return &GuestError{Message: *a.Error}
	case a.Result == nil:
		return errors.New(`the answer has neither "result" nor "error"`)
	case result == nil:
		return nil
	}
	return json.Unmarshal(a.Result, result)
}

// describe checks the ABI version and reads the module's description of
// the kinds it serves; Load calls it.
func (t *Module) describe(ctx context.Context) error {
	out, err := t.invoke(ctx, func(ctx context.Context, in *instance) (uint64, error) {
		res, err := in.mod.ExportedFunction("kiln_abi_version").Call(ctx)
		if err != nil {
			return 0, err
		}
		v := int32(res[0])
		if v < 1 || v > ABIVersion {
			return 0, fmt.Errorf("module speaks Kiln WASM ABI v%d; this host speaks v1 to v%d", v, ABIVersion)
		}
		t.abi = int(v)
		res, err = in.mod.ExportedFunction("kiln_describe").Call(ctx)
		if err != nil {
			return 0, err
		}
		return res[0], nil
	})
	if err != nil {
		return fmt.Errorf("describe: %w", err)
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(out, &e) == nil && e.Error != "" {
		return fmt.Errorf("describe: %s", e.Error)
	}
	kinds, err := parseDescription(t.abi, out)
	if err != nil {
		return fmt.Errorf("describe: %w", err)
	}
	t.kinds = kinds
	return nil
}

// parseDescription reads kiln_describe's answer: for ABI 3 {"kinds":
// {"<kind>": <its description>, ...}}, one kind at least, each
// description a JSON object; for ABI 1 and 2 see legacyDescription.
func parseDescription(abi int, out []byte) (map[string]json.RawMessage, error) {
	if abi < 3 {
		return legacyDescription(abi, out)
	}
	var d struct {
		Kinds map[string]json.RawMessage `json:"kinds"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		return nil, fmt.Errorf("malformed description: %w", err)
	}
	if len(d.Kinds) == 0 {
		return nil, errors.New(`the module describes no kind: want {"kinds": {"<kind>": {...}}}`)
	}
	for k, v := range d.Kinds {
		if k == "" || !bytes.HasPrefix(v, []byte("{")) {
			return nil, fmt.Errorf("malformed description of kind %q: want a JSON object", k)
		}
	}
	return d.Kinds, nil
}

// invoke runs fn on an instance (acquire) under the call deadline, and
// returns a copy of the packed ptr<<32|len response it points at. The
// deadline covers waiting for an instance too. Any failure throws the
// instance away and wraps ErrTransport; so does Close, which ends the
// call at once.
func (t *Module) invoke(parent context.Context, fn func(context.Context, *instance) (uint64, error)) ([]byte, error) {
	// A module loaded from its description is compiled by the first call,
	// before the call's deadline starts: compiling is the host's work, not
	// the plugin's. It ends with the caller and at Close.
	if c, err := t.current(); c == nil && err == nil {
		cctx, cancelCompile := context.WithCancel(parent)
		stop := context.AfterFunc(t.life, cancelCompile)
		_, err := t.compiledModule(cctx)
		stop()
		cancelCompile()
		if err != nil && (errors.Is(err, plugins.ErrChecksumMismatch) || errors.Is(err, errClosed)) {
			return nil, fmt.Errorf("%w: %w", plugins.ErrTransport, err)
		}
		if err != nil {
			return nil, t.failure(parent, parent, nil, "compile", err)
		}
	}
	ctx, cancel := context.WithTimeout(parent, t.timeout)
	defer cancel()
	defer context.AfterFunc(t.life, cancel)()
	in, err := t.acquire(ctx)
	if errors.Is(err, errClosed) {
		return nil, fmt.Errorf("%w: %w", plugins.ErrTransport, errClosed)
	}
	if err != nil {
		return nil, t.failure(parent, ctx, nil, "wait for a free instance", err)
	}
	ctx = context.WithValue(ctx, instanceKey{}, in)
	if in.mod == nil {
		compiled, err := t.compiledModule(ctx)
		if err != nil {
			t.discard(in)
			if errors.Is(err, plugins.ErrChecksumMismatch) || errors.Is(err, errClosed) {
				return nil, fmt.Errorf("%w: %w", plugins.ErrTransport, err)
			}
			return nil, t.failure(parent, ctx, nil, "compile", err)
		}
		stopWatch := context.AfterFunc(ctx, in.stop)
		err = t.instantiate(ctx, in, compiled)
		if !stopWatch() && err == nil {
			err = ctx.Err()
		}
		if err != nil {
			t.discard(in)
			return nil, t.failure(parent, ctx, in, "instantiate", err)
		}
		if in.mem != nil { // checkModule made sure there is a memory
			size := in.mem.settle()
			t.mu.Lock()
			t.need = max(t.need, size)
			t.mu.Unlock()
		}
	} else {
		in.stderr.reset()
	}
	stopWatch := context.AfterFunc(ctx, in.stop)
	packed, err := fn(ctx, in)
	interrupted := !stopWatch()
	in.closeStreams() // streams never outlive the call
	in.flushLogs()    // nor do partial lines of output
	if err == nil && interrupted {
		err = ctx.Err() // the deadline passed as the call returned: distrust the instance
	}
	var out []byte
	if err == nil {
		out, err = in.read(packed)
	}
	if err != nil {
		t.discard(in)
		return nil, t.failure(parent, ctx, in, "call", err)
	}
	in.pending = nil
	t.release(in)
	return out, nil
}

// compiledModule returns the module's compiled code. When Load did not
// compile it (it had the module's description), the first call does: it
// reads the entry again and checks its sha256 against the manifest again
// (an error wrapping plugins.ErrChecksumMismatch when it changed), then
// compiles it, or takes it from the Host. Calls wait for one compile.
func (t *Module) compiledModule(ctx context.Context) (wazero.CompiledModule, error) {
	if c, err := t.current(); c != nil || err != nil {
		return c, err
	}
	t.compiling.Lock()
	defer t.compiling.Unlock()
	if c, err := t.current(); c != nil || err != nil {
		return c, err
	}
	code, err := integrity.Entry(t.dir, t.m, true)
	if err != nil {
		return nil, err
	}
	c, err := t.host.compile(ctx, t.rt, t.key, code)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		t.host.release(context.Background(), t.key, c)
		return nil, errClosed
	}
	t.compiled = c
	t.mu.Unlock()
	return c, nil
}

// current returns the compiled module (nil before the first call compiled
// it), or errClosed.
func (t *Module) current() (wazero.CompiledModule, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errClosed
	}
	return t.compiled, nil
}

// acquire returns an idle instance (the most recently used), or a new one
// (in.mod nil: the caller instantiates it) while fewer than t.max exist
// and the budget has room for one more at its start size (t.need, which
// is reserved for it; the first instance always starts), or waits for
// one to be free. It fails with errClosed after Close, or with ctx's
// error.
func (t *Module) acquire(ctx context.Context) (*instance, error) {
	for {
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return nil, errClosed
		}
		if n := len(t.idle); n > 0 {
			in := t.idle[n-1]
			t.idle[n-1] = nil
			t.idle = t.idle[:n-1]
			t.mu.Unlock()
			return in, nil
		}
		if t.count < t.max && t.mem.reserve(t.need, t.count == 0) {
			t.count++
			need := t.need
			t.mu.Unlock()
			return &instance{m: t, reserved: need, interrupt: make(chan struct{})}, nil
		}
		wake := t.wake
		t.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// release gives back an instance after a call that succeeded.
func (t *Module) release(in *instance) {
	t.mu.Lock()
	if t.closed {
		t.count--
		t.mu.Unlock()
		in.close()
		return
	}
	t.idle = append(t.idle, in)
	t.wakeLocked()
	t.mu.Unlock()
}

// discard throws an instance away.
func (t *Module) discard(in *instance) {
	in.close()
	t.mu.Lock()
	t.count--
	t.wakeLocked()
	t.mu.Unlock()
}

// evictIdle closes the least recently used idle instance, to give its
// memory to a growing one; false when none is idle.
func (t *Module) evictIdle() bool {
	t.mu.Lock()
	if len(t.idle) == 0 {
		t.mu.Unlock()
		return false
	}
	in := t.idle[0]
	t.idle = slices.Delete(t.idle, 0, 1)
	t.count--
	t.wakeLocked()
	t.mu.Unlock()
	in.close()
	return true
}

// wakeLocked wakes the calls waiting in acquire; t.mu is held.
func (t *Module) wakeLocked() {
	close(t.wake)
	t.wake = make(chan struct{})
}

// read copies the packed ptr<<32|len region out of guest memory.
func (in *instance) read(packed uint64) ([]byte, error) {
	ptr, n := uint32(packed>>32), uint32(packed)
	if n > maxResponse {
		return nil, fmt.Errorf("response of %d bytes is over the %d MiB limit", n, maxResponse>>20)
	}
	b, ok := in.mod.Memory().Read(ptr, n)
	if !ok {
		return nil, fmt.Errorf("response at %#x+%d is out of memory bounds", ptr, n)
	}
	return append([]byte(nil), b...), nil
}

// instantiate creates the module instance: WASI with nothing granted, its
// memory in the plugin's budget (with the credit acquire reserved), and
// the Go runtime initialized by _initialize.
func (t *Module) instantiate(ctx context.Context, in *instance, compiled wazero.CompiledModule) error {
	ctx = experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(func(_, _ uint64) experimental.LinearMemory {
		in.mem = &linearMemory{b: t.mem, credit: in.reserved}
		in.reserved = 0
		return in.mem
	}))
	in.logs = [2]*logWriter{
		{logger: t.logger, level: slog.LevelInfo, stream: "stdout", limit: t.output},
		{logger: t.logger, level: slog.LevelWarn, stream: "stderr", limit: t.output, tail: &in.stderr},
	}
	cfg := wazero.NewModuleConfig().
		WithName(fmt.Sprintf("%s#%d", t.id, t.host.seq.Add(1))).
		WithStartFunctions("_initialize").
		WithStdout(in.logs[0]).
		WithStderr(in.logs[1]).
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(in.sleep).
		WithRandSource(rand.Reader)
	mod, err := t.rt.InstantiateModule(ctx, compiled, cfg)
	if err != nil {
		return err
	}
	in.mod = mod
	in.alloc = mod.ExportedFunction("kiln_alloc")
	in.call = mod.ExportedFunction("kiln_call")
	return nil
}

// flushLogs logs the partial lines of the instance's output.
func (in *instance) flushLogs() {
	for _, w := range in.logs {
		if w != nil {
			w.flush()
		}
	}
}

// close ends the instance and gives its memory back to the budget.
func (in *instance) close() {
	in.stop()
	in.closeStreams()
	if in.mod != nil {
		in.mod.Close(context.Background())
	}
	if in.mem != nil {
		in.mem.Free()
	}
	in.flushLogs()
	in.m.mem.release(in.reserved)
	in.reserved = 0
}

// failure describes why a call into the instance failed, wrapping
// ErrTransport and, for a deadline or cancellation, the context error.
func (t *Module) failure(parent, ctx context.Context, in *instance, step string, err error) error {
	switch {
	case parent.Err() != nil:
		return fmt.Errorf("%w: %s: %w", plugins.ErrTransport, step, parent.Err())
	case t.life.Err() != nil:
		return fmt.Errorf("%w: %s: %w", plugins.ErrTransport, step, errClosed)
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %s: exceeded timeout_ms (%d ms): %w", plugins.ErrTransport, step, t.timeout.Milliseconds(), context.DeadlineExceeded)
	}
	msg, _, _ := strings.Cut(err.Error(), "\n") // not wazero's wasm stack trace
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		msg = fmt.Sprintf("module exited with code %d", exit.ExitCode())
	}
	if in != nil {
		if s := in.stderr.lastLines(2); s != "" {
			msg += " (stderr: " + s + ")"
		}
	}
	return fmt.Errorf("%w: %s: %s", plugins.ErrTransport, step, msg)
}

// Close closes the module. It does not wait for the calls in
// flight: it ends them (they return errors wrapping plugins.ErrTransport
// and throw their instances away as they return), closes the idle
// instances and releases the compiled module; later calls fail at once.
func (t *Module) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	idle := t.idle
	t.idle = nil
	t.count -= len(idle)
	compiled := t.compiled
	t.wakeLocked()
	t.mu.Unlock()
	t.end()
	for _, in := range idle {
		in.close()
	}
	// wazero allows closing a compiled module while calls into its
	// instances are still unwinding.
	var err error
	if compiled != nil {
		err = t.host.release(context.Background(), t.key, compiled)
	}
	if t.client != nil {
		t.client.CloseIdleConnections()
	}
	if t.data != nil {
		t.data.Close()
	}
	return err
}

// request sends one request to kiln_call and returns the response;
// entered reports whether kiln_call began (so that the request may have
// taken effect).
func (t *Module) request(ctx context.Context, req []byte, entered *bool) ([]byte, error) {
	return t.invoke(ctx, func(ctx context.Context, in *instance) (uint64, error) {
		res, err := in.alloc.Call(ctx, uint64(len(req)))
		if err != nil {
			return 0, err
		}
		ptr := uint32(res[0])
		if !in.mod.Memory().Write(ptr, req) {
			return 0, fmt.Errorf("kiln_alloc returned %#x, out of memory bounds", ptr)
		}
		*entered = true
		res, err = in.call.Call(ctx, uint64(ptr), uint64(len(req)))
		if err != nil {
			return 0, err
		}
		return res[0], nil
	})
}
