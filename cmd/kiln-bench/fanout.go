package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The SSE fan-out workload: fanRuns runs, each on a new thread, each
// fanCalls echo calls then a final text (the engine benchmark's 21-step
// run), started at once against a kiln serve process that fanClients
// clients follow on /api/v1/events.
const (
	fanRuns  = 200
	fanCalls = 10
)

// fanoutResult is one fan-out measurement.
type fanoutResult struct {
	clients    int
	runTime    time.Duration // first run posted -> last run finished
	events     int           // durable events the runs produced
	complete   int           // clients that received every one of them, once, in order
	reconnects int64         // times a client was dropped and resumed with Last-Event-ID
	peakRSS    float64       // MiB, VmHWM of the server
	afterRSS   float64       // MiB, VmRSS a while after the clients left
}

// fanClient follows /api/v1/events like a browser tab: it resumes with
// Last-Event-ID when the server drops it, and records every durable id it
// gets. A client that never reads is just an open connection.
type fanClient struct {
	addr      string
	ids       int // durable ids received
	last      atomic.Int64
	dups      int
	gaps      int
	drops     *atomic.Int64
	done      chan struct{}
	since     int64
	notRead   bool
	ready     chan struct{}
	readyOne  sync.Once // for a client that never reads
	readyOnce bool      // for a client that reads: seen the ready event
}

