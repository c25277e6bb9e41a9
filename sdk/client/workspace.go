package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
)

// The workspace is what runs work with besides the conversation: folder
// grants, the owner's settings, attachments, long-term memories and a
// thread's virtual files.

// ListGrants returns the folder grants, by name.
func (c *Client) ListGrants(ctx context.Context) ([]*core.Grant, error) {
	var out struct {
		Grants []*core.Grant `json:"grants"`
	}
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/grants", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Grants, nil
}

// AddGrant grants runs a folder on the server's machine. A path that is
// not an existing directory or a bad name is an invalid-request error; a
// folder granted already, a name in use, an overlap with another grant or
// Kiln's data root without in.AcknowledgeDataRoot is a conflict error.
func (c *Client) AddGrant(ctx context.Context, in core.GrantInput) (*core.Grant, error) {
	var g core.Grant
	if err := c.do(ctx, http.MethodPost, apiPrefix+"/grants", nil, in, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// RemoveGrant revokes a folder grant by its ID; it takes effect for the
// next tool call of every run.
func (c *Client) RemoveGrant(ctx context.Context, id string) error {
	p, err := pathID("grant", id)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, apiPrefix+"/grants/"+p, nil, nil, nil)
}

// Settings returns the owner's settings (the defaults when never changed).
func (c *Client) Settings(ctx context.Context) (*core.Settings, error) {
	var st core.Settings
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/settings", nil, nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// UpdateSettings changes the settings the patch sets and returns them all.
// Limits are replaced as a whole. An addendum over core.MaxPromptAddendum
// characters, limits out of range or an unknown theme is an
// invalid-request error, and nothing changes.
func (c *Client) UpdateSettings(ctx context.Context, patch core.SettingsPatch) (*core.Settings, error) {
	var st core.Settings
	if err := c.do(ctx, http.MethodPut, apiPrefix+"/settings", nil, patch, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Attachment is an uploaded file as the API shows it: the record and URI,
// the "attachment://<id>" a message part refers to it by.
type Attachment struct {
	core.Attachment
	URI string `json:"uri"`
}

// UploadOption configures UploadAttachment.
type UploadOption func(*upload)

type upload struct {
	progress func(sent, total int64)
}

// WithProgress makes UploadAttachment call fn as the file's bytes are
// sent, with the bytes sent so far and the file's size, or -1 when the
// reader's size is unknown. fn is called from the goroutine sending the
// request.
func WithProgress(fn func(sent, total int64)) UploadOption {
	return func(u *upload) { u.progress = fn }
}

// UploadAttachment uploads what r yields as a file named name, to be
// attached to a run's input (core.RunInput.Attachments takes its ID).
// The body is streamed as r is read, never held in memory; when r is a
// regular *os.File or has a Len method the request says its length, so a
// server refuses a file over its limit before it is sent. The server
// sniffs the type from the bytes: a file over its size limit is an
// error with status 413 (IsTooLarge), one that is neither an image nor
// UTF-8 text 415 (IsUnsupportedMedia).
func (c *Client) UploadAttachment(ctx context.Context, name string, r io.Reader, opts ...UploadOption) (*Attachment, error) {
	var u upload
	for _, opt := range opts {
		opt(&u)
	}
	// The multipart envelope around the file: its part's header and the
	// closing boundary.
	var env bytes.Buffer
	mw := multipart.NewWriter(&env)
	if _, err := mw.CreateFormFile("file", name); err != nil {
		return nil, err
	}
	headLen := env.Len()
	if err := mw.Close(); err != nil {
		return nil, err
	}
	head, tail := env.Bytes()[:headLen], env.Bytes()[headLen:]
	size := readerSize(r)
	if u.progress != nil {
		r = &progressReader{r: r, total: size, fn: u.progress}
	}
	req, err := c.newRequest(ctx, http.MethodPost, apiPrefix+"/attachments", nil,
		io.MultiReader(bytes.NewReader(head), r, bytes.NewReader(tail)))
	if err != nil {
		return nil, err
	}
	if size >= 0 {
		req.ContentLength = int64(len(head)) + size + int64(len(tail))
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", mw.FormDataContentType())
	var a Attachment
	if err := c.send(req, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// readerSize returns how many bytes r has left when it says so cheaply,
// else -1.
func readerSize(r io.Reader) int64 {
	switch r := r.(type) {
	case interface{ Len() int }:
		return int64(r.Len())
	case *os.File:
		fi, err := r.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return -1
		}
		off, err := r.Seek(0, io.SeekCurrent)
		if err != nil || off > fi.Size() {
			return -1
		}
		return fi.Size() - off
	}
	return -1
}

// progressReader reports the bytes read through it.
type progressReader struct {
	r     io.Reader
	sent  int64
	total int64
	fn    func(sent, total int64)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.sent += int64(n)
		p.fn(p.sent, p.total)
	}
	return n, err
}

// GetAttachment returns an attachment's record.
func (c *Client) GetAttachment(ctx context.Context, id string) (*Attachment, error) {
	p, err := pathID("attachment", id)
	if err != nil {
		return nil, err
	}
	var a Attachment
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/attachments/"+p, nil, nil, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// AttachmentContent opens an attachment's bytes; the caller must close
// them.
func (c *Client) AttachmentContent(ctx context.Context, id string) (io.ReadCloser, error) {
	p, err := pathID("attachment", id)
	if err != nil {
		return nil, err
	}
	return c.open(ctx, apiPrefix+"/attachments/"+p+"/content")
}

// DeleteAttachment deletes an attachment no run has taken; one a run's
// input took belongs to its thread (a conflict error) and is deleted with
// it.
func (c *Client) DeleteAttachment(ctx context.Context, id string) error {
	p, err := pathID("attachment", id)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, apiPrefix+"/attachments/"+p, nil, nil, nil)
}

// Memories returns the long-term memory files by name, each with a
// preview instead of its content. A server without a data root answers
// unavailable (IsUnavailable).
func (c *Client) Memories(ctx context.Context) ([]*core.Memory, error) {
	var out struct {
		Memories []*core.Memory `json:"memories"`
	}
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/memories", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Memories, nil
}

// Memory returns a memory file with its content. A name that is not a
// memory's (see core.CheckMemoryName) is an invalid-request error.
func (c *Client) Memory(ctx context.Context, name string) (*core.Memory, error) {
	return c.memory(ctx, http.MethodGet, name, nil)
}

// CreateMemory creates a memory file; a name in use is a conflict error.
// Content must be UTF-8 text.
func (c *Client) CreateMemory(ctx context.Context, name, content string) (*core.Memory, error) {
	if err := checkUTF8(content); err != nil {
		return nil, err
	}
	in := struct {
		Name    string `json:"name"`
		Content string `json:"content"`
	}{name, content}
	var m core.Memory
	if err := c.do(ctx, http.MethodPost, apiPrefix+"/memories", nil, in, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// PutMemory creates or replaces a memory file. Content must be UTF-8
// text; over core.MaxMemorySize it is an invalid-request error.
func (c *Client) PutMemory(ctx context.Context, name, content string) (*core.Memory, error) {
	if err := checkUTF8(content); err != nil {
		return nil, err
	}
	in := struct {
		Content string `json:"content"`
	}{content}
	return c.memory(ctx, http.MethodPut, name, in)
}

// DeleteMemory deletes a memory file.
func (c *Client) DeleteMemory(ctx context.Context, name string) error {
	p, err := pathID("memory", name)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, apiPrefix+"/memories/"+p, nil, nil, nil)
}

// checkUTF8 refuses memory content that is not UTF-8, which JSON would
// silently change.
func checkUTF8(content string) error {
	if !utf8.ValidString(content) {
		return errors.New("memory content is not UTF-8 text")
	}
	return nil
}

func (c *Client) memory(ctx context.Context, method, name string, in any) (*core.Memory, error) {
	p, err := pathID("memory", name)
	if err != nil {
		return nil, err
	}
	var m core.Memory
	if err := c.do(ctx, method, apiPrefix+"/memories/"+p, nil, in, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// ThreadFiles returns a thread's virtual files by path, without their
// content: the files its runs wrote outside any folder grant.
func (c *Client) ThreadFiles(ctx context.Context, threadID string) ([]*core.File, error) {
	p, err := pathID("thread", threadID)
	if err != nil {
		return nil, err
	}
	var out struct {
		Files []*core.File `json:"files"`
	}
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/threads/"+p+"/files", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Files, nil
}

// ThreadFile returns the content of one of a thread's virtual files, by
// its absolute path such as "/notes/plan.md". A virtual file is at most
// core.MaxFileSize bytes.
func (c *Client) ThreadFile(ctx context.Context, threadID, path string) ([]byte, error) {
	p, err := pathID("thread", threadID)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(path, "/") || path == "/" {
		return nil, fmt.Errorf("file path %q: want an absolute path such as /notes/plan.md", path)
	}
	segs := strings.Split(path[1:], "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	rc, err := c.open(ctx, apiPrefix+"/threads/"+p+"/files/"+strings.Join(segs, "/"))
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// ForkThread copies a thread up to the assistant message at messageIndex
// (as Messages lists them) and the results of its tool calls into a new
// thread, with the folder, model, working folder, attachments and virtual
// files as they were then. Title "" names the fork after its parent. An
// index out of range is an invalid-request error; a run still active, a
// message that is not an assistant's or a turn whose tool calls lack
// results is a conflict error.
func (c *Client) ForkThread(ctx context.Context, threadID string, messageIndex int, title string) (*core.Thread, error) {
	return c.thread(ctx, http.MethodPost, threadID, "/fork", core.ForkInput{MessageIndex: &messageIndex, Title: title})
}

// open sends a GET for path and returns the body of a successful answer,
// which the caller must close.
func (c *Client) open(ctx context.Context, path string) (io.ReadCloser, error) {
	req, err := c.newRequest(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, responseError(resp)
	}
	return resp.Body, nil
}
