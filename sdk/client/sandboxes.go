package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Sandboxes are isolated environments to run commands and keep files in,
// served by Kiln's OpenSandbox-compatible sandbox API: the lifecycle
// under /v1/sandboxes, authenticated with the server's token, and each
// sandbox's execution API (commands and files) through Kiln's proxy,
// authenticated with the sandbox's own token, which SandboxEndpoint
// hands out. Errors of both are *Error values like the rest of the
// API's: IsNotFound for a sandbox (or file) that does not exist,
// IsNotImplemented for what a sandbox's runtime cannot do (pause on
// wasm), IsConflict for a sandbox in the wrong state.

// sandboxPrefix is the path of the sandbox lifecycle API below the
// server root.
const sandboxPrefix = "/v1/sandboxes"

// ExecdPort is the port of a sandbox's execution API, as OpenSandbox's
// SDKs ask for it; SandboxEndpointHeader carries the sandbox's token to
// it.
const (
	ExecdPort             = 44772
	SandboxEndpointHeader = "X-EXECD-ACCESS-TOKEN"
)

// MetaThread is the metadata key that marks an agent thread's own
// sandbox; its value is the thread's ID.
const MetaThread = "kiln.io/thread"

// Sandbox states.
const (
	SandboxPending    = "Pending"
	SandboxRunning    = "Running"
	SandboxPaused     = "Paused"
	SandboxTerminated = "Terminated"
	SandboxFailed     = "Failed"
)

// Sandbox is a sandbox as the sandbox API shows it.
type Sandbox struct {
	ID         string            `json:"id"`
	Image      *SandboxImage     `json:"image,omitempty"`
	Status     SandboxStatus     `json:"status"`
	Metadata   map[string]string `json:"metadata"`
	Entrypoint []string          `json:"entrypoint"`
	// ExpiresAt is when the server deletes it; nil for a sandbox created
	// without a timeout, which lives until it is deleted.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	// Runtime is the runtime that runs it: docker, wasm or js.
	Runtime string `json:"runtime,omitempty"`
}

// SandboxImage is the image a sandbox was created from.
type SandboxImage struct {
	URI string `json:"uri"`
}

// SandboxStatus is a sandbox's state (SandboxRunning, ...) and, for one
// that failed, why.
type SandboxStatus struct {
	State            string    `json:"state"`
	Reason           string    `json:"reason,omitempty"`
	Message          string    `json:"message,omitempty"`
	LastTransitionAt time.Time `json:"lastTransitionAt"`
}

// SandboxInput asks for a sandbox. The zero value is a sandbox of the
// server's default runtime and image that lives until it is deleted.
type SandboxInput struct {
	// Image is the image of a docker sandbox; it must be present on the
	// server's host (Kiln pulls none). "" is the server's default.
	Image string
	// Runtime names the runtime: docker, wasm or js; "" is the server's
	// default.
	Runtime string
	// Timeout is how long the sandbox lives before the server deletes
	// it (whole seconds); 0 means until it is deleted (sent as null: a
	// create without a timeout gets the server's default).
	Timeout time.Duration
	// CPU and Memory are resource limits in Kubernetes' notation
	// ("500m", "2"; "512Mi", "1Gi"); "" is the runtime's default.
	CPU, Memory string
	Env         map[string]string
	// Metadata labels the sandbox; Sandboxes filters by it. The key
	// prefixes kiln.io/ and opensandbox.io/ are reserved.
	Metadata map[string]string
}

