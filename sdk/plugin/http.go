package plugin

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
