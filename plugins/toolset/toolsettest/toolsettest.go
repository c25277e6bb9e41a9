// Package toolsettest is the conformance kit of the "toolset" extension
// kind, in the spirit of testing/fstest: RunToolset checks that an
// implementation of toolset.Toolset — WASM (plugins/wasm) or process
// (plugins/process) — serving the calc example's tools
// (sdk/plugin/examples/calc/calctools) behaves as the interface says.
//
// The suite uses only the tools that behave the same on every transport:
// add, echo, and fetch of a HoldServer as a call that blocks until the
// test releases it (Close must cancel such calls, and calls must run
// concurrently as far as the transport promises). What depends on the
// transport (call deadlines, memory caps, filesystem and network
// permissions, restarts) is tested by each transport's own package.
package toolsettest

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/toolset"
)

// Transport is the toolset under test, for RunToolset.
type Transport struct {
	// Load returns a fresh, working toolset serving the calc example's
	// tools (sdk/plugin/examples/calc/calctools), with the permissions
	// perms (a manifest "permissions" object as raw JSON, "" for none)
	// where the transport has permissions. The suite
	// calls it once per subtest with that subtest's t (so it may use
	// t.TempDir, t.Cleanup and t.Fatal), closes each toolset itself, and
	// may close it twice.
	Load func(t *testing.T, perms string) toolset.Toolset
	// Concurrency is how many calls the transport promises to run at
	// once: the suite checks that that many calls that block are all in
	// flight together. 0 means 1 (calls may run one at a time).
	Concurrency int
}

// RunToolset runs the conformance suite as subtests of t.
func RunToolset(t *testing.T, tr Transport) {
	t.Helper()
	open := func(t *testing.T, perms string) toolset.Toolset {
		t.Helper()
		ts := tr.Load(t, perms)
		if ts == nil {
			t.Fatal("Load returned a nil toolset")
		}
		t.Cleanup(func() { ts.Close() })
		return ts
	}
	held := func(t *testing.T) (toolset.Toolset, *plugintest.HoldServer) {
		h := plugintest.NewHoldServer(t)
		return open(t, heldPerms(h)), h
	}
	n := max(tr.Concurrency, 1)
	t.Run("Tools", func(t *testing.T) { testTools(t, open(t, "")) })
	t.Run("Add", func(t *testing.T) { testAdd(t, open(t, "")) })
	t.Run("Echo", func(t *testing.T) { testEcho(t, open(t, "")) })
	t.Run("UnknownTool", func(t *testing.T) { testUnknownTool(t, open(t, "")) })
	t.Run("MalformedArgs", func(t *testing.T) { testMalformedArgs(t, open(t, "")) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, open(t, "")) })
	t.Run("ConcurrentBlocking", func(t *testing.T) { ts, h := held(t); testConcurrentBlocking(t, ts, h, n) })
	t.Run("Cancelled", func(t *testing.T) { testCancelled(t, open(t, "")) })
	t.Run("Close", func(t *testing.T) { testClose(t, open(t, "")) })
	t.Run("CloseCancelsCalls", func(t *testing.T) { ts, h := held(t); testCloseCancelsCalls(t, ts, h, n) })
}

// patience is how long the suite waits for what should happen at once
// (calls reaching the HoldServer, Close returning): generous, for a
// loaded machine, and far below the ten minutes a held call lasts when
// nothing stops it (heldPerms).
const patience = 20 * time.Second

// heldPerms lets the toolset fetch from h, with the longest call deadline
// (timeout_ms 600000): a held call that nothing stops lasts ten minutes.
func heldPerms(h *plugintest.HoldServer) string {
	return fmt.Sprintf(`{"network":[%q],"timeout_ms":600000}`, h.Host)
}

// suiteTools are the specs of the calc example's tools the suite relies
// on, as the example declares them: calc-tools.json, which the example's
// own test holds equal to its declarations, so that this kit does not
// link the plugin SDK.
var suiteTools = func() []core.ToolSpec {
	var specs []core.ToolSpec
	if err := json.Unmarshal(calcToolsJSON, &specs); err != nil {
		panic("plugintest: calc-tools.json: " + err.Error())
	}
	return specs
}()

