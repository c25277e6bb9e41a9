package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
		t.Fatalf("%d broker subscriptions with one stream open", n)
	}
	c.close()
	e.waitStreams(0)
	deadline := time.Now().Add(10 * time.Second)
	for e.svc.Broker().Subscribers() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the fanout's subscription outlived the last stream")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSSELag floods a stream whose client reads nothing with more events
// than the fanout keeps: the server drops the stream, and the client,
// resuming with Last-Event-ID, gets every durable event once.
func TestSSELag(t *testing.T) {
	e := newEnv(t, Options{})
	th := e.createThread("lag")
	c := e.stream("/api/v1/threads/"+th.ID+"/events?since=0", nil)
	c.preamble()
	created := e.storedEvents(th.ID)
	c.durableUntil(created[len(created)-1].Seq)

	// While the client reads nothing, flood the stream with more ephemeral
	// events than the fanout's ring holds, then commit a durable one.
	delta := json.RawMessage(`{"text":"` + strings.Repeat("x", 200) + `"}`)
	for range 2 * ringFrames {
		e.svc.Broker().Publish(core.Event{OwnerID: core.LocalOwner.ID, ThreadID: th.ID, Type: core.EventMessageDelta, Payload: delta})
	}
	e.call("PATCH", "/api/v1/threads/"+th.ID, `{"title":"after the flood"}`, http.StatusOK, nil)
	all := e.storedEvents(th.ID)

	// The stream ends; what it delivered and the resumed stream together
	// are every durable event, once.
	got := c.untilEnd()
	last := created[len(created)-1].Seq
	if len(got) > 0 {
		last = got[len(got)-1].Seq
	}
	if last == all[len(all)-1].Seq {
		t.Fatal("the stream was not dropped; the test proves nothing")
	}
	if _, dropped := e.fanout().stats(); dropped == 0 {
		t.Error("the fanout counts no dropped stream")
	}
	r := e.stream("/api/v1/threads/"+th.ID+"/events", map[string]string{"Last-Event-ID": fmt.Sprint(last)})
	r.preamble()
	rest, _ := r.durableUntil(all[len(all)-1].Seq)
	requireSeqs(t, "delivered before and after the drop", append(got, rest...), after(all, created[len(created)-1].Seq))
	if !strings.Contains(e.logs.String(), "event stream dropped") {
		t.Error("the drop was not logged")
	}
}

// TestSSEPumpDropped: when the broker drops the fanout's own subscription,
// every stream has missed events, even one that had read all the ring held:
// each is dropped and counted once, and a new stream gets what follows.
func TestSSEPumpDropped(t *testing.T) {
	e := newEnv(t, Options{})
	th := e.createThread("pump")
	c := e.stream("/api/v1/threads/"+th.ID+"/events?since=0", nil)
	c.preamble()
	created := e.storedEvents(th.ID)
	c.durableUntil(created[len(created)-1].Seq)

	// What the broker does to a subscriber that falls behind: it closes
	// the subscription.
	f := e.fanout()
	f.mu.RLock()
	sub := f.sub
	f.mu.RUnlock()
	sub.Close()

	if got := c.untilEnd(); len(got) != 0 {
		t.Fatalf("the dropped stream delivered %v", seqs(got))
	}
	if _, dropped := f.stats(); dropped != 1 {
		t.Errorf("%d streams counted dropped, want 1", dropped)
	}
	r := e.stream("/api/v1/threads/"+th.ID+"/events", map[string]string{"Last-Event-ID": fmt.Sprint(created[len(created)-1].Seq)})
	r.preamble()
	e.call("PATCH", "/api/v1/threads/"+th.ID, `{"title":"after the drop"}`, http.StatusOK, nil)
	all := e.storedEvents(th.ID)
	rest, _ := r.durableUntil(all[len(all)-1].Seq)
	requireSeqs(t, "delivered after the drop", rest, after(all, created[len(created)-1].Seq))
}

