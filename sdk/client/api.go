package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kilnhq/kiln/core"
)

// ThreadListOptions filter ListThreads. Zero values mean no filter; Limit 0
// means the server's default page size.
type ThreadListOptions struct {
	FolderID string // only threads in this folder
	NoFolder bool   // only threads in no folder
	Search   string // match title and last message, case-insensitively
	Limit    int
	Cursor   string // NextCursor of the previous page
}

// ThreadUpdate changes a thread; nil fields stay as they are.
type ThreadUpdate struct {
	Title *string
	// FolderID moves the thread to a folder; a pointer to "" moves it out
	// of its folder.
	FolderID *string
	Pinned   *bool
}

// MarshalJSON writes the PATCH body: only the set fields, with "folder_id":
// null for a move out of the folder.
func (u ThreadUpdate) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	if u.Title != nil {
		m["title"] = *u.Title
	}
	if u.FolderID != nil {
		if *u.FolderID == "" {
			m["folder_id"] = nil
		} else {
			m["folder_id"] = *u.FolderID
		}
	}
	if u.Pinned != nil {
		m["pinned"] = *u.Pinned
	}
	return json.Marshal(m)
}

// FolderUpdate renames or moves a folder; nil fields stay as they are.
type FolderUpdate struct {
	Name     *string `json:"name,omitempty"`
	Position *int    `json:"position,omitempty"`
}

// InboxOptions select a page of an inbox queue.
type InboxOptions struct {
	Queue  string // core.QueueUnread or core.QueueAction
	Search string // keep the items whose thread matches (core.ThreadQuery.Search)
	Limit  int    // 0 means the server's default page size
	Cursor string // NextCursor of the previous page
}

// RunListOptions select a page of runs across threads, newest first.
type RunListOptions struct {
	ThreadID string           // only this thread's runs
	Statuses []core.RunStatus // only runs in one of these states
	Limit    int              // 0 means the server's default page size
	Cursor   string           // NextCursor of the previous page
}

// ServerStatus describes a running server.
type ServerStatus struct {
	Version       string    `json:"version"`
	DataRoot      string    `json:"data_root"`
	DefaultModel  string    `json:"default_model"`
	StartedAt     time.Time `json:"started_at"`
	UptimeSeconds int64     `json:"uptime_seconds"`
	ActiveRuns    int       `json:"active_runs"`
	Subscribers   int       `json:"subscribers"`
	// Search is the server's search mode: "fts5" or "basic".
	Search string `json:"search"`
}

