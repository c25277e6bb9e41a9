package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"
)

func TestLogs(t *testing.T) {
	c, reqs := fakeAPI(t, http.StatusOK, `{"records":[{"time":"2026-03-01T12:00:00.5Z","level":"WARN","msg":"plugin failed","component":"registry","plugin":"calc","g":{"n":1}}],"next_cursor":"abc"}`)
	since := time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)
	page, err := c.Logs(context.Background(), LogOptions{Level: "warn", Component: "wasm", Since: since, Search: "oom", Limit: 5, Cursor: "xyz"})
	if err != nil {
		t.Fatal(err)
	}
	r := (*reqs)[0]
	q, _ := url.ParseQuery(r.query)
	if r.method != "GET" || r.path != "/api/v1/logs" || q.Get("level") != "warn" || q.Get("component") != "wasm" ||
		q.Get("since") != "2026-03-01T11:00:00Z" || q.Get("q") != "oom" || q.Get("limit") != "5" || q.Get("cursor") != "xyz" || q.Has("until") {
		t.Errorf("request %+v", r)
	}
	if page.NextCursor != "abc" || len(page.Records) != 1 {
		t.Fatalf("page %+v", page)
	}
	rec := page.Records[0]
	if rec.Level != "WARN" || rec.Message != "plugin failed" || rec.Component != "registry" || rec.Attrs["plugin"] != "calc" ||
		!rec.Time.Equal(time.Date(2026, 3, 1, 12, 0, 0, 5e8, time.UTC)) || len(rec.Attrs) != 2 {
		t.Errorf("record %+v", rec)
	}
	b, _ := json.Marshal(rec)
	if string(b) != `{"time":"2026-03-01T12:00:00.5Z","level":"WARN","msg":"plugin failed","component":"registry","plugin":"calc","g":{"n":1}}` {
		t.Errorf("marshalled %s", b)
	}

	bad, _ := fakeAPI(t, http.StatusBadRequest, `{"error":{"code":"invalid","message":"query parameter \"level\" must be debug, info, warn or error, got \"loud\""}}`)
	if _, err := bad.Logs(context.Background(), LogOptions{Level: "loud"}); !IsInvalid(err) {
		t.Errorf("bad level: %v", err)
	}
}

func TestFollowLogs(t *testing.T) {
	var query url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.Query()
		if r.URL.Path != "/api/v1/logs/stream" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: log\ndata: {\"time\":\"2026-03-01T12:00:00Z\",\"level\":\"INFO\",\"msg\":\"one\",\"component\":\"web\"}\n\n"+
			": ping\n\nevent: dropped\ndata: {\"dropped\":7}\n\n"+
			"event: log\ndata: {\"time\":\"2026-03-01T12:00:01Z\",\"level\":\"INFO\",\"msg\":\"two\",\"component\":\"web\"}\n\n")
	}))
	defer srv.Close()
	c, _ := New(srv.URL)
	var msgs []string
	dropped := 0
	err := c.FollowLogs(context.Background(), LogFollowOptions{Component: "web", Tail: 10, OnDropped: func(n int) { dropped += n }},
		func(r LogRecord) error { msgs = append(msgs, r.Message); return nil })
	if !errors.Is(err, io.EOF) || len(msgs) != 2 || msgs[1] != "two" || dropped != 7 {
		t.Errorf("FollowLogs: %v, %q, dropped %d", err, msgs, dropped)
	}
	if query.Get("component") != "web" || query.Get("tail") != "10" {
		t.Errorf("query %v", query)
	}
	// fn's error stops the stream and is returned.
	stop := errors.New("enough")
	if err := c.FollowLogs(context.Background(), LogFollowOptions{}, func(LogRecord) error { return stop }); err != stop {
		t.Errorf("stopping: %v", err)
	}
	// An error response is an *Error.
	nf, _ := New(srv.URL + "/elsewhere")
	if err := nf.FollowLogs(context.Background(), LogFollowOptions{}, func(LogRecord) error { return nil }); !IsNotFound(err) {
		t.Errorf("404: %v", err)
	}
}
