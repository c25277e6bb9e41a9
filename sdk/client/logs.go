package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// LogRecord is one record of the server log: the four fields every record
// has, the other attributes (groups as nested maps) and the record as the
// server sent it.
type LogRecord struct {
	Time      time.Time
	Level     string // DEBUG, INFO, WARN or ERROR
	Message   string
	Component string // core, web, registry, providers, wasm:<plugin>, ...
	Attrs     map[string]any
	Raw       json.RawMessage
}

// UnmarshalJSON reads a record as log/slog's JSON handler writes it.
func (r *LogRecord) UnmarshalJSON(b []byte) error {
	var fixed struct {
		Time      time.Time `json:"time"`
		Level     string    `json:"level"`
		Msg       string    `json:"msg"`
		Component string    `json:"component"`
	}
	if err := json.Unmarshal(b, &fixed); err != nil {
		return err
	}
	var attrs map[string]any
	if err := json.Unmarshal(b, &attrs); err != nil {
		return err
	}
	for _, k := range []string{"time", "level", "msg", "component"} {
		delete(attrs, k)
	}
	*r = LogRecord{Time: fixed.Time, Level: fixed.Level, Message: fixed.Msg, Component: fixed.Component,
		Attrs: attrs, Raw: bytes.Clone(b)}
	return nil
}

// MarshalJSON writes the record as the server sent it.
func (r LogRecord) MarshalJSON() ([]byte, error) {
	if len(r.Raw) > 0 {
		return r.Raw, nil
	}
	m := map[string]any{"time": r.Time, "level": r.Level, "msg": r.Message, "component": r.Component}
	for k, v := range r.Attrs {
		m[k] = v
	}
	return json.Marshal(m)
}

// LogOptions select records of the server log. Zero values mean no
// filter; Limit 0 means the server's default page size (100).
type LogOptions struct {
	// Level keeps records at this level or above: debug, info, warn or
	// error.
	Level string
	// Component keeps one component and its sub-components ("wasm" keeps
	// "wasm:calc"); a trailing "*" matches a prefix.
	Component string
	// Since and Until bound the records' time, inclusive.
	Since, Until time.Time
	// Search keeps records whose message or an attribute value contains
	// it, ignoring case.
	Search string
	Limit  int
	Cursor string // NextCursor of the previous page
}

// LogPage is one page of log records, newest first.
type LogPage struct {
	Records    []LogRecord `json:"records"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

func (o LogOptions) query() url.Values {
	q := url.Values{}
	setString(q, "level", o.Level)
	setString(q, "component", o.Component)
	if !o.Since.IsZero() {
		q.Set("since", o.Since.Format(time.RFC3339Nano))
	}
	if !o.Until.IsZero() {
		q.Set("until", o.Until.Format(time.RFC3339Nano))
	}
	setString(q, "q", o.Search)
	setInt(q, "limit", o.Limit)
	setString(q, "cursor", o.Cursor)
	return q
}

// Logs returns a page of the server log, newest first. A server without a
// log answers 404 (IsNotFound); bad filter values are 400 (IsInvalid).
func (c *Client) Logs(ctx context.Context, opts LogOptions) (*LogPage, error) {
	var page LogPage
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/logs", opts.query(), nil, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// LogFollowOptions select the records FollowLogs delivers.
type LogFollowOptions struct {
	// Level, Component, Since and Search filter as in LogOptions; Since
	// applies to the tail.
	Level     string
	Component string
	Since     time.Time
	Search    string
	// Tail is how many of the newest matching records come first (0 to
	// 1000); then new records follow as they are written.
	Tail int
	// OnDropped, if set, is called when the server dropped n records
	// because this client read too slowly.
	OnDropped func(n int)
}

// FollowLogs follows the server log, calling fn with each record in
// order, until ctx ends (it then returns ctx's error), fn returns an error
// (returned as is) or the server ends the stream (io.EOF, for example
// when it shuts down). It does not reconnect: the log has no resume
// point; follow again with Since.
func (c *Client) FollowLogs(ctx context.Context, opts LogFollowOptions, fn func(LogRecord) error) error {
	q := LogOptions{Level: opts.Level, Component: opts.Component, Since: opts.Since, Search: opts.Search}.query()
	if opts.Tail > 0 {
		q.Set("tail", strconv.Itoa(opts.Tail))
	}
	req, err := c.newRequest(ctx, http.MethodGet, apiPrefix+"/logs/stream", q, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return responseError(resp)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return fmt.Errorf("the server answered the log stream with %q, not an event stream", resp.Header.Get("Content-Type"))
	}
	rd := newSSEReader(resp.Body)
	for {
		ev, err := rd.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				return io.EOF
			}
			return fmt.Errorf("read the log stream: %w", err)
		}
		switch ev.Type {
		case "log":
			var rec LogRecord
			if err := json.Unmarshal([]byte(ev.Data), &rec); err != nil {
				return fmt.Errorf("the log stream sent a record that is not JSON: %w", err)
			}
			if err := fn(rec); err != nil {
				return err
			}
		case "dropped":
			var d struct {
				Dropped int `json:"dropped"`
			}
			if json.Unmarshal([]byte(ev.Data), &d) == nil && opts.OnDropped != nil {
				opts.OnDropped(d.Dropped)
			}
		}
	}
}
