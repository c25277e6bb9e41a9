//go:build !wasip1

package plugin

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"time"
)

// The host helpers in a native build (a process plugin). They take the
// same arguments and return the same types as in a WASM build, so the
// same source builds both ways, but nothing stands between them and the
// operating system: the process host cannot enforce the manifest's
// permissions (they are declared and consented to, not enforced).

// dataEnv names the environment variable holding the plugin's data folder,
// the "data:/" of ReadFile and WriteFile in a native build. The Kiln
// process host sets it to the plugin's own folder.
const dataEnv = "KILN_PLUGIN_DATA"

// maxFileSize is the largest file ReadFile returns and WriteFile writes,
// as in the WASM host (4 MiB).
const maxFileSize = 4 << 20

// maxLogMessage is the longest Log message, as in the WASM host; a longer
// one is cut (with "…"). It also keeps a log line well within go-plugin's
// 64 KiB stderr line buffer.
const maxLogMessage = 8 << 10

// httpClient sends HTTP's requests: net/http's default transport (which
// honours the proxy variables the manifest declares in env) and at most
// 10 redirects, like the WASM host.
var httpClient = &http.Client{}

// HTTP performs req with net/http, following up to 10 redirects, within
// ctx (the call's deadline in a process plugin). A response body over
// MaxHTTPResponseBody is an error, as in a WASM build; so are credentials
// in the URL (send an Authorization header).
//
// In a native build the manifest's permissions.network is not enforced:
// the process plugin reaches whatever the machine reaches.
func HTTP(ctx context.Context, req HTTPRequest) (*HTTPResponse, error) {
	resp, what, err := sendHTTP(ctx, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxHTTPResponseBody+1))
	if err != nil {
		return nil, fmt.Errorf("%s: read body: %w", what, err)
	}
	if len(body) > MaxHTTPResponseBody {
		return nil, fmt.Errorf("%s: response body is over the %d MiB limit", what, MaxHTTPResponseBody>>20)
	}
	return &HTTPResponse{Status: resp.StatusCode, Headers: resp.Header, Body: body}, nil
}

// HTTPStream sends req as HTTP does and returns as soon as the response's
// headers arrive; the body yields bytes as they arrive. Close the body when
// done. The request, body included, ends with ctx (in a process plugin the
// call's context, which ends when the tool call returns). A body over
// MaxHTTPStreamBody is an error, and a Read returns at most
// MaxHTTPReadChunk bytes, as in a WASM build; open streams are not
// counted (MaxHTTPStreams applies to WASM plugins).
//
// In a native build the manifest's permissions.network is not enforced.
func HTTPStream(ctx context.Context, req HTTPRequest) (*HTTPStreamResponse, error) {
	resp, what, err := sendHTTP(ctx, req)
	if err != nil {
		return nil, err
	}
	return &HTTPStreamResponse{
		Status:  resp.StatusCode,
		Headers: resp.Header,
		Body:    &cappedBody{body: resp.Body, what: what, left: MaxHTTPStreamBody},
	}, nil
}

// sendHTTP checks and sends req within ctx. what names the request for
// error messages ("http GET <url>").
func sendHTTP(ctx context.Context, req HTTPRequest) (resp *http.Response, what string, err error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	u, err := url.Parse(req.URL)
	if err != nil {
		return nil, "", fmt.Errorf("http: bad url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, "", fmt.Errorf("http %s: scheme %q: only http and https are supported", u.Redacted(), u.Scheme)
	}
	if u.User != nil {
		return nil, "", errors.New("http: credentials in the URL are not supported; send an Authorization header")
	}
	hr, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(req.Body))
	if err != nil {
		return nil, "", fmt.Errorf("http: %w", err)
	}
	for k, vs := range req.Headers {
		for _, v := range vs {
			hr.Header.Add(k, v)
		}
	}
	what = fmt.Sprintf("http %s %s", method, u.Redacted())
	resp, err = httpClient.Do(hr)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, "", fmt.Errorf("%s: %w", what, err)
	}
	return resp, what, nil
}

// cappedBody is an HTTPStream body in a native build: reads of at most
// MaxHTTPReadChunk, failing past MaxHTTPStreamBody bytes in all.
type cappedBody struct {
	body io.ReadCloser
	what string
	left int64 // bytes still allowed
	err  error // sticky: over the cap
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	// One byte past the cap, to tell a body of exactly the cap from a
	// longer one.
	p = p[:min(int64(len(p)), MaxHTTPReadChunk, b.left+1)]
	n, err := b.body.Read(p)
	if int64(n) > b.left {
		b.err = fmt.Errorf("%s: response body is over the %d MiB limit of a stream", b.what, MaxHTTPStreamBody>>20)
		b.body.Close()
		return 0, b.err
	}
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.body.Close() }

