package marketplace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kilnhq/kiln/core"
)

// Fetcher reads the files of a published marketplace.
//
// rel is a path relative to the marketplace's root: clean, with slashes,
// without "." or ".." segments. For an archive it may also be the
// absolute URL its index gave: an https:// URL, or a file:/// URL when
// the marketplace itself is on disk.
//
// A file that does not exist is an error with code ENOTFOUND; a server
// or network failure one with EUNAVAIL; a rel a Fetcher may not read one
// with EINVALID.
type Fetcher interface {
	// Fetch reads rel whole, refusing it (EINVALID) when it has more than
	// max bytes; it never reads more than max+1.
	Fetch(ctx context.Context, rel string, max int64) ([]byte, error)
	// Open opens rel for reading and returns its size, -1 when unknown.
	// The caller bounds what it reads (CopyArtifact stops past the size
	// the index declares) and closes it.
	Open(ctx context.Context, rel string) (io.ReadCloser, int64, error)
}

// NewFetcher returns the Fetcher of the marketplace at base: an https://
// URL, an http:// URL of a loopback host (127.0.0.0/8, ::1, localhost:
// `kiln marketplace serve` on this machine), a file:/// URL or an absolute
// path of a folder. A URL may not carry credentials, a query or a
// fragment. Redirects are followed only to https://, or between loopback
// addresses. c nil means a client with Go's default transport.
func NewFetcher(base string, c *http.Client) (Fetcher, error) {
	hc := &http.Client{}
	if c != nil {
		cc := *c
		hc = &cc
	}
	hc.CheckRedirect = checkRedirect
	web := &httpFetcher{client: hc}
	if filepath.IsAbs(base) {
		return fileFetcher{dir: filepath.Clean(base), web: web}, nil
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, core.Errorf(core.EINVALID, "marketplace location %q is not a URL or an absolute path", base)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, core.Errorf(core.EINVALID, "marketplace URL %s: no credentials, query or fragment", u.Redacted())
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" || !path.IsAbs(u.Path) {
			return nil, core.Errorf(core.EINVALID, "marketplace URL %s: want file:///absolute/path", base)
		}
		return fileFetcher{dir: filepath.Clean(filepath.FromSlash(u.Path)), web: web}, nil
	case "https":
		if u.Hostname() == "" {
			return nil, core.Errorf(core.EINVALID, "marketplace URL %s has no host", base)
		}
	case "http":
		if !isLoopback(u.Hostname()) {
			return nil, core.Errorf(core.EINVALID, "marketplace URL %s: http:// only to this machine (127.0.0.1, ::1, localhost); use https://", base)
		}
	default:
		return nil, core.Errorf(core.EINVALID, "marketplace location %q: want an https:// URL, a file:/// URL or an absolute path", base)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	u.RawPath = ""
	web.base = u
	return web, nil
}

// Timeouts of NewHTTPClient.
const (
	connectTimeout = 30 * time.Second // to connect, then for the TLS handshake
	headerTimeout  = 30 * time.Second // from the request sent to the response's header
	idleTimeout    = 60 * time.Second // between two reads of the body that return data
)

// NewHTTPClient returns the HTTP client a marketplace is read with. It
// has no limit on a request's whole time, which a large archive on a
// slow link would exceed; instead it gives up on a connection, a TLS
// handshake or a response header that takes longer than 30 s, and on a
// body that stalls (no data for 60 s).
func NewHTTPClient() *http.Client {
	return newHTTPClient(idleTimeout)
}

func newHTTPClient(idle time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = connectTimeout
	t.ResponseHeaderTimeout = headerTimeout
	return &http.Client{Transport: stallTimeout{rt: t, idle: idle}}
}

// stallTimeout cancels a request whose response body stalls: no data
// for idle while it is being read.
type stallTimeout struct {
	rt   http.RoundTripper
	idle time.Duration
}

func (s stallTimeout) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	resp, err := s.rt.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	b := &stallBody{rc: resp.Body, idle: s.idle, cancel: cancel}
	b.timer = time.AfterFunc(s.idle, b.stalled)
	b.timer.Stop()
	resp.Body = b
	return resp, nil
}

// stallBody is a response body whose reads give up after idle without
// data; the time between reads, the reader's own, does not count.
type stallBody struct {
	rc     io.ReadCloser
	idle   time.Duration
	cancel context.CancelFunc
	timer  *time.Timer
	stall  atomic.Bool
}

