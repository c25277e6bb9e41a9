package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// sseMsg is one parsed SSE message, or a comment line.
type sseMsg struct {
	ID      string
	HasID   bool
	Event   string
	Data    string
	Retry   string
	Comment string
}

// seq is the message's id as a number.
func (m sseMsg) seq(t *testing.T) int64 {
	t.Helper()
	n, err := strconv.ParseInt(m.ID, 10, 64)
	if err != nil {
		t.Fatalf("id %q: %v", m.ID, err)
	}
	return n
}

// sseClient reads an event stream. msgs is unbuffered: while the test does
// not receive, the client stops reading the connection.
type sseClient struct {
	t      *testing.T
	cancel context.CancelFunc
	msgs   chan sseMsg
}

// stream opens an event stream and requires a 200 text/event-stream
// response. It is closed when the test ends.
func (e *env) stream(path string, header map[string]string) *sseClient {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := e.srv.Client().Do(e.newRequest(ctx, "GET", path, "", header))
	if err != nil {
		cancel()
		e.t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		e.t.Fatalf("GET %s: %d %s %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	c := &sseClient{t: e.t, cancel: cancel, msgs: make(chan sseMsg)}
	go c.read(ctx, resp.Body)
	e.t.Cleanup(c.close)
	return c
}

// read parses the stream into c.msgs until it ends.
func (c *sseClient) read(ctx context.Context, body io.ReadCloser) {
	defer close(c.msgs)
	defer body.Close()
	emit := func(m sseMsg) bool {
		select {
		case c.msgs <- m:
			return true
		case <-ctx.Done():
			return false
		}
	}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var m sseMsg
	pending := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if pending && !emit(m) {
				return
			}
			m, pending = sseMsg{}, false
		case strings.HasPrefix(line, ":"):
			if !emit(sseMsg{Comment: strings.TrimSpace(line[1:])}) {
				return
			}
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				m.ID, m.HasID = value, true
			case "event":
				m.Event = value
			case "data":
				m.Data += value
			case "retry":
				m.Retry = value
			}
			pending = true
		}
	}
}

func (c *sseClient) close() { c.cancel() }

// next returns the next message, failing after a timeout or at the end.
func (c *sseClient) next() sseMsg {
	c.t.Helper()
	select {
	case m, ok := <-c.msgs:
		if !ok {
			c.t.Fatal("event stream ended")
		}
		return m
	case <-time.After(15 * time.Second):
		c.t.Fatal("timed out waiting for an event")
	}
	panic("unreachable")
}

// preamble reads the retry message and the ready event and returns
// ready's last_seq.
func (c *sseClient) preamble() int64 {
	c.t.Helper()
	if m := c.next(); m.Retry != "2000" {
		c.t.Fatalf("first message %+v, want retry: 2000", m)
	}
	m := c.next()
	if m.Event != "ready" || m.HasID {
		c.t.Fatalf("second message %+v, want the ready event without id", m)
	}
	var ready struct {
		LastSeq *int64 `json:"last_seq"`
	}
	if err := json.Unmarshal([]byte(m.Data), &ready); err != nil || ready.LastSeq == nil {
		c.t.Fatalf("ready data %q", m.Data)
	}
	return *ready.LastSeq
}

// durableUntil reads messages until the durable event with Seq last and
// returns the durable events read, checking that each id is the event's
// Seq and that ids strictly increase. Ephemeral events are returned in
// ephemeral; comments are skipped.
func (c *sseClient) durableUntil(last int64) (durable []core.Event, ephemeral []sseMsg) {
	c.t.Helper()
	prev := int64(-1)
	for {
		m := c.next()
		if m.Comment != "" {
			continue
		}
		var ev core.Event
		if err := json.Unmarshal([]byte(m.Data), &ev); err != nil {
			c.t.Fatalf("data of %+v: %v", m, err)
		}
		if ev.Type != m.Event {
			c.t.Fatalf("event name %q, data type %q", m.Event, ev.Type)
		}
		if !m.HasID {
			if ev.Seq != 0 {
				c.t.Fatalf("durable event %d without id", ev.Seq)
			}
			ephemeral = append(ephemeral, m)
			continue
		}
		seq := m.seq(c.t)
		if seq != ev.Seq || seq <= prev {
			c.t.Fatalf("id %d after %d, event seq %d", seq, prev, ev.Seq)
		}
		prev = seq
		durable = append(durable, ev)
		if seq == last {
			return durable, ephemeral
		}
		if seq > last {
			c.t.Fatalf("passed seq %d without seeing it", last)
		}
	}
}