// resolve maps a permission path to the data folder, opened as an
// os.Root so that neither ".." nor a symlink can leave it, and the path
// inside it. The caller closes the root.
func resolve(p string) (*os.Root, string, error) {
	var rel string
	switch {
	case strings.HasPrefix(p, "data:/"):
		rel = strings.TrimPrefix(p, "data:/")
	case strings.HasPrefix(p, "grant:"):
		return nil, "", fmt.Errorf("%q: folder grants are available to WASM plugins only", p)
	default:
		return nil, "", fmt.Errorf(`%q: paths start with "data:/" or "grant:<name>/"`, p)
	}
	if rel != "" && (path.Clean(rel) != rel || strings.HasPrefix(rel, "../") || rel == "..") || strings.ContainsRune(rel, '\\') {
		return nil, "", fmt.Errorf(`%q: the path must be clean (no ".", ".." or empty segments, forward slashes)`, p)
	}
	dir := os.Getenv(dataEnv)
	if dir == "" {
		return nil, "", fmt.Errorf("%q: no data folder: %s is not set (the Kiln process host sets it)", p, dataEnv)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, "", fmt.Errorf("%q: open the data folder %s: %w", p, dataEnv, err)
	}
	if rel == "" {
		rel = "."
	}
	return root, rel, nil
}

// ReadFile reads a file by its permission path ("data:/notes.txt"). In a
// native build "data:/" is the folder named by the environment variable
// KILN_PLUGIN_DATA, which the Kiln process host sets to the plugin's own
// data folder; without it ReadFile fails. Paths that leave the folder
// through ".." or a symlink are refused, and "grant:" paths fail: folder
// grants are available to WASM plugins only. Files over 4 MiB are
// refused, as in a WASM build. The manifest's permissions.filesystem is
// not enforced natively.
func ReadFile(name string) ([]byte, error) {
	root, rel, err := resolve(name)
	if err != nil {
		return nil, fmt.Errorf("read %w", err)
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", name, unwrapPath(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", name, unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %q: not a regular file", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", name, unwrapPath(err))
	}
	if len(b) > maxFileSize {
		return nil, fmt.Errorf("read %q: larger than %d MiB", name, maxFileSize>>20)
	}
	return b, nil
}

// WriteFile writes data to a file by its permission path, creating or
// truncating it (not its parent folders), with the same paths and limits
// as ReadFile.
func WriteFile(name string, data []byte) error {
	if len(data) > maxFileSize {
		return fmt.Errorf("write %q: larger than %d MiB", name, maxFileSize>>20)
	}
	root, rel, err := resolve(name)
	if err != nil {
		return fmt.Errorf("write %w", err)
	}
	defer root.Close()
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write %q: %w", name, unwrapPath(err))
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q: %w", name, unwrapPath(err))
	}
	return nil
}

// unwrapPath drops the host path from an *os.PathError, as the WASM host
// does, keeping the cause (errors.Is(err, fs.ErrNotExist) still holds).
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// stderr is the process's standard error as it was at start. go-plugin's
// Serve later points os.Stderr at a stream the Kiln host discards, while
// the original stderr is read by the host line by line and logged.
var stderr io.Writer = os.Stderr

// logMu keeps Log's lines whole.
var logMu sync.Mutex

// logLine returns Log's JSON line for msg at level, newline included.
func logLine(t time.Time, level slog.Level, msg string) []byte {
	if len(msg) > maxLogMessage {
		msg = strings.ToValidUTF8(msg[:maxLogMessage], "") + "…"
	}
	line, _ := json.Marshal(struct {
		Level     string `json:"@level"`
		Message   string `json:"@message"`
		Timestamp string `json:"@timestamp"`
	}{hclogLevel(level), msg, t.Format("2006-01-02T15:04:05.000000Z07:00")})
	return append(line, '\n')
}

// hclogLevel names level as hclog does: each slog level counts as the
// nearest named level at or below it (slog.LevelDebug+2 is debug).
func hclogLevel(level slog.Level) string {
	switch {
	case level >= slog.LevelError:
		return "error"
	case level >= slog.LevelWarn:
		return "warn"
	case level >= slog.LevelInfo:
		return "info"
	case level >= slog.LevelDebug:
		return "debug"
	}
	return "trace"
}

// Now returns the wall clock in Unix nanoseconds, as in a WASM build.
func Now() int64 { return time.Now().UnixNano() }

// Random fills b with bytes from crypto/rand.
func Random(b []byte) {
	if len(b) == 0 {
		return
	}
	rand.Read(b)
}