func (b *stallBody) stalled() {
	b.stall.Store(true)
	b.cancel()
}

func (b *stallBody) Read(p []byte) (int, error) {
	b.timer.Reset(b.idle)
	n, err := b.rc.Read(p)
	b.timer.Stop()
	if b.stall.Load() {
		return n, stallError{b.idle}
	}
	return n, err
}

func (b *stallBody) Close() error {
	b.timer.Stop()
	err := b.rc.Close()
	b.cancel()
	return err
}

// stallError is a body that stalled; a net.Error that timed out.
type stallError struct{ idle time.Duration }

func (e stallError) Error() string   { return fmt.Sprintf("no data received for %s", e.idle) }
func (e stallError) Timeout() bool   { return true }
func (e stallError) Temporary() bool { return true }

// isLoopback reports whether host names this machine: localhost or a
// loopback address.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// checkRedirect refuses a redirect away from https://, except between
// loopback addresses, and more than 10 of them.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	switch {
	case req.URL.Scheme == "https":
		return nil
	case req.URL.Scheme == "http" && isLoopback(req.URL.Hostname()) && isLoopback(via[0].URL.Hostname()):
		return nil
	}
	return fmt.Errorf("redirect to %s refused: not https://", req.URL.Redacted())
}

// checkRel returns why rel is not a path relative to a marketplace's
// root, or "".
func checkRel(rel string) string {
	if !fs.ValidPath(rel) || rel == "." || strings.ContainsAny(rel, `\`) {
		return fmt.Sprintf("%q is not a clean relative path", rel)
	}
	return ""
}

// artifactURL parses s, an absolute artifact URL from an index (https://
// or file:///) or a relative path (for which it returns nil).
func artifactURL(s string) (*url.URL, error) {
	if !strings.HasPrefix(s, "https://") && !strings.HasPrefix(s, "file://") {
		if reason := checkRel(s); reason != "" {
			return nil, errors.New(reason)
		}
		return nil, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, errors.New("not a valid URL")
	}
	switch {
	case u.User != nil:
		return nil, errors.New("a URL with credentials")
	case u.Fragment != "":
		return nil, errors.New("a URL with a fragment")
	case u.Scheme == "https" && u.Hostname() == "":
		return nil, errors.New("an https:// URL without a host")
	case u.Scheme == "file" && (u.Host != "" || u.RawQuery != ""):
		return nil, errors.New("a file URL must be file:///absolute/path")
	case u.Scheme == "file" && (!path.IsAbs(u.Path) || path.Clean(u.Path) != u.Path):
		return nil, errors.New("a file URL's path must be absolute and clean")
	}
	return u, nil
}

// httpFetcher reads a marketplace served over HTTP, and the https://
// archives of any marketplace.
type httpFetcher struct {
	base   *url.URL // nil when it reads only https:// archives
	client *http.Client
}

// resolve returns the URL of rel: below base, or the https:// URL rel is.
func (h *httpFetcher) resolve(rel string) (*url.URL, error) {
	if strings.Contains(rel, "://") {
		u, err := artifactURL(rel)
		if err != nil || u == nil || u.Scheme != "https" {
			return nil, core.Errorf(core.EINVALID, "%q: a marketplace served over HTTP may point only to https:// archives", rel)
		}
		return u, nil
	}
	if reason := checkRel(rel); reason != "" || h.base == nil {
		return nil, core.Errorf(core.EINVALID, "%q is not a clean relative path", rel)
	}
	return h.base.ResolveReference(&url.URL{Path: rel}), nil
}

func (h *httpFetcher) get(ctx context.Context, rel string) (*http.Response, string, error) {
	u, err := h.resolve(rel)
	if err != nil {
		return nil, "", err
	}
	where := u.Redacted()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, where, core.Errorf(core.EINVALID, "%s: %v", where, err)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, where, ctx.Err()
		}
		return nil, where, core.Errorf(core.EUNAVAIL, "GET %s: %v", where, unwrapURLError(err))
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		return resp, where, nil
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		resp.Body.Close()
		return nil, where, core.Errorf(core.ENOTFOUND, "%s: not found", where)
	}
	resp.Body.Close()
	return nil, where, core.Errorf(core.EUNAVAIL, "GET %s: %s", where, resp.Status)
}

// unwrapURLError drops *url.Error's repetition of the method and URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (h *httpFetcher) Fetch(ctx context.Context, rel string, max int64) ([]byte, error) {
	resp, where, err := h.get(ctx, rel)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.ContentLength > max {
		return nil, tooLarge(where, max)
	}
	return readBounded(resp.Body, where, max, resp.ContentLength)
}

func (h *httpFetcher) Open(ctx context.Context, rel string) (io.ReadCloser, int64, error) {
	resp, _, err := h.get(ctx, rel)
	if err != nil {
		return nil, 0, err
	}
	return resp.Body, resp.ContentLength, nil
}

// fileFetcher reads a marketplace from a folder, and its https://
// archives through web.
type fileFetcher struct {
	dir string
	web *httpFetcher
}

// open opens rel, a path inside dir (through no symlink out of it) or a
// file:/// URL, and returns it with its size and the name errors use.
func (d fileFetcher) open(rel string) (*os.File, int64, string, error) {
	var f *os.File
	var fi os.FileInfo
	var where string
	if strings.Contains(rel, "://") {
		u, err := artifactURL(rel)
		if err != nil || u == nil || u.Scheme != "file" {
			return nil, 0, rel, core.Errorf(core.EINVALID, "%q is not an archive URL", rel)
		}
		where = u.Path
		name := filepath.FromSlash(u.Path)
		st, err := os.Stat(name)
		if err != nil {
			return nil, 0, where, fileError(where, err)
		}
		if !st.Mode().IsRegular() {
			return nil, 0, where, core.Errorf(core.EINVALID, "%s is not a regular file", where)
		}
		if f, err = os.Open(name); err != nil {
			return nil, 0, where, fileError(where, err)
		}
		fi = st
	} else {
		if reason := checkRel(rel); reason != "" {
			return nil, 0, rel, core.Errorf(core.EINVALID, "%s", reason)
		}
		where = filepath.Join(d.dir, filepath.FromSlash(rel))
		root, err := os.OpenRoot(d.dir)
		if err != nil {
			return nil, 0, where, fileError(d.dir, err)
		}
		defer root.Close()
		st, err := root.Stat(rel)
		if err != nil {
			return nil, 0, where, fileError(where, err)
		}
		if !st.Mode().IsRegular() {
			return nil, 0, where, core.Errorf(core.EINVALID, "%s is not a regular file", where)
		}
		if f, err = root.Open(rel); err != nil {
			return nil, 0, where, fileError(where, err)
		}
		fi = st
	}
	return f, fi.Size(), where, nil
}

func fileError(where string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return core.Errorf(core.ENOTFOUND, "%s: not found", where)
	}
	return core.Errorf(core.EUNAVAIL, "%s: %v", where, unwrapPathError(err))
}

// unwrapPathError drops *fs.PathError's repetition of the path.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (d fileFetcher) Fetch(ctx context.Context, rel string, max int64) ([]byte, error) {
	if strings.HasPrefix(rel, "https://") {
		return d.web.Fetch(ctx, rel, max)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, size, where, err := d.open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size > max {
		return nil, tooLarge(where, max)
	}
	return readBounded(f, where, max, size)
}

func (d fileFetcher) Open(ctx context.Context, rel string) (io.ReadCloser, int64, error) {
	if strings.HasPrefix(rel, "https://") {
		return d.web.Open(ctx, rel)
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	f, size, _, err := d.open(rel)
	if err != nil {
		return nil, 0, err
	}
	return f, size, nil
}

// readBounded reads r whole, refusing more than max bytes; size is what
// r is expected to hold (-1 when unknown), to allocate once.
func readBounded(r io.Reader, where string, max, size int64) ([]byte, error) {
	data, err := readAll(io.LimitReader(r, max+1), min(max, size)+1)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, core.Errorf(core.EUNAVAIL, "read %s: %v", where, err)
		}
		return nil, fmt.Errorf("read %s: %w", where, err)
	}
	if int64(len(data)) > max {
		return nil, tooLarge(where, max)
	}
	return data, nil
}

// readAll is io.ReadAll starting with a buffer of capacity n.
func readAll(r io.Reader, n int64) ([]byte, error) {
	b := make([]byte, 0, max(n, 512))
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

func tooLarge(where string, max int64) error {
	return core.Errorf(core.EINVALID, "%s is larger than %s: refused", where, bytesText(max))
}