// CreateThread creates a thread.
func (c *Client) CreateThread(ctx context.Context, in core.ThreadInput) (*core.Thread, error) {
	var t core.Thread
	if err := c.do(ctx, http.MethodPost, apiPrefix+"/threads", nil, in, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// ListThreads returns one page of threads, pinned first, then most recently
// updated first.
func (c *Client) ListThreads(ctx context.Context, opts ThreadListOptions) (*core.ThreadPage, error) {
	q := url.Values{}
	setString(q, "folder_id", opts.FolderID)
	if opts.NoFolder {
		q.Set("no_folder", "true")
	}
	setString(q, "q", opts.Search)
	setInt(q, "limit", opts.Limit)
	setString(q, "cursor", opts.Cursor)
	var page core.ThreadPage
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/threads", q, nil, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// GetThread returns a thread.
func (c *Client) GetThread(ctx context.Context, id string) (*core.Thread, error) {
	return c.thread(ctx, http.MethodGet, id, "", nil)
}

// UpdateThread renames, moves, pins or unpins a thread.
func (c *Client) UpdateThread(ctx context.Context, id string, u ThreadUpdate) (*core.Thread, error) {
	return c.thread(ctx, http.MethodPatch, id, "", u)
}

// DeleteThread deletes a thread with its runs and messages. A thread with
// an active run is refused with a conflict error: cancel the run first.
func (c *Client) DeleteThread(ctx context.Context, id string) error {
	p, err := pathID("thread", id)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, apiPrefix+"/threads/"+p, nil, nil, nil)
}

// MarkRead clears a thread's unread state, removing it from the Unread queue.
func (c *Client) MarkRead(ctx context.Context, id string) (*core.Thread, error) {
	return c.thread(ctx, http.MethodPost, id, "/read", nil)
}

func (c *Client) thread(ctx context.Context, method, id, suffix string, in any) (*core.Thread, error) {
	p, err := pathID("thread", id)
	if err != nil {
		return nil, err
	}
	var t core.Thread
	if err := c.do(ctx, method, apiPrefix+"/threads/"+p+suffix, nil, in, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Messages returns a thread's conversation in order.
func (c *Client) Messages(ctx context.Context, threadID string) ([]*core.Message, error) {
	p, err := pathID("thread", threadID)
	if err != nil {
		return nil, err
	}
	var out struct {
		Messages []*core.Message `json:"messages"`
	}
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/threads/"+p+"/messages", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// ListRuns returns all of a thread's runs, oldest first, following the
// server's pages.
func (c *Client) ListRuns(ctx context.Context, threadID string) ([]*core.Run, error) {
	p, err := pathID("thread", threadID)
	if err != nil {
		return nil, err
	}
	var all []*core.Run
	q := url.Values{"limit": {"500"}}
	for {
		var page core.RunPage
		if err := c.do(ctx, http.MethodGet, apiPrefix+"/threads/"+p+"/runs", q, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Runs...)
		if page.NextCursor == "" {
			return all, nil
		}
		q.Set("cursor", page.NextCursor)
	}
}

// Runs returns one page of runs across threads, newest first.
func (c *Client) Runs(ctx context.Context, opts RunListOptions) (*core.RunPage, error) {
	q := url.Values{}
	setString(q, "thread_id", opts.ThreadID)
	if len(opts.Statuses) > 0 {
		parts := make([]string, len(opts.Statuses))
		for i, st := range opts.Statuses {
			parts[i] = string(st)
		}
		q.Set("status", strings.Join(parts, ","))
	}
	setInt(q, "limit", opts.Limit)
	setString(q, "cursor", opts.Cursor)
	var page core.RunPage
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/runs", q, nil, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// StartRun starts a run on a thread. The run is queued behind the thread's
// active run, if any. Follow it with Stream or wait for it with WaitRun.
func (c *Client) StartRun(ctx context.Context, threadID string, req core.RunRequest) (*core.Run, error) {
	p, err := pathID("thread", threadID)
	if err != nil {
		return nil, err
	}
	var r core.Run
	if err := c.do(ctx, http.MethodPost, apiPrefix+"/threads/"+p+"/runs", nil, req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// GetRun returns a run.
func (c *Client) GetRun(ctx context.Context, id string) (*core.Run, error) {
	return c.run(ctx, http.MethodGet, id, "")
}

// CancelRun cancels a run. A queued or interrupted run is cancelled at once;
// a running run comes back with CancelRequested set and stops at its next
// step. Cancelling a finished run is a conflict error.
func (c *Client) CancelRun(ctx context.Context, id string) (*core.Run, error) {
	return c.run(ctx, http.MethodPost, id, "/cancel")
}

func (c *Client) run(ctx context.Context, method, id, suffix string) (*core.Run, error) {
	p, err := pathID("run", id)
	if err != nil {
		return nil, err
	}
	var r core.Run
	if err := c.do(ctx, method, apiPrefix+"/runs/"+p+suffix, nil, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ListInterrupts returns a run's interrupts, oldest first.
func (c *Client) ListInterrupts(ctx context.Context, runID string) ([]*core.Interrupt, error) {
	p, err := pathID("run", runID)
	if err != nil {
		return nil, err
	}
	var out struct {
		Interrupts []*core.Interrupt `json:"interrupts"`
	}
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/runs/"+p+"/interrupts", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Interrupts, nil
}

// GetInterrupt returns an interrupt.
func (c *Client) GetInterrupt(ctx context.Context, id string) (*core.Interrupt, error) {
	return c.interrupt(ctx, http.MethodGet, id, "", nil)
}

// Decide answers an interrupt, for example
// core.Decision{Decision: core.DecisionApprove}. When the run's last open
// interrupt is decided the run resumes. Repeating the same decision returns
// the interrupt unchanged; a different one is a conflict error.
func (c *Client) Decide(ctx context.Context, id string, d core.Decision) (*core.Interrupt, error) {
	return c.interrupt(ctx, http.MethodPost, id, "/decision", d)
}

func (c *Client) interrupt(ctx context.Context, method, id, suffix string, in any) (*core.Interrupt, error) {
	p, err := pathID("interrupt", id)
	if err != nil {
		return nil, err
	}
	var i core.Interrupt
	if err := c.do(ctx, method, apiPrefix+"/interrupts/"+p+suffix, nil, in, &i); err != nil {
		return nil, err
	}
	return &i, nil
}

// Inbox returns a page of the Unread or Action queue, newest first, with
// the sizes of both queues.
func (c *Client) Inbox(ctx context.Context, opts InboxOptions) (*core.InboxPage, error) {
	q := url.Values{}
	setString(q, "queue", opts.Queue)
	setString(q, "q", opts.Search)
	setInt(q, "limit", opts.Limit)
	setString(q, "cursor", opts.Cursor)
	var page core.InboxPage
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/inbox", q, nil, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// MarkAllRead marks every unread thread read and returns how many.
func (c *Client) MarkAllRead(ctx context.Context) (int, error) {
	var out struct {
		Marked int `json:"marked"`
	}
	if err := c.do(ctx, http.MethodPost, apiPrefix+"/inbox/read", nil, nil, &out); err != nil {
		return 0, err
	}
	return out.Marked, nil
}

// ListFolders returns all folders in order.
func (c *Client) ListFolders(ctx context.Context) ([]*core.Folder, error) {
	var out struct {
		Folders []*core.Folder `json:"folders"`
	}
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/folders", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Folders, nil
}

// CreateFolder creates a folder; without a position it goes last. Folder
// names are unique, case-insensitively.
func (c *Client) CreateFolder(ctx context.Context, in core.FolderInput) (*core.Folder, error) {
	var f core.Folder
	if err := c.do(ctx, http.MethodPost, apiPrefix+"/folders", nil, in, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// GetFolder returns a folder.
func (c *Client) GetFolder(ctx context.Context, id string) (*core.Folder, error) {
	return c.folder(ctx, http.MethodGet, id, nil)
}

// UpdateFolder renames or moves a folder.
func (c *Client) UpdateFolder(ctx context.Context, id string, u FolderUpdate) (*core.Folder, error) {
	return c.folder(ctx, http.MethodPatch, id, u)
}

// DeleteFolder deletes a folder; its threads move to no folder.
func (c *Client) DeleteFolder(ctx context.Context, id string) error {
	p, err := pathID("folder", id)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, apiPrefix+"/folders/"+p, nil, nil, nil)
}

func (c *Client) folder(ctx context.Context, method, id string, in any) (*core.Folder, error) {
	p, err := pathID("folder", id)
	if err != nil {
		return nil, err
	}
	var f core.Folder
	if err := c.do(ctx, method, apiPrefix+"/folders/"+p, nil, in, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// Tools returns the tools runs may call.
func (c *Client) Tools(ctx context.Context) ([]core.ToolSpec, error) {
	var out struct {
		Tools []core.ToolSpec `json:"tools"`
	}
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/tools", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Tools, nil
}

// Status describes the server.
func (c *Client) Status(ctx context.Context) (*ServerStatus, error) {
	var s ServerStatus
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/status", nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Ready reports the server's readiness (GET /readyz): ready or not, with
// its checks, either way with a nil error; the error is for a server
// that did not answer it. It needs no token.
func (c *Client) Ready(ctx context.Context) (*core.Readiness, error) {
	req, err := c.newRequest(ctx, http.MethodGet, "/readyz", nil, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		return nil, responseError(resp)
	}
	var rd core.Readiness
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&rd); err != nil {
		return nil, fmt.Errorf("GET /readyz: decoding response: %w", err)
	}
	return &rd, nil
}

// Health checks that the server is up. It needs no token.
func (c *Client) Health(ctx context.Context) error {
	var out struct {
		Status string `json:"status"`
	}
	if err := c.do(ctx, http.MethodGet, "/healthz", nil, nil, &out); err != nil {
		return err
	}
	if out.Status != "ok" {
		return fmt.Errorf("server health is %q", out.Status)
	}
	return nil
}

func setString(q url.Values, key, value string) {
	if value != "" {
		q.Set(key, value)
	}
}

func setInt(q url.Values, key string, value int) {
	if value > 0 {
		q.Set(key, strconv.Itoa(value))
	}
}
