package plugin

import "io"

// MaxHTTPResponseBody is the largest response body HTTP returns (4 MiB,
// the WASM host's cap in ABI v1, applied by the native build too); a
// longer body is an error, not truncated.
const MaxHTTPResponseBody = 4 << 20

// HTTPRequest is an HTTP request made with HTTP. In a WASM build only
// hosts listed in the manifest's permissions.network are reachable, and
// the host follows redirects, checking every hop; in a native build the
// request goes out directly (see HTTP).
type HTTPRequest struct {
	Method  string              `json:"method"` // "" means GET
	URL     string              `json:"url"`
	Headers map[string][]string `json:"headers,omitempty"`
	Body    []byte              `json:"body,omitempty"`
}

// HTTPResponse is the answer to an HTTPRequest. Its body is at most
// MaxHTTPResponseBody bytes; a longer body is an error.
type HTTPResponse struct {
	Status  int                 `json:"status"`
	Headers map[string][]string `json:"headers,omitempty"`
	Body    []byte              `json:"body,omitempty"`
}

// Limits of HTTPStream, the WASM host's in ABI v1, applied by the native
// build too where they make sense.
const (
	// MaxHTTPStreamBody is the most bytes one HTTPStream body yields
	// (64 MiB); the Read that would pass it fails, and the body with it.
	MaxHTTPStreamBody = 64 << 20
	// MaxHTTPReadChunk is the most bytes one Read of an HTTPStream body
	// asks the host for (1 MiB); a larger buffer is filled partly.
	MaxHTTPReadChunk = 1 << 20
	// MaxHTTPStreams is the most HTTPStream bodies a WASM plugin may have
	// open at once (16) during a tool call; HTTPStream fails beyond it.
	// The native build does not count them.
	MaxHTTPStreams = 16
)

// HTTPStreamResponse is the answer to HTTPStream: the status and headers
// as soon as they arrive, and the body as it arrives.
type HTTPStreamResponse struct {
	Status  int
	Headers map[string][]string
	// Body yields the response body as it arrives: a Read returns as soon
	// as some bytes are there, not when its buffer is full. Close it when
	// done. It fails after MaxHTTPStreamBody bytes, and it does not
	// outlive the tool call: in a WASM build the host closes every stream
	// when the call returns, in a native build the request ends with the
	// ctx given to HTTPStream.
	Body io.ReadCloser
}