// seqs lists the Seq of each event.
func seqs(evs []core.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// after returns the events with Seq > n.
func after(evs []core.Event, n int64) []core.Event {
	var out []core.Event
	for _, e := range evs {
		if e.Seq > n {
			out = append(out, e)
		}
	}
	return out
}

// requireSeqs fails unless got and want hold the same Seqs.
func requireSeqs(t *testing.T, what string, got, want []core.Event) {
	t.Helper()
	if fmt.Sprint(seqs(got)) != fmt.Sprint(seqs(want)) {
		t.Fatalf("%s: got seqs %v, want %v", what, seqs(got), seqs(want))
	}
}

func TestSSEThreadStream(t *testing.T) {
	e := newEnv(t, Options{})
	th := e.createThread("stream")
	other := e.createThread("other thread")
	run := e.startRun(th.ID, "tool echo {\"a\":1}\ntext first answer", nil)
	e.waitRun(run.ID, core.RunSucceeded)
	stored := e.storedEvents(th.ID)
	last := stored[len(stored)-1].Seq

	// Without a resume point a thread stream replays the whole thread.
	c := e.stream("/api/v1/threads/"+th.ID+"/events", nil)
	if n := c.preamble(); n != 0 {
		t.Fatalf("ready last_seq %d, want 0", n)
	}
	got, _ := c.durableUntil(last)
	requireSeqs(t, "replay", got, stored)
	for _, ev := range got {
		if ev.ThreadID != th.ID {
			t.Fatalf("event of thread %q in the stream of %q", ev.ThreadID, th.ID)
		}
	}

	// Live events follow: deltas without ids, durable events in order.
	run2 := e.startRun(th.ID, "text hello live world", nil)
	e.call("PATCH", "/api/v1/threads/"+other.ID, `{"title":"not in this stream"}`, http.StatusOK, nil)
	e.waitRun(run2.ID, core.RunSucceeded)
	all := e.storedEvents(th.ID)
	live, deltas := c.durableUntil(all[len(all)-1].Seq)
	requireSeqs(t, "live", live, after(all, last))
	if len(deltas) == 0 {
		t.Fatal("no message.delta events")
	}
	for _, d := range deltas {
		if d.Event != core.EventMessageDelta || d.HasID {
			t.Fatalf("ephemeral event %+v", d)
		}
	}

	// Resuming with Last-Event-ID or ?since= gets exactly the rest.
	mid := all[len(all)/2].Seq
	for name, open := range map[string]func(e *env) *sseClient{
		"Last-Event-ID": func(e *env) *sseClient {
			return e.stream("/api/v1/threads/"+th.ID+"/events", map[string]string{"Last-Event-ID": strconv.FormatInt(mid, 10)})
		},
		"since": func(e *env) *sseClient {
			return e.stream("/api/v1/threads/"+th.ID+"/events?since="+strconv.FormatInt(mid, 10), nil)
		},
		"header beats since": func(e *env) *sseClient {
			return e.stream("/api/v1/threads/"+th.ID+"/events?since=0", map[string]string{"Last-Event-ID": strconv.FormatInt(mid, 10)})
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := open(e.in(t))
			if n := c.preamble(); n != mid {
				t.Fatalf("ready last_seq %d, want %d", n, mid)
			}
			got, _ := c.durableUntil(all[len(all)-1].Seq)
			requireSeqs(t, "resumed", got, after(all, mid))
		})
	}
}