// run reads the stream until ctx ends, reconnecting after a drop.
func (c *fanClient) run(ctx context.Context) {
	defer close(c.done)
	for ctx.Err() == nil {
		err := c.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			c.drops.Add(1)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// follow makes one request and reads it until it ends. The first request
// asks for everything after since (the seq before the runs start).
func (c *fanClient) follow(ctx context.Context) error {
	d := net.Dialer{}
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	from := c.since
	if l := c.last.Load(); l > from {
		from = l
	}
	fmt.Fprintf(conn, "GET /api/v1/events HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nLast-Event-ID: %d\r\n\r\n", c.addr, from)
	if c.notRead {
		c.readyOne.Do(func() { close(c.ready) })
		<-ctx.Done()
		return nil
	}
	br := bufio.NewReaderSize(conn, 4<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	// An SSE stream has a newline inside no field (JSON escapes them), so
	// "\nid: " starts every id line and nothing else: the client looks for
	// those in what it reads, keeping the tail that may hold a partial one.
	buf := make([]byte, 32<<10)
	have := 0
	for {
		n, err := resp.Body.Read(buf[have:])
		have += n
		if !c.readyOnce && bytes.Contains(buf[:have], []byte("event: ready")) {
			c.readyOnce = true
			close(c.ready)
		}
		done := 0
		for {
			i := bytes.Index(buf[done:have], []byte("\nid: "))
			if i < 0 {
				break
			}
			start := done + i + 5
			end := bytes.IndexByte(buf[start:have], '\n')
			if end < 0 {
				break // the rest of the line is still to come
			}
			seq, perr := strconv.ParseInt(string(buf[start:start+end]), 10, 64)
			if perr != nil {
				return perr
			}
			c.record(seq)
			done = start + end
		}
		// Keep what may start an id line: from the last newline on.
		if k := bytes.LastIndexByte(buf[done:have], '\n'); k >= 0 {
			done += k
		} else if done == 0 && have == len(buf) {
			done = have - 16 // a line longer than the buffer: no id in it
		}
		have = copy(buf, buf[done:have])
		if err != nil {
			return err
		}
	}
}

// record notes a durable id.
func (c *fanClient) record(seq int64) {
	switch last := c.last.Load(); {
	case seq <= last:
		c.dups++
		return
	case last > 0 && seq != last+1 || last == 0 && seq != c.since+1:
		c.gaps++
	}
	c.last.Store(seq)
	c.ids++
}

// fanout measures one fan-out run: a fresh server, clients (readers of
// them reading, the rest never reading), fanRuns runs at once. settle is
// how long to wait after the clients left before reading the server's
// memory again.
func fanout(bin string, readers, idle int, settle time.Duration) (fanoutResult, error) {
	res := fanoutResult{clients: readers + idle}
	addr, pid, stop, err := startServer(bin, "KILN_MODEL=scripted")
	if err != nil {
		return res, err
	}
	defer stop()
	base := "http://" + addr + "/api/v1"
	since, err := lastSeq(base)
	if err != nil {
		return res, err
	}
	var drops atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clients := make([]*fanClient, readers+idle)
	for i := range clients {
		c := &fanClient{addr: addr, since: since, drops: &drops, done: make(chan struct{}), ready: make(chan struct{}), notRead: i >= readers}
		clients[i] = c
		go c.run(ctx)
	}
	for _, c := range clients {
		select {
		case <-c.ready:
		case <-time.After(30 * time.Second):
			return res, errors.New("fan-out: clients did not connect within 30 s")
		}
	}
	var script strings.Builder
	for i := range fanCalls {
		fmt.Fprintf(&script, "tool echo {\"i\": %d, \"note\": \"a line of output from the tool\"}\n", i)
	}
	script.WriteString("text done")
	body, _ := json.Marshal(map[string]any{"input": map[string]string{"text": script.String()}, "model": "scripted"})
	t0 := time.Now()
	for range fanRuns {
		var th struct{ ID string }
		if err := postJSON(base+"/threads", `{"title":"fan-out"}`, &th); err != nil {
			return res, err
		}
		if err := postJSON(base+"/threads/"+th.ID+"/runs", string(body), nil); err != nil {
			return res, err
		}
	}
	for {
		var page struct{ Counts struct{ Unread int } }
		if err := getJSON(base+"/inbox?queue=unread&limit=1", &page); err != nil {
			return res, err
		}
		if page.Counts.Unread >= fanRuns {
			break
		}
		if time.Since(t0) > 5*time.Minute {
			return res, errors.New("fan-out: the runs did not finish within 5 minutes")
		}
		time.Sleep(5 * time.Millisecond)
	}
	res.runTime = time.Since(t0)
	end, err := lastSeq(base)
	if err != nil {
		return res, err
	}
	res.events = int(end - since)
	// Every reading client must get every durable event, even a dropped one.
	deadline := time.Now().Add(2 * time.Minute)
	for _, c := range clients[:readers] {
		for c.last.Load() < end && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	cancel()
	for _, c := range clients {
		<-c.done
		if !c.notRead && c.last.Load() == end && c.ids == res.events && c.dups == 0 && c.gaps == 0 {
			res.complete++
		}
	}
	res.reconnects = drops.Load()
	if res.peakRSS, err = procMiB(pid, "VmHWM:"); err != nil {
		return res, err
	}
	time.Sleep(settle)
	res.afterRSS, err = procMiB(pid, "VmRSS:")
	return res, err
}

// procMiB reads a memory figure of /proc/<pid>/status, in MiB.
func procMiB(pid int, field string) (float64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

func lastSeq(base string) (int64, error) {
	// The global stream's ready event carries the last committed seq.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ready struct {
				LastSeq int64 `json:"last_seq"`
			}
			if err := json.Unmarshal([]byte(data), &ready); err != nil {
				return 0, err
			}
			return ready.LastSeq, nil
		}
	}
	return 0, fmt.Errorf("no ready event: %v", sc.Err())
}

func postJSON(url, body string, out any) error {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func getJSON(url string, out any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// fanoutRows measures the fan-out figures of the SSE issue: the same runs
// followed by one client, by 500, and by one reader with 300 clients that
// never read; count rounds of the three, interleaved, and the medians.
func fanoutRows(bin string, count int, settle time.Duration, add func(figure string, v float64, unit, target string, ok bool), note func(figure, why string)) {
	var one, many, idle []fanoutResult
	for round := range count {
		r, err := fanout(bin, 1, 0, 0)
		if err != nil {
			note("SSE fan-out", err.Error())
			return
		}
		one = append(one, r)
		wait := time.Duration(0)
		if round == count-1 {
			wait = settle // once is enough
		}
		if r, err = fanout(bin, 500, 0, wait); err != nil {
			note("SSE fan-out, 500 clients", err.Error())
			return
		}
		many = append(many, r)
		if r, err = fanout(bin, 1, 300, 0); err != nil {
			note("SSE fan-out, 300 clients that never read", err.Error())
			return
		}
		idle = append(idle, r)
	}
	secs := func(rs []fanoutResult) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = r.runTime.Seconds()
		}
		return median(v)
	}
	worst := func(rs []fanoutResult, f func(fanoutResult) float64) float64 {
		w := f(rs[0])
		for _, r := range rs[1:] {
			w = max(w, f(r))
		}
		return w
	}
	complete, events, drops := len(many)*500, many[0].events, int64(0)
	for _, r := range many {
		complete = min(complete, r.complete)
		drops += r.reconnects
	}
	last := many[len(many)-1]
	ratio := secs(many) / secs(one)
	add(fmt.Sprintf("SSE fan-out: %d runs, 1 client on /events", fanRuns), secs(one), "s", "", true)
	add(fmt.Sprintf("SSE fan-out: %d runs, 500 clients", fanRuns), secs(many), "s", "", true)
	add("SSE fan-out: run time 500 clients / 1 client", ratio, "x", "<= 1.5x", ratio <= 1.5)
	add(fmt.Sprintf("SSE fan-out: clients that got all %d durable events once, in order (worst round)", events), float64(complete), "of 500", "500 of 500", complete == 500)
	add("SSE fan-out: clients dropped for falling behind (resumed with Last-Event-ID), all rounds", float64(drops), "", "", true)
	peak := worst(many, func(r fanoutResult) float64 { return r.peakRSS })
	add("SSE fan-out: server peak resident memory, 500 clients (worst round)", peak, "MiB", "< 150 MiB", peak < 150)
	add(fmt.Sprintf("SSE fan-out: server resident memory %s after they left", settle), last.afterRSS, "MiB", "< 60 MiB", last.afterRSS < 60)
	slow := secs(idle) / secs(one)
	add("SSE fan-out: run time with 300 clients that never read / 1 client", slow, "x", "", true)
}