//go:embed calc-tools.json
var calcToolsJSON []byte

func testTools(t *testing.T, ts toolset.Toolset) {
	specs, err := ts.Tools(context.Background())
	if err != nil {
		t.Fatalf("Tools: %v", err)
	}
	got := map[string]core.ToolSpec{}
	for _, s := range specs {
		if _, dup := got[s.Name]; dup {
			t.Errorf("Tools lists %q twice", s.Name)
		}
		got[s.Name] = s
	}
	for _, want := range suiteTools {
		name := want.Name
		s, ok := got[name]
		if !ok {
			t.Errorf("Tools does not list %q (got %d tools)", name, len(specs))
			continue
		}
		if s.Description != want.Description {
			t.Errorf("%s: description %q, declared %q", name, s.Description, want.Description)
		}
		if s.Idempotent != want.Idempotent {
			t.Errorf("%s: idempotent %v, declared %v", name, s.Idempotent, want.Idempotent)
		}
		switch {
		case len(want.Schema) == 0 && len(s.Schema) != 0:
			t.Errorf("%s: schema %s, declared none", name, s.Schema)
		case len(want.Schema) != 0 && !sameJSON(s.Schema, want.Schema):
			t.Errorf("%s: schema %s, declared %s", name, s.Schema, want.Schema)
		}
	}
}

func testAdd(t *testing.T, ts toolset.Toolset) {
	for _, c := range []struct {
		a, b, sum float64
	}{
		{1, 2, 3},
		{2, 40, 42},
		{-7, 3, -4},
		{-1.25, -2.5, -3.75},
		{1.5, 2, 3.5},
		{0.1, 0.2, 0.30000000000000004}, // float64 addition, not decimal
		{1e300, 1e300, 2e300},
		{0, 0, 0},
	} {
		args := fmt.Sprintf(`{"a":%s,"b":%s}`, num(c.a), num(c.b))
		out, err := callText(ts, "add", args)
		if err != nil {
			t.Errorf("add %s: %v", args, err)
			continue
		}
		got, err := strconv.ParseFloat(out, 64)
		if err != nil || got != c.sum {
			t.Errorf("add %s = %q, want %s", args, out, num(c.sum))
		}
	}
}

// payload returns a JSON object of exactly n bytes (n >= 64) with a
// string, numbers, a nested object, an array, escapes and non-ASCII text.
func payload(n int) string {
	head := `{"n":-12.5e-3,"ok":true,"nil":null,"list":[1,"two",{"3":[]}],"esc":"q\"b\\n\nt\té☃","pad":"`
	tail := `"}`
	if fill := n - len(head) - len(tail); fill > 0 {
		return head + strings.Repeat("x", fill) + tail
	}
	return head + tail
}

// echoPayload is the 1 KiB JSON object the suite and the benchmarks send
// to echo.
var echoPayload = payload(1024)

func testEcho(t *testing.T, ts toolset.Toolset) {
	if len(echoPayload) != 1024 {
		t.Fatalf("payload is %d bytes, want 1024", len(echoPayload))
	}
	for _, args := range []string{echoPayload, `{}`, `{"s":"plain"}`} {
		out, err := callText(ts, "echo", args)
		if err != nil {
			t.Errorf("echo %.40s…: %v", args, err)
			continue
		}
		if !sameJSON([]byte(out), []byte(args)) {
			t.Errorf("echo %.60s… returned %.60s… (%d bytes, sent %d)", args, out, len(out), len(args))
		}
	}
}

func testUnknownTool(t *testing.T, ts toolset.Toolset) {
	_, err := callText(ts, "no-such-tool", `{}`)
	switch {
	case err == nil:
		t.Fatal("calling an unknown tool succeeded")
	case !errors.Is(err, errToolFailed):
		t.Fatalf("unknown tool: %v is an error, want the tool's failure (a result with IsError)", err)
	case !strings.Contains(err.Error(), "no-such-tool"):
		t.Errorf("unknown tool: %q does not name the tool", err)
	}
	mustAdd(t, ts)
}