func TestSSEGlobalStream(t *testing.T) {
	e := newEnv(t, Options{})
	e.call("POST", "/api/v1/folders", `{"name":"A"}`, http.StatusCreated, nil)
	e.createThread("t")
	stored := e.storedEvents("")
	last := stored[len(stored)-1].Seq

	// Without a resume point the global stream starts live.
	c := e.stream("/api/v1/events", nil)
	if n := c.preamble(); n != last {
		t.Fatalf("ready last_seq %d, want %d", n, last)
	}
	e.call("POST", "/api/v1/folders", `{"name":"B"}`, http.StatusCreated, nil)
	all := e.storedEvents("")
	got, _ := c.durableUntil(all[len(all)-1].Seq)
	requireSeqs(t, "live", got, after(all, last))
	if got[0].Type != core.EventFolderCreated {
		t.Fatalf("live event %+v", got[0])
	}

	c = e.stream("/api/v1/events?since=0", nil)
	c.preamble()
	got, _ = c.durableUntil(all[len(all)-1].Seq)
	requireSeqs(t, "since=0", got, all)
}

func TestSSEResumeAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	e := startEnv(t, dir, Options{})
	th := e.createThread("durable")
	run := e.startRun(th.ID, "tool echo {\"n\":1}\ntext before restart", nil)
	e.waitRun(run.ID, core.RunSucceeded)
	before := e.storedEvents(th.ID)
	seen := before[len(before)-1].Seq
	e.close()

	e = startEnv(t, dir, Options{})
	run = e.startRun(th.ID, "tool echo {\"n\":2}\ntext after restart", nil)
	e.waitRun(run.ID, core.RunSucceeded)
	all := e.storedEvents(th.ID)
	c := e.stream("/api/v1/threads/"+th.ID+"/events", map[string]string{"Last-Event-ID": strconv.FormatInt(seen, 10)})
	c.preamble()
	got, _ := c.durableUntil(all[len(all)-1].Seq)
	requireSeqs(t, "after restart", got, after(all, seen))
	if len(got) == 0 || got[0].Seq <= seen {
		t.Fatalf("resumed events %v after %d", seqs(got), seen)
	}
}

func TestSSEHeartbeat(t *testing.T) {
	e := newEnv(t, Options{Heartbeat: 10 * time.Millisecond})
	c := e.stream("/api/v1/events", nil)
	c.preamble()
	if m := c.next(); m.Comment != "ping" {
		t.Fatalf("got %+v, want the ping comment", m)
	}
}

func TestSSEEndsWithClient(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.stream("/api/v1/events", nil)
	c.preamble()
	if n := e.svc.Broker().Subscribers(); n != 1 {
		t.Fatalf("%d subscribers with one stream open", n)
	}
	c.close()
	deadline := time.Now().Add(10 * time.Second)
	for e.svc.Broker().Subscribers() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stream's subscription outlived its client")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSSELag makes the broker drop a stream's subscription and checks that
// the stream recovers from the store without a gap.
func TestSSELag(t *testing.T) {
	e := newEnv(t, Options{})
	th := e.createThread("lag")
	c := e.stream("/api/v1/threads/"+th.ID+"/events?since=0", nil)
	c.preamble()
	created := e.storedEvents(th.ID)
	c.durableUntil(created[len(created)-1].Seq)

	// While the client reads nothing, flood the stream with more ephemeral
	// events than its subscription buffers, then commit a durable one.
	delta := json.RawMessage(`{"text":"` + strings.Repeat("x", 200) + `"}`)
	for range 60000 {
		e.svc.Broker().Publish(core.Event{OwnerID: core.LocalOwner.ID, ThreadID: th.ID, Type: core.EventMessageDelta, Payload: delta})
	}
	e.call("PATCH", "/api/v1/threads/"+th.ID, `{"title":"after the flood"}`, http.StatusOK, nil)

	all := e.storedEvents(th.ID)
	got, _ := c.durableUntil(all[len(all)-1].Seq)
	requireSeqs(t, "after lag", got, after(all, created[len(created)-1].Seq))
	if !strings.Contains(e.logs.String(), "event stream lagged") {
		t.Fatal("the subscription never lagged; the test proves nothing")
	}
}