// CreateSandbox creates a sandbox and returns it once it runs, which for
// a docker sandbox includes starting its container. A bad request is an
// invalid-request error, a runtime that is not enabled an unavailable
// one (IsUnavailable), a full server rate-limited (IsRateLimited), what
// the runtime cannot do IsNotImplemented.
func (c *Client) CreateSandbox(ctx context.Context, in SandboxInput) (*Sandbox, error) {
	type imageSpec struct {
		URI string `json:"uri"`
	}
	var req struct {
		Image          *imageSpec        `json:"image,omitempty"`
		Timeout        *int              `json:"timeout"` // null: none (absent would be the server's default)
		ResourceLimits map[string]string `json:"resourceLimits,omitempty"`
		Env            map[string]string `json:"env,omitempty"`
		Metadata       map[string]string `json:"metadata,omitempty"`
		Extensions     map[string]string `json:"extensions,omitempty"`
	}
	if in.Image != "" {
		req.Image = &imageSpec{URI: in.Image}
	}
	if in.Timeout < 0 || (in.Timeout > 0 && in.Timeout < time.Second) {
		return nil, fmt.Errorf("sandbox timeout %s: want at least a second, or 0 for none", in.Timeout)
	}
	if in.Timeout > 0 {
		secs := int((in.Timeout + time.Second - 1) / time.Second)
		req.Timeout = &secs
	}
	for k, v := range map[string]string{"cpu": in.CPU, "memory": in.Memory} {
		if v != "" {
			if req.ResourceLimits == nil {
				req.ResourceLimits = map[string]string{}
			}
			req.ResourceLimits[k] = v
		}
	}
	req.Env, req.Metadata = in.Env, in.Metadata
	if in.Runtime != "" {
		req.Extensions = map[string]string{"kiln.runtime": in.Runtime}
	}
	var sb Sandbox
	if err := c.do(ctx, http.MethodPost, sandboxPrefix, nil, req, &sb); err != nil {
		return nil, err
	}
	if sb.Image == nil && in.Image != "" {
		sb.Image = &SandboxImage{URI: in.Image}
	}
	return &sb, nil
}