func testMalformedArgs(t *testing.T, ts toolset.Toolset) {
	for _, args := range []string{
		`{bad`,             // not JSON
		`not json at all`,  // not JSON
		`{"a":"1","b":2}`,  // a string for a number
		`{"a":1,"b":[2]}`,  // an array for a number
		`[1,2]`,            // an array for the object
		`"a+b"`,            // a string for the object
		`{"a":1}`,          // b missing
		`{"a":1,"b":null}`, // b null
	} {
		out, err := callText(ts, "add", args)
		switch {
		case err == nil:
			t.Errorf("add %s = %q, want the tool's failure", args, out)
		case !errors.Is(err, errToolFailed):
			t.Errorf("add %s: %v is an error, want the tool's failure (a result with IsError)", args, err)
		}
		mustAdd(t, ts)
	}
}

func testConcurrent(t *testing.T, ts toolset.Toolset) {
	const goroutines, calls = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*calls)
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				a, b := float64(g*1000+i), -0.5*float64(i)
				args := fmt.Sprintf(`{"a":%s,"b":%s}`, num(a), num(b))
				if out, err := callText(ts, "add", args); err != nil {
					errs <- fmt.Errorf("goroutine %d: add %s: %v", g, args, err)
				} else if got, err := strconv.ParseFloat(out, 64); err != nil || got != a+b {
					errs <- fmt.Errorf("goroutine %d: add %s = %q, want %s", g, args, out, num(a+b))
				}
				msg := fmt.Sprintf(`{"g":%d,"i":%d,"pad":%q}`, g, i, strings.Repeat("y", 64*g))
				if out, err := callText(ts, "echo", msg); err != nil {
					errs <- fmt.Errorf("goroutine %d: echo: %v", g, err)
				} else if !sameJSON([]byte(out), []byte(msg)) {
					errs <- fmt.Errorf("goroutine %d: echo %.40s… returned %.40s…", g, msg, out)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 10 {
			t.Error(err)
		}
	}
	if n > 10 {
		t.Errorf("… and %d more failures", n-10)
	}
}

func testCancelled(t *testing.T, ts toolset.Toolset) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out, err := ts.Call(ctx, "add", json.RawMessage(`{"a":1,"b":2}`))
	switch {
	case err == nil:
		t.Fatalf("add with a cancelled context = %+v, want an error", out)
	case !errors.Is(err, context.Canceled):
		t.Errorf("add with a cancelled context: %v does not wrap context.Canceled", err)
	}
	mustAdd(t, ts)
}

