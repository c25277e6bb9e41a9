package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/tetratelabs/wazero/api"
)

// Limits of the streaming HTTP functions (http_open, http_read,
// http_close).
const (
	// MaxHTTPStreamBody is the most bytes a guest may read from one
	// stream (64 MiB); the http_read that would pass it fails, and the
	// stream with it.
	MaxHTTPStreamBody = 64 << 20
	// MaxHTTPReadChunk is the most one http_read returns (1 MiB), however
	// large the guest's buffer.
	MaxHTTPReadChunk = 1 << 20
	// MaxHTTPStreams is the most streams an instance may have open at
	// once.
	MaxHTTPStreams = 16
	// maxEmptyReads is how many (0, nil) reads of a body http_read
	// tolerates before giving up with io.ErrNoProgress.
	maxEmptyReads = 100
)

// httpStreamBodyCap is the cap http_read applies: MaxHTTPStreamBody,
// lowered by tests.
var httpStreamBodyCap int64 = MaxHTTPStreamBody

// httpStreams are an instance's open streams. Only the goroutine running a
// call into the instance touches them (calls on an instance are
// serialized, and an instance is closed by another goroutine only while
// idle), so they need no lock.
type httpStreams struct {
	last int64 // the last handle given; handles are never reused in an instance
	open map[int64]*httpStream
}

// httpStream is one response being read by the guest.
type httpStream struct {
	what string        // "GET <redacted url>", for errors
	body io.ReadCloser // nil once closed at EOF or on failure
	buf  []byte        // http_read's buffer
	read int64         // bytes returned to the guest so far
	eof  bool
	err  error // a failure, returned by every later read
}

// finish closes the body, keeping the handle (the guest closes it).
func (s *httpStream) finish() {
	if s.body != nil {
		s.body.Close()
		s.body = nil
	}
	s.buf = nil
}

// closeStreams closes every open stream of the instance: at the end of
// every call, and when the instance is discarded. Streams never outlive
// the call that opened them.
func (in *instance) closeStreams() {
	for h, s := range in.streams.open {
		s.finish()
		delete(in.streams.open, h)
	}
}

// httpOpenResult is http_open's answer.
type httpOpenResult struct {
	Handle  int64               `json:"handle"`
	Status  int                 `json:"status"`
	Headers map[string][]string `json:"headers,omitempty"`
}

// httpOpen serves http_open: the request of http_request, with the same
// checks, answered as soon as the response's headers arrive. The body is
// read with http_read; it lives as long as the call (ctx).
func (in *instance) httpOpen(ctx context.Context, data []byte) (any, error) {
	if len(in.streams.open) >= MaxHTTPStreams {
		return nil, fmt.Errorf("http_open: %d streams are open, the most an instance may have; close one with http_close", MaxHTTPStreams)
	}
	resp, what, err := in.sendHTTP(ctx, "http_open", data)
	if err != nil {
		return nil, err
	}
	if in.streams.open == nil {
		in.streams.open = map[int64]*httpStream{}
	}
	in.streams.last++
	h := in.streams.last
	in.streams.open[h] = &httpStream{what: what, body: resp.Body}
	return httpOpenResult{Handle: h, Status: resp.StatusCode, Headers: resp.Header}, nil
}

// stream returns the open stream of a handle, or an error naming fn.
func (in *instance) stream(fn string, h int64) (*httpStream, error) {
	s := in.streams.open[h]
	if s == nil {
		return nil, fmt.Errorf("%s: no open stream with handle %d (never opened, closed already, or opened by an earlier call)", fn, h)
	}
	return s, nil
}

// hostHTTPRead serves http_read(handle i64, ptr i32, len i32) -> i64: it
// writes the next bytes of the stream's body, at most len (and at most
// MaxHTTPReadChunk), at ptr and returns how many, blocking until at least
// one byte arrives, the body ends (0, and again on every later read) or
// the call's context ends. A failure returns -n, n the length of an
// {"error": ...} result held for result_take. Raw bytes rather than a
// JSON result: base64 in JSON costs a Go guest 30 to 100 ns a byte to
// decode, a copy into its buffer nothing.
func hostHTTPRead(ctx context.Context, m api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil {
		stack[0] = api.EncodeI64(-1)
		return
	}
	h, ptr, n := int64(stack[0]), api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
	got, err := in.httpRead(ctx, m.Memory(), h, ptr, n)
	if err != nil {
		data, _ := json.Marshal(map[string]string{"error": err.Error()})
		in.pending = data
		stack[0] = api.EncodeI64(-int64(len(data)))
		return
	}
	stack[0] = api.EncodeI64(int64(got))
}

// httpRead reads the next bytes of stream h into mem at ptr, at most n.
func (in *instance) httpRead(ctx context.Context, mem api.Memory, h int64, ptr, n uint32) (int, error) {
	s, err := in.stream("http_read", h)
	if err != nil {
		return 0, err
	}
	switch {
	case s.err != nil:
		return 0, s.err
	case s.eof:
		return 0, nil
	case n == 0:
		return 0, errors.New("http_read: len is 0; read into a buffer of at least one byte")
	case uint64(ptr)+uint64(n) > uint64(mem.Size()):
		return 0, fmt.Errorf("http_read: buffer at %#x+%d is out of memory bounds", ptr, n)
	}
	// One byte past the cap, to tell a body of exactly the cap from a
	// longer one.
	size := min(int64(n), MaxHTTPReadChunk, httpStreamBodyCap-s.read+1)
	if int64(cap(s.buf)) < size {
		s.buf = make([]byte, size)
	}
	buf := s.buf[:size]
	var got int
	for empty := 0; got == 0 && err == nil; empty++ {
		if empty == maxEmptyReads {
			err = io.ErrNoProgress
			break
		}
		got, err = s.body.Read(buf)
	}
	switch {
	case s.read+int64(got) > httpStreamBodyCap:
		s.err = fmt.Errorf("http_read %s: response body is over the %d MiB limit of a stream", s.what, httpStreamBodyCap>>20)
		s.finish()
		return 0, s.err
	case err == io.EOF:
		s.eof = true
		s.finish()
	case err != nil:
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		s.err = fmt.Errorf("http_read %s: %w", s.what, err)
		s.finish()
		if got == 0 {
			return 0, s.err
		}
		// The bytes read before the failure now; the failure next time.
	}
	if !mem.Write(ptr, buf[:got]) {
		return 0, fmt.Errorf("http_read: buffer at %#x+%d is out of memory bounds", ptr, got)
	}
	s.read += int64(got)
	return got, nil
}

// httpClose serves http_close: it closes a stream and frees its handle.
func (in *instance) httpClose(_ context.Context, data []byte) (any, error) {
	var req struct {
		Handle int64 `json:"handle"`
	}
	if err := decodeStrict(data, &req); err != nil {
		return nil, fmt.Errorf("http_close: %w", err)
	}
	s, err := in.stream("http_close", req.Handle)
	if err != nil {
		return nil, err
	}
	s.finish()
	delete(in.streams.open, req.Handle)
	return struct{}{}, nil
}