// Sandbox returns a sandbox; one that does not exist is a not-found
// error.
func (c *Client) Sandbox(ctx context.Context, id string) (*Sandbox, error) {
	p, err := pathID("sandbox", id)
	if err != nil {
		return nil, err
	}
	var sb Sandbox
	if err := c.do(ctx, http.MethodGet, sandboxPrefix+"/"+p, nil, nil, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// SandboxListOptions filter and page Sandboxes.
type SandboxListOptions struct {
	// States keeps the sandboxes in any of these states (SandboxRunning,
	// ...); none keeps all.
	States []string
	// Metadata keeps the sandboxes whose metadata has every pair.
	Metadata map[string]string
	// Page counts from 1; PageSize is at most 200. Zero values are the
	// first page of 20.
	Page, PageSize int
}

// SandboxPage is one page of sandboxes.
type SandboxPage struct {
	Items       []*Sandbox `json:"items"`
	Page        int        `json:"page"`
	PageSize    int        `json:"pageSize"`
	TotalItems  int        `json:"totalItems"`
	TotalPages  int        `json:"totalPages"`
	HasNextPage bool       `json:"hasNextPage"`
}

// Sandboxes returns a page of the sandboxes that match opts, newest
// first.
func (c *Client) Sandboxes(ctx context.Context, opts SandboxListOptions) (*SandboxPage, error) {
	q := url.Values{}
	for _, s := range opts.States {
		q.Add("state", s)
	}
	if len(opts.Metadata) > 0 {
		m := url.Values{}
		for k, v := range opts.Metadata {
			m.Set(k, v)
		}
		q.Set("metadata", m.Encode())
	}
	if opts.Page > 0 {
		q.Set("page", strconv.Itoa(opts.Page))
	}
	if opts.PageSize > 0 {
		q.Set("pageSize", strconv.Itoa(opts.PageSize))
	}
	var out struct {
		Items      []*Sandbox `json:"items"`
		Pagination struct {
			Page        int  `json:"page"`
			PageSize    int  `json:"pageSize"`
			TotalItems  int  `json:"totalItems"`
			TotalPages  int  `json:"totalPages"`
			HasNextPage bool `json:"hasNextPage"`
		} `json:"pagination"`
	}
	if err := c.do(ctx, http.MethodGet, sandboxPrefix, q, nil, &out); err != nil {
		return nil, err
	}
	p := out.Pagination
	return &SandboxPage{Items: out.Items, Page: p.Page, PageSize: p.PageSize, TotalItems: p.TotalItems,
		TotalPages: p.TotalPages, HasNextPage: p.HasNextPage}, nil
}

// DeleteSandbox deletes a sandbox with everything in it.
func (c *Client) DeleteSandbox(ctx context.Context, id string) error {
	return c.sandboxOp(ctx, http.MethodDelete, id, "", nil, nil)
}

// PauseSandbox pauses a running sandbox. A runtime that cannot pause
// (wasm, js) answers IsNotImplemented; a sandbox that is not running,
// IsConflict.
func (c *Client) PauseSandbox(ctx context.Context, id string) error {
	return c.sandboxOp(ctx, http.MethodPost, id, "/pause", nil, nil)
}

// ResumeSandbox resumes a paused sandbox, with PauseSandbox's errors.
func (c *Client) ResumeSandbox(ctx context.Context, id string) error {
	return c.sandboxOp(ctx, http.MethodPost, id, "/resume", nil, nil)
}

// RenewSandbox sets when a sandbox expires and returns the new expiry.
// A time not in the future or beyond the server's longest timeout is an
// invalid-request error; a sandbox created without a timeout, a
// conflict.
func (c *Client) RenewSandbox(ctx context.Context, id string, expiresAt time.Time) (time.Time, error) {
	in := struct {
		ExpiresAt time.Time `json:"expiresAt"`
	}{expiresAt.UTC()}
	var out struct {
		ExpiresAt time.Time `json:"expiresAt"`
	}
	if err := c.sandboxOp(ctx, http.MethodPost, id, "/renew-expiration", in, &out); err != nil {
		return time.Time{}, err
	}
	return out.ExpiresAt, nil
}

func (c *Client) sandboxOp(ctx context.Context, method, id, suffix string, in, out any) error {
	p, err := pathID("sandbox", id)
	if err != nil {
		return err
	}
	return c.do(ctx, method, sandboxPrefix+"/"+p+suffix, nil, in, out)
}

// SandboxEndpoint is where a port of a sandbox is reached: Endpoint is
// host and path without a scheme, as OpenSandbox writes it, and Headers
// must go with every request (the sandbox's access token).
type SandboxEndpoint struct {
	Endpoint string            `json:"endpoint"`
	Headers  map[string]string `json:"headers"`
}

// SandboxEndpoint returns where port of a sandbox is reached; ExecdPort
// is its execution API.
func (c *Client) SandboxEndpoint(ctx context.Context, id string, port int) (*SandboxEndpoint, error) {
	p, err := pathID("sandbox", id)
	if err != nil {
		return nil, err
	}
	var ep SandboxEndpoint
	if err := c.do(ctx, http.MethodGet, fmt.Sprintf("%s/%s/endpoints/%d", sandboxPrefix, p, port), nil, nil, &ep); err != nil {
		return nil, err
	}
	return &ep, nil
}

// execd is a sandbox's execution API: its base URL and the headers that
// authenticate a request to it.
type execd struct {
	c       *Client
	base    string
	headers map[string]string
}

// execd finds a sandbox's execution API. The endpoint names the host the
// server saw; the path is taken onto the client's own root instead, so
// that a scheme and a path prefix in front of the server are kept.
func (c *Client) execd(ctx context.Context, id string) (*execd, error) {
	ep, err := c.SandboxEndpoint(ctx, id, ExecdPort)
	if err != nil {
		return nil, err
	}
	_, path, ok := strings.Cut(ep.Endpoint, "/")
	if !ok {
		return nil, fmt.Errorf("sandbox %s: endpoint %q has no path", id, ep.Endpoint)
	}
	return &execd{c: c, base: c.root + "/" + path, headers: ep.Headers}, nil
}

// request builds a request to the execution API. The server's own token
// is not sent: the sandbox's opens it, and the server's stays with the
// server.
func (e *execd) request(ctx context.Context, method, path string, query url.Values, body io.Reader) (*http.Request, error) {
	u := e.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	if e.c.userAgent != "" {
		req.Header.Set("User-Agent", e.c.userAgent)
	}
	return req, nil
}

// ExecRequest is a command to run in a sandbox.
type ExecRequest struct {
	// Command is a shell command line (sh -c).
	Command string
	// Cwd is the working directory, an absolute path; "" is the
	// sandbox's default.
	Cwd string
	// Timeout bounds the command's run (milliseconds); 0 is none.
	Timeout time.Duration
	Env     map[string]string
}

// ExecEvent is one event of a command's output stream: "init" (Text is
// the command's ID), "stdout" and "stderr" (Text is one line without its
// ending, as OpenSandbox's execd frames output, or a piece of one;
// Output gives it back as printed), "execution_complete", "error" (Error
// says why) and "ping".
type ExecEvent struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// Partial marks a stdout or stderr event whose Text does not end its
	// line: a piece of a line longer than 64 KiB, or a last line the
	// command printed without an ending. Kiln sends it; execd does not.
	Partial bool `json:"partial,omitempty"`
	// ExecutionTime is how long the command ran, in milliseconds, on
	// execution_complete.
	ExecutionTime *int64 `json:"execution_time,omitempty"`
	// Timestamp is when the event was sent, in Unix milliseconds.
	Timestamp int64      `json:"timestamp"`
	Error     *ExecError `json:"error,omitempty"`
}

// Output is the text of a stdout or stderr event as the command printed
// it: the line with a "\n" ending, or the Text alone for a Partial event,
// so that the Outputs of a stream joined are the command's output byte
// for byte (but a "\r\n" or lone "\r" ending, which comes back as "\n").
// An empty line's Text is already "\n". From a server that does not send
// Partial (OpenSandbox's execd), a line over 64 KiB gains a "\n" every
// 64 KiB and a last line without an ending gains one.
func (e ExecEvent) Output() string {
	if e.Partial || e.Text == "\n" {
		return e.Text
	}
	return e.Text + "\n"
}

// ExecError is the error event of a command that failed: Name is
// "CommandExecError" with the exit code as Value for a command that
// exited non-zero, "TimeoutError" for one its timeout stopped,
// "Interrupted" for one stopped on request.
type ExecError struct {
	Name      string   `json:"ename"`
	Value     string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

func (e *ExecError) Error() string {
	if e.Value == "" {
		return e.Name
	}
	return e.Name + ": " + e.Value
}

// ErrExecIncomplete is returned by Exec when the output stream ends
// before the command has finished, such as when the server goes away.
var ErrExecIncomplete = errors.New("the command's output stream ended before it finished")

// Exec runs a command in a sandbox and calls fn (when not nil) with each
// event of its output as it arrives, from the calling goroutine. It
// returns the command's exit code once it has ended. A command stopped
// by its timeout or on request returns -1 and an *ExecError; a stream
// cut short -1 and ErrExecIncomplete. When ctx is cancelled Exec
// interrupts the command (DELETE /command) and returns ctx's error. A
// sandbox that does not exist is a not-found error, a paused one a
// conflict; a cwd that is not a folder an invalid-request error.
func (c *Client) Exec(ctx context.Context, id string, req ExecRequest, fn func(ExecEvent)) (int, error) {
	if strings.TrimSpace(req.Command) == "" {
		return -1, errors.New("empty command")
	}
	e, err := c.execd(ctx, id)
	if err != nil {
		return -1, err
	}
	body, err := json.Marshal(map[string]any{
		"command": req.Command, "cwd": req.Cwd, "timeout": req.Timeout.Milliseconds(), "envs": req.Env,
	})
	if err != nil {
		return -1, err
	}
	hr, err := e.request(ctx, http.MethodPost, "/command", nil, bytes.NewReader(body))
	if err != nil {
		return -1, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(hr)
	if err != nil {
		return -1, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -1, responseError(resp)
	}
	var cmdID string
	// interrupted stops the command when ctx ended the stream; the
	// server would on the connection's close too, but an agent behind a
	// proxy may not see it close.
	interrupted := func() (int, error) {
		if cmdID != "" {
			ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if dr, err := e.request(ictx, http.MethodDelete, "/command", url.Values{"id": {cmdID}}, nil); err == nil {
				if resp, err := c.http.Do(dr); err == nil {
					_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
					resp.Body.Close()
				}
			}
		}
		return -1, ctx.Err()
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadBytes('\n')
		if ctx.Err() != nil {
			return interrupted()
		}
		// Events are JSON objects each followed by a blank line; an
		// SSE-style "data: " prefix is taken too.
		if line = bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(line), []byte("data:"))); len(line) > 0 {
			var ev ExecEvent
			if jerr := json.Unmarshal(line, &ev); jerr != nil {
				return -1, fmt.Errorf("command output: decoding an event: %w", jerr)
			}
			if ev.Type == "init" && cmdID == "" {
				cmdID = ev.Text
			}
			if fn != nil {
				fn(ev)
			}
			switch ev.Type {
			case "execution_complete":
				return 0, nil
			case "error":
				if ev.Error == nil {
					return -1, &ExecError{Name: "RuntimeError"}
				}
				if ev.Error.Name == "CommandExecError" {
					if code, err := strconv.Atoi(ev.Error.Value); err == nil {
						return code, nil
					}
				}
				return -1, ev.Error
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return -1, ErrExecIncomplete
			}
			return -1, fmt.Errorf("command output: %w", err)
		}
	}
}

// SandboxFile describes a file in a sandbox. Type is "file",
// "directory", "symlink" or "other".
type SandboxFile struct {
	Path       string    `json:"path"`
	Type       string    `json:"type"`
	Size       int64     `json:"size"`
	ModifiedAt time.Time `json:"modified_at"`
	Owner      string    `json:"owner"`
	Group      string    `json:"group"`
	// Mode is the permission bits written in octal digits as a decimal
	// number, as execd does: 644 for 0o644.
	Mode int `json:"mode"`
}

// StatFile describes the file at an absolute path in a sandbox; a path
// where there is none is a not-found error.
func (c *Client) StatFile(ctx context.Context, id, path string) (*SandboxFile, error) {
	e, err := c.execd(ctx, id)
	if err != nil {
		return nil, err
	}
	req, err := e.request(ctx, http.MethodGet, "/files/info", url.Values{"path": {path}}, nil)
	if err != nil {
		return nil, err
	}
	var out map[string]*SandboxFile
	if err := c.send(req, &out); err != nil {
		return nil, err
	}
	if f := out[path]; f != nil {
		return f, nil
	}
	return nil, fmt.Errorf("files/info: no answer for %s", path)
}

// Upload writes what r yields to the file at an absolute path in a
// sandbox, replacing it; its folder must exist. The bytes are streamed
// as r is read, never held in memory. size is r's length, or -1 when it
// is unknown (the request is then chunked). progress, when not nil, is
// called as bytes are sent with the bytes sent so far and size.
func (c *Client) Upload(ctx context.Context, id, path string, r io.Reader, size int64, progress func(sent, total int64)) error {
	e, err := c.execd(ctx, id)
	if err != nil {
		return err
	}
	// The multipart envelope around the file: the metadata part, the
	// file part's header, and the closing boundary.
	var env bytes.Buffer
	mw := multipart.NewWriter(&env)
	meta, err := mw.CreateFormField("metadata")
	if err != nil {
		return err
	}
	if err := json.NewEncoder(meta).Encode(map[string]string{"path": path}); err != nil {
		return err
	}
	name := path[strings.LastIndex(path, "/")+1:]
	if _, err := mw.CreateFormFile("file", name); err != nil {
		return err
	}
	headLen := env.Len()
	if err := mw.Close(); err != nil {
		return err
	}
	head, tail := env.Bytes()[:headLen], env.Bytes()[headLen:]
	if progress != nil {
		r = &progressReader{r: r, total: size, fn: progress}
	}
	req, err := e.request(ctx, http.MethodPost, "/files/upload", nil,
		io.MultiReader(bytes.NewReader(head), r, bytes.NewReader(tail)))
	if err != nil {
		return err
	}
	if size >= 0 {
		req.ContentLength = int64(len(head)) + size + int64(len(tail))
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return c.send(req, nil)
}

// Download writes the file at an absolute path in a sandbox to w and
// returns how many bytes it wrote. progress, when not nil, is called as
// bytes arrive with the bytes so far and the file's size (-1 when the
// server does not say). A path where there is no file is a not-found
// error; a folder an invalid-request error. A transfer cut short is an
// error, io.ErrUnexpectedEOF when the server said the size.
func (c *Client) Download(ctx context.Context, id, path string, w io.Writer, progress func(received, total int64)) (int64, error) {
	e, err := c.execd(ctx, id)
	if err != nil {
		return 0, err
	}
	req, err := e.request(ctx, http.MethodGet, "/files/download", url.Values{"path": {path}}, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, responseError(resp)
	}
	var r io.Reader = resp.Body
	if progress != nil {
		r = &progressReader{r: r, total: resp.ContentLength, fn: progress}
	}
	n, err := io.Copy(w, r)
	if err != nil {
		return n, err
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, fmt.Errorf("download %s: got %d of %d bytes: %w", path, n, resp.ContentLength, io.ErrUnexpectedEOF)
	}
	return n, nil
}