func testClose(t *testing.T, ts toolset.Toolset) {
	mustAdd(t, ts)
	if err := ts.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if out, err := callText(ts, "add", `{"a":1,"b":2}`); err == nil {
		t.Errorf("add after Close = %q, want an error", out)
	} else if !errors.Is(err, plugins.ErrTransport) {
		t.Errorf("add after Close: %v does not wrap plugins.ErrTransport", err)
	}
	if out, err := callText(ts, "echo", `{}`); err == nil {
		t.Errorf("echo after Close = %q, want an error", out)
	}
	if err := ts.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// result is a call's outcome.
type result struct {
	out string
	err error
}

// fetchHeld starts n calls of fetch on h and returns their outcomes.
func fetchHeld(ts toolset.Toolset, h *plugintest.HoldServer, n int) <-chan result {
	c := make(chan result, n)
	for range n {
		go func() {
			out, err := callText(ts, "fetch", h.FetchArgs())
			c <- result{out, err}
		}()
	}
	return c
}

// testConcurrentBlocking checks that n calls that block are all in flight
// together: none waits for another to end.
func testConcurrentBlocking(t *testing.T, ts toolset.Toolset, h *plugintest.HoldServer, n int) {
	mustAdd(t, ts)
	results := fetchHeld(ts, h, n)
	if !h.WaitArrived(n, patience) {
		h.Release()
		t.Fatalf("%d calls of a tool that blocks were not all in flight within %v (the transport promises %d at once): calls wait for each other", n, patience, n)
	}
	h.Release()
	for range n {
		select {
		case r := <-results:
			if r.err != nil || r.out != plugintest.FetchResult {
				t.Errorf("released fetch = %q, %v; want %s", r.out, r.err, plugintest.FetchResult)
			}
		case <-time.After(patience):
			t.Fatalf("a released call did not return within %v", patience)
		}
	}
	mustAdd(t, ts)
}

// testCloseCancelsCalls checks that Close does not wait for the calls in
// flight: it returns at once, and they end, as transport failures, and
// stop what they were doing. It holds n calls, plus one waiting for them
// when n is all the transport runs at once.
func testCloseCancelsCalls(t *testing.T, ts toolset.Toolset, h *plugintest.HoldServer, n int) {
	mustAdd(t, ts)
	calls := n + 1
	results := fetchHeld(ts, h, calls)
	if !h.WaitArrived(n, patience) {
		h.Release()
		t.Fatalf("%d held calls were not in flight within %v", n, patience)
	}
	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- ts.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
		t.Logf("Close returned after %v with %d calls in flight", time.Since(start), calls)
	case <-time.After(patience):
		h.Release() // let the calls end, and Close with them
		t.Fatalf("Close did not return within %v with calls in flight: it must cancel them, not wait for them", patience)
	}
	for range calls {
		select {
		case r := <-results:
			switch {
			case r.err == nil:
				t.Errorf("a call in flight at Close succeeded with %q", r.out)
			case !errors.Is(r.err, plugins.ErrTransport):
				t.Errorf("a call in flight at Close: %v does not wrap plugins.ErrTransport", r.err)
			}
		case <-time.After(patience):
			h.Release()
			t.Fatalf("a call in flight at Close did not end within %v", patience)
		}
	}
	// The server saw each request it held go away: the calls were
	// stopped, not abandoned to run on.
	if !h.WaitGone(n, patience) {
		t.Errorf("the server still held requests %v after Close: the calls in flight run on", patience)
	}
	if out, err := callText(ts, "add", `{"a":1,"b":2}`); !errors.Is(err, plugins.ErrTransport) {
		t.Errorf("add after Close = %q, %v; want an error wrapping plugins.ErrTransport", out, err)
	}
}

// errToolFailed is callText's error for a result with IsError: the
// tool's own failure, as opposed to a failure to run it.
var errToolFailed = errors.New("the tool failed")

// callText runs tool with args under a background context and returns its
// result's text. A result with IsError is an error wrapping errToolFailed
// with the result's text; a successful result that is not exactly one
// text part is an error too (every suite tool answers in text).
func callText(ts toolset.Toolset, tool, args string) (string, error) {
	res, err := ts.Call(context.Background(), tool, json.RawMessage(args))
	switch {
	case err != nil:
		return "", err
	case res.IsError:
		return "", fmt.Errorf("%w: %s", errToolFailed, res.Text())
	case len(res.Content) != 1 || res.Content[0].Type != core.PartText:
		return "", fmt.Errorf("the result is not one text part: %+v", res.Content)
	}
	return res.Content[0].Text, nil
}

// mustAdd checks that the toolset still serves calls.
func mustAdd(t *testing.T, ts toolset.Toolset) {
	t.Helper()
	out, err := callText(ts, "add", `{"a":2,"b":40}`)
	if err != nil || out != "42" {
		t.Fatalf("add 2+40 = %q, %v; want 42", out, err)
	}
}

// num formats f as a JSON number that parses back to f.
func num(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		panic("not a JSON number")
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// sameJSON reports whether a and b are the same JSON value: equal after
// decoding, with numbers compared by their text.
func sameJSON(a, b []byte) bool {
	va, erra := decode(a)
	vb, errb := decode(b)
	if erra != nil || errb != nil {
		return false
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

func decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data")
	}
	return v, nil
}