// TestSSEStalledClientDropped: a client that stops reading is dropped once
// a write to it has blocked for StreamWriteTimeout, and its stream's
// resources are released.
func TestSSEStalledClientDropped(t *testing.T) {
	e := newEnv(t, Options{StreamWriteTimeout: 200 * time.Millisecond})
	th := e.createThread("stall")
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /api/v1/threads/%s/events HTTP/1.1\r\nHost: %s\r\n\r\n", th.ID, e.srv.Listener.Addr())
	e.waitStreams(1)
	// Enough to fill the connection's buffers several times over; the
	// client reads none of it.
	delta := json.RawMessage(`{"text":"` + strings.Repeat("y", 4000) + `"}`)
	for i := 0; ; i++ {
		e.svc.Broker().Publish(core.Event{OwnerID: core.LocalOwner.ID, ThreadID: th.ID, Type: core.EventMessageDelta, Payload: delta})
		if streams, _ := e.fanout().stats(); streams == 0 {
			break
		}
		if i > 1_000_000 {
			t.Fatal("the stalled stream was never dropped")
		}
		if i%100 == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !strings.Contains(e.logs.String(), "i/o timeout") {
		t.Errorf("the drop should be a write timeout:\n%s", e.logs)
	}
}

// TestSSEMaxStreams: past Options.MaxStreams a new stream is refused with
// 503 and a reason; closing one makes room.
func TestSSEMaxStreams(t *testing.T) {
	e := newEnv(t, Options{MaxStreams: 2})
	a := e.stream("/api/v1/events", nil)
	a.preamble()
	b := e.stream("/api/v1/events", nil)
	b.preamble()
	r := e.wantError("GET", "/api/v1/events", "", nil, http.StatusServiceUnavailable, core.EUNAVAIL)
	if !strings.Contains(r.errorMessage(), "2 event streams open") || r.header.Get("Retry-After") == "" {
		t.Fatalf("refusal: %s %v", r.body, r.header)
	}
	a.close()
	e.waitStreams(1)
	c := e.stream("/api/v1/events", nil)
	c.preamble()
}

// TestFanoutEncodesOnce: however many streams follow, each event is
// encoded once.
func TestFanoutEncodesOnce(t *testing.T) {
	e := newEnv(t, Options{})
	var n atomic.Int64
	f := e.fanout()
	enc := f.encode
	f.encode = func(ev core.Event) []byte { n.Add(1); return enc(ev) }
	var streams []*sseClient
	for range 20 {
		c := e.stream("/api/v1/events", nil)
		c.preamble()
		streams = append(streams, c)
	}
	th := e.createThread("once")
	evs := e.storedEvents(th.ID)
	for _, c := range streams {
		c.durableUntil(evs[len(evs)-1].Seq)
	}
	if got := n.Load(); got != int64(len(evs)) {
		t.Fatalf("%d events encoded %d times for %d streams", len(evs), got, len(streams))
	}
}

// fanout returns the server's fanout.
func (e *env) fanout() *fanout { return e.server.fanout }

// waitStreams waits until the server has n event streams open.
func (e *env) waitStreams(n int) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got, _ := e.fanout().stats(); got == n {
			return
		}
		if time.Now().After(deadline) {
			got, _ := e.fanout().stats()
			e.t.Fatalf("%d event streams open, want %d", got, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// untilEnd reads the stream until the server ends it and returns the
// durable events it read.
func (c *sseClient) untilEnd() []core.Event {
	c.t.Helper()
	var out []core.Event
	deadline := time.After(30 * time.Second) // heartbeats must not extend it
	for {
		select {
		case m, ok := <-c.msgs:
			if !ok {
				return out
			}
			if !m.HasID {
				continue
			}
			var ev core.Event
			if err := json.Unmarshal([]byte(m.Data), &ev); err != nil {
				c.t.Fatalf("data of %+v: %v", m, err)
			}
			out = append(out, ev)
		case <-deadline:
			c.t.Fatal("the stream did not end")
		}
	}
}

// lockedRecorder is a ResponseWriter that cannot be hijacked, whose body
// the test reads while the handler writes.
type lockedRecorder struct {
	mu     sync.Mutex
	header http.Header
	code   int
	body   strings.Builder
}

func (l *lockedRecorder) Header() http.Header { return l.header }
func (l *lockedRecorder) WriteHeader(code int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.code == 0 {
		l.code = code
	}
}
func (l *lockedRecorder) Write(b []byte) (int, error) {
	l.WriteHeader(http.StatusOK)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.body.Write(b)
}
func (l *lockedRecorder) Flush() {}
func (l *lockedRecorder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.body.String()
}

// TestSSEWithoutHijack: where the connection cannot be taken over (HTTP/2,
// a recorder) the stream writes through the ResponseWriter.
func TestSSEWithoutHijack(t *testing.T) {
	e := newEnv(t, Options{})
	th := e.createThread("recorded")
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, "GET", "/api/v1/threads/"+th.ID+"/events", nil)
	rec := &lockedRecorder{header: http.Header{}}
	done := make(chan struct{})
	go func() { e.server.router().ServeHTTP(rec, req); close(done) }()
	e.waitStreams(1)
	e.call("PATCH", "/api/v1/threads/"+th.ID, `{"title":"seen live"}`, http.StatusOK, nil)
	all := e.storedEvents(th.ID)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(rec.String(), fmt.Sprintf("id: %d\n", all[len(all)-1].Seq)) {
		if time.Now().After(deadline) {
			t.Fatalf("the recorded stream lacks the live event:\n%s", rec.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	body := rec.String()
	if rec.code != http.StatusOK || rec.header.Get("Content-Type") != "text/event-stream" || !strings.HasPrefix(body, "retry: 2000\n\nevent: ready\n") {
		t.Fatalf("recorded stream: %d %v\n%s", rec.code, rec.header, body)
	}
	for _, ev := range all {
		if !strings.Contains(body, fmt.Sprintf("id: %d\nevent: %s\n", ev.Seq, ev.Type)) {
			t.Errorf("event %d (%s) missing", ev.Seq, ev.Type)
		}
	}
}
