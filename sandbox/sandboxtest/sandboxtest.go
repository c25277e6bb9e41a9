// Package sandboxtest is the conformance suite of sandbox.Runtime, in the
// spirit of testing/fstest: Run checks that a runtime does what the
// interface's doc comments say, through the interface alone, so that
// every backend (Docker, WASM, later Kubernetes), built in or behind a
// plugin transport, passes the same suite. Machine is an in-memory
// backend that passes it, for the suite's own test and for tests of code
// that uses a Runtime.
//
// The suite starts its sandboxes from the runtime's default environment
// (Spec.Image empty), which must have a POSIX sh and the programs echo,
// cat, sleep (with fractions of a second), pwd, true, false, test and [
// (with POSIX's operators), mkdir (with -p and -m) and chmod (octal
// modes), and a /tmp of mode 1777, as busybox and alpine do; a runtime
// that needs an image for that fills it in for the suite. It writes its files under /tmp/kiln-kit in each
// sandbox, and destroys every sandbox it started. A whole run takes some
// seconds of sleeping commands.
//
// What it cannot check through the interface is left to each runtime's
// own tests: that NetworkNone really has no network, that resource limits
// hold, and that a runtime whose files are a host folder follows no
// symlink out of it.
package sandboxtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnhq/kiln/sandbox"
)

// NewRuntime returns a Runtime over the backend under test. The suite
// calls it at least once per subtest, with that subtest's t, and again
// to play a server that restarted: every value it returns during one Run
// must reach the sandboxes the others started, as a restarted server's
// runtime reaches the containers of the Docker daemon.
type NewRuntime func(t *testing.T) sandbox.Runtime

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, newRuntime NewRuntime) {
	t.Helper()
	s := &suite{newRuntime: newRuntime, prefix: "kit-" + randomHex(4)}
	for _, c := range []struct {
		name string
		f    func(*testing.T, sandbox.Runtime)
	}{
		{"Capabilities", s.testCapabilities},
		{"Start", s.testStart},
		{"StartIdempotent", s.testStartIdempotent},
		{"Isolation", s.testIsolation},
		{"SpecRefused", s.testSpecRefused},
		{"SpecUnsupported", s.testSpecUnsupported},
		{"ExitCodes", s.testExitCodes},
		{"Output", s.testOutput},
		{"Stdin", s.testStdin},
		{"Cancel", s.testCancel},
		{"Deadline", s.testDeadline},
		{"EnvAndDir", s.testEnvAndDir},
		{"ConcurrentExec", s.testConcurrentExec},
		{"Files", s.testFiles},
		{"Paths", s.testPaths},
		{"Tmp", s.testTmp},
		{"TestBuiltin", s.testTestBuiltin},
		{"DirModes", s.testDirModes},
		{"Destroy", s.testDestroy},
		{"Restart", s.testRestart},
		{"HandleVersion", s.testHandleVersion},
		{"Pause", s.testPause},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRuntime(t)
			if r == nil {
				t.Fatal("newRuntime returned nil")
			}
			c.f(t, r)
		})
	}
}

// patience is how long the suite waits for what should happen at once
// (output of a command that runs, a cancelled command ending): generous,
// for a loaded machine or a slow backend, and far below the 30 s the
// suite's long commands sleep.
const patience = 20 * time.Second

// kitDir is where the suite writes in a sandbox.
const kitDir = "/tmp/kiln-kit"

type suite struct {
	newRuntime NewRuntime
	prefix     string // of the IDs of this run's sandboxes
	n          atomic.Int64
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// id returns a new sandbox ID.
func (s *suite) id() string { return fmt.Sprintf("%s-%d", s.prefix, s.n.Add(1)) }

// start starts a sandbox (with a new ID when spec has none), prepares
// kitDir in it, and destroys it when t ends.
func (s *suite) start(t *testing.T, r sandbox.Runtime, spec sandbox.Spec) sandbox.Handle {
	t.Helper()
	if spec.ID == "" {
		spec.ID = s.id()
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	h, err := r.Start(ctx, spec)
	if err != nil {
		t.Fatalf("Start %s: %v", spec.ID, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := r.Destroy(ctx, h); err != nil && !errors.Is(err, sandbox.ErrBadHandle) {
			t.Errorf("Destroy %s at cleanup: %v", spec.ID, err)
		}
	})
	if h.Version < 1 {
		t.Fatalf("Start returned a handle of version %d; versions start at 1", h.Version)
	}
	writeFile(t, r, h, kitDir+"/.keep", "", 0)
	return h
}

// sh is a request to run script with sh -c.
func sh(script string) sandbox.ExecRequest {
	return sandbox.ExecRequest{Command: []string{"sh", "-c", script}}
}

// output collects a command's events.
type output struct {
	mu       sync.Mutex
	events   []sandbox.ExecEvent
	times    []time.Time
	returned atomic.Bool
	late     atomic.Int32 // events after Exec returned
	inside   atomic.Int32 // calls in progress
	overlap  atomic.Bool  // two calls at once
	notify   chan struct{}
}

func newOutput() *output { return &output{notify: make(chan struct{}, 1)} }

func (o *output) event(e sandbox.ExecEvent) {
	if o.inside.Add(1) > 1 {
		o.overlap.Store(true)
	}
	defer o.inside.Add(-1)
	if o.returned.Load() {
		o.late.Add(1)
	}
	o.mu.Lock()
	o.events = append(o.events, sandbox.ExecEvent{Stream: e.Stream, Data: bytes.Clone(e.Data)})
	o.times = append(o.times, time.Now())
	o.mu.Unlock()
	select {
	case o.notify <- struct{}{}:
	default:
	}
}

// text returns what stream s carried.
func (o *output) text(s sandbox.Stream) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var b strings.Builder
	for _, e := range o.events {
		if e.Stream == s {
			b.Write(e.Data)
		}
	}
	return b.String()
}

// run is a stretch of output on one stream.
type run struct {
	stream sandbox.Stream
	text   string
}

// runs returns the output as stretches of one stream, in order.
func (o *output) runs() []run {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []run
	for _, e := range o.events {
		if n := len(out); n > 0 && out[n-1].stream == e.Stream {
			out[n-1].text += string(e.Data)
		} else {
			out = append(out, run{e.Stream, string(e.Data)})
		}
	}
	return out
}

// waitFor waits until stream s has carried want, for at most patience.
func (o *output) waitFor(s sandbox.Stream, want string) bool {
	deadline := time.After(patience)
	for !strings.Contains(o.text(s), want) {
		select {
		case <-o.notify:
		case <-deadline:
			return false
		}
	}
	return true
}

// exec runs req under ctx, collecting its output.
func exec(ctx context.Context, r sandbox.Runtime, h sandbox.Handle, req sandbox.ExecRequest) (*output, sandbox.ExitStatus, error) {
	o := newOutput()
	st, err := r.Exec(ctx, h, req, o.event)
	o.returned.Store(true)
	return o, st, err
}

// mustExec runs req, which must run to its end within patience, and
// checks the events came one at a time.
func mustExec(t *testing.T, r sandbox.Runtime, h sandbox.Handle, req sandbox.ExecRequest) (*output, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	o, st, err := exec(ctx, r, h, req)
	if err != nil {
		t.Fatalf("exec %q: %v", req.Command, err)
	}
	if o.overlap.Load() {
		t.Errorf("exec %q called events from two goroutines at once", req.Command)
	}
	return o, st.Code
}

// expect runs req and checks its exit code and output.
func expect(t *testing.T, r sandbox.Runtime, h sandbox.Handle, req sandbox.ExecRequest, code int, stdout, stderr string) {
	t.Helper()
	o, got := mustExec(t, r, h, req)
	if got != code || o.text(sandbox.Stdout) != stdout || o.text(sandbox.Stderr) != stderr {
		t.Errorf("exec %q = %d, stdout %q, stderr %q; want %d, %q, %q",
			req.Command, got, short(o.text(sandbox.Stdout)), short(o.text(sandbox.Stderr)), code, short(stdout), short(stderr))
	}
}

// short abbreviates long output for a message.
func short(s string) string {
	if len(s) > 200 {
		return s[:200] + fmt.Sprintf("…(%d bytes)", len(s))
	}
	return s
}

func writeFile(t *testing.T, r sandbox.Runtime, h sandbox.Handle, p, data string, perm fs.FileMode) {
	t.Helper()
	if err := r.WriteFile(context.Background(), h, p, strings.NewReader(data), perm); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
}

// readFile reads p whole.
func readFile(r sandbox.Runtime, h sandbox.Handle, p string) (string, error) {
	rc, err := r.ReadFile(context.Background(), h, p)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	return string(data), err
}

func mustRead(t *testing.T, r sandbox.Runtime, h sandbox.Handle, p string) string {
	t.Helper()
	s, err := readFile(r, h, p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return s
}

// notExist checks that p is not in the sandbox.
func notExist(t *testing.T, r sandbox.Runtime, h sandbox.Handle, p, why string) {
	t.Helper()
	if fi, err := r.Stat(context.Background(), h, p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat %s = %+v, %v; want fs.ErrNotExist (%s)", p, fi, err, why)
	}
}

// binary is every byte value, over and over: 256 KiB.
var binary = func() string {
	b := make([]byte, 256<<10)
	for i := range b {
		b[i] = byte(i ^ i>>8)
	}
	return string(b)
}()

var reName = regexp.MustCompile(`^[a-z][a-z0-9.-]{0,63}$`)

func (s *suite) testCapabilities(t *testing.T, r sandbox.Runtime) {
	c := r.Capabilities()
	if !reName.MatchString(c.Name) {
		t.Errorf("Capabilities.Name %q: want the runtime's plugin ID (lowercase letters, digits, '.' and '-')", c.Name)
	}
	if !reflect.DeepEqual(c, r.Capabilities()) {
		t.Error("Capabilities changed between two calls")
	}
	if _, ok := r.(sandbox.Pauser); c.Pause && !ok {
		t.Errorf("Capabilities.Pause is set but %T is not a sandbox.Pauser", r)
	}
	for i, m := range c.Network {
		if m != sandbox.NetworkNone && m != sandbox.NetworkEgress && m != sandbox.NetworkOpen {
			t.Errorf("Capabilities.Network lists %q, not a network mode", m)
		}
		if slices.Contains(c.Network[:i], m) {
			t.Errorf("Capabilities.Network lists %q twice", m)
		}
	}
	if c.Max.CPUMillis < 0 || c.Max.MemoryMiB < 0 || c.Max.DiskMiB < 0 {
		t.Errorf("Capabilities.Max %+v has a negative limit", c.Max)
	}
}

func (s *suite) testStart(t *testing.T, r sandbox.Runtime) {
	h := s.start(t, r, sandbox.Spec{})
	st, err := r.Recover(context.Background(), h)
	if err != nil || st.Status != sandbox.StatusRunning || st.Handle.Version < 1 {
		t.Errorf("Recover of a started sandbox = %+v, %v; want it running, with a handle", st, err)
	}
	expect(t, r, h, sh("true"), 0, "", "")
	expect(t, r, st.Handle, sh("echo recovered"), 0, "recovered\n", "")
}

func (s *suite) testStartIdempotent(t *testing.T, r sandbox.Runtime) {
	id := s.id()
	h1 := s.start(t, r, sandbox.Spec{ID: id})
	writeFile(t, r, h1, kitDir+"/mark", "first start", 0)
	// Kiln lost the answer to a Start and asks again, with the same ID.
	h2, err := r.Start(context.Background(), sandbox.Spec{ID: id, Env: map[string]string{"KIT_OTHER": "1"}})
	if err != nil {
		t.Fatalf("Start of a live sandbox's ID again: %v; want a handle to it", err)
	}
	if got, err := readFile(r, h2, kitDir+"/mark"); err != nil || got != "first start" {
		t.Errorf("the second Start of %s made another sandbox: its %s/mark is %q, %v", id, kitDir, got, err)
	}
}

func (s *suite) testIsolation(t *testing.T, r sandbox.Runtime) {
	a := s.start(t, r, sandbox.Spec{})
	b := s.start(t, r, sandbox.Spec{})
	writeFile(t, r, a, kitDir+"/only-in-a", "a", 0)
	notExist(t, r, b, kitDir+"/only-in-a", "a file of one sandbox is in another")
	o, code := mustExec(t, r, b, sh("cat "+kitDir+"/only-in-a"))
	if code == 0 || o.text(sandbox.Stdout) != "" {
		t.Errorf("cat of another sandbox's file = %d, %q; want it missing", code, o.text(sandbox.Stdout))
	}
}

func (s *suite) testSpecRefused(t *testing.T, r sandbox.Runtime) {
	c := r.Capabilities()
	specs := []sandbox.Spec{
		{ID: ""},
		{ID: "bad/id"},
		{ID: "-bad"},
		{ID: s.id(), Resources: sandbox.Resources{MemoryMiB: -1}},
		{ID: s.id(), Env: map[string]string{"A=B": "x"}},
		{ID: s.id(), Network: sandbox.Network{Mode: sandbox.NetworkNone, Allow: []string{"api.example.com"}}},
		{ID: s.id(), Network: sandbox.Network{Mode: "bridge"}},
	}
	if c.Max.MemoryMiB > 0 {
		specs = append(specs, sandbox.Spec{ID: s.id(), Resources: sandbox.Resources{MemoryMiB: c.Max.MemoryMiB + 1}})
	}
	if c.Max.CPUMillis > 0 {
		specs = append(specs, sandbox.Spec{ID: s.id(), Resources: sandbox.Resources{CPUMillis: c.Max.CPUMillis + 1}})
	}
	for _, spec := range specs {
		h, err := r.Start(context.Background(), spec)
		if !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("Start(%+v) = %+v, %v; want an error wrapping ErrInvalid", spec, h, err)
		}
		if err == nil {
			r.Destroy(context.Background(), h)
		}
	}
}

// unsupported checks that err is r's *UnsupportedError for an operation
// whose name holds op.
func unsupported(t *testing.T, r sandbox.Runtime, what string, err error, op string) {
	t.Helper()
	name := r.Capabilities().Name
	var ue *sandbox.UnsupportedError
	switch {
	case !errors.Is(err, sandbox.ErrUnsupported) || !errors.As(err, &ue):
		t.Errorf("%s: %v; want an *UnsupportedError", what, err)
	case ue.Runtime != name || !strings.Contains(ue.Op, op):
		t.Errorf("%s: %v names runtime %q and operation %q; want %q and %q", what, err, ue.Runtime, ue.Op, name, op)
	case !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), op):
		t.Errorf("%s: the message %q does not name the runtime and the operation", what, err)
	}
}

func (s *suite) testSpecUnsupported(t *testing.T, r sandbox.Runtime) {
	c := r.Capabilities()
	for _, n := range []sandbox.Network{
		{Mode: sandbox.NetworkEgress, Allow: []string{"api.example.com"}},
		{Mode: sandbox.NetworkOpen},
	} {
		if slices.Contains(c.Network, n.Mode) {
			continue
		}
		h, err := r.Start(context.Background(), sandbox.Spec{ID: s.id(), Network: n})
		unsupported(t, r, fmt.Sprintf("Start with network mode %q, which the runtime does not list", n.Mode), err, string(n.Mode))
		if err == nil {
			r.Destroy(context.Background(), h)
		}
	}
	if !c.Images {
		h, err := r.Start(context.Background(), sandbox.Spec{ID: s.id(), Image: "alpine:3.20"})
		unsupported(t, r, "Start with an image, from a runtime without images", err, "image")
		if err == nil {
			r.Destroy(context.Background(), h)
		}
	}
}

func (s *suite) testExitCodes(t *testing.T, r sandbox.Runtime) {
	h := s.start(t, r, sandbox.Spec{})
	for _, c := range []struct {
		req  sandbox.ExecRequest
		code int
	}{
		{sh("exit 0"), 0},
		{sh("exit 3"), 3},
		{sh("exit 255"), 255},
		{sh("true"), 0},
		{sh("false"), 1},
		{sh("false; true"), 0},
		{sh("true && exit 7"), 7},
		{sh("false && exit 7"), 1},
		{sh("false || exit 9"), 9},
		{sh("exit 4; exit 5"), 4},
		{sandbox.ExecRequest{Command: []string{"true"}}, 0},
		{sandbox.ExecRequest{Command: []string{"false"}}, 1},
		// A program that is not there is an exit code, not an error.
		{sandbox.ExecRequest{Command: []string{"kiln-kit-no-such-program"}}, 127},
		{sh("kiln-kit-no-such-program"), 127},
	} {
		if _, code := mustExec(t, r, h, c.req); code != c.code {
			t.Errorf("exec %q exited %d; want %d", c.req.Command, code, c.code)
		}
	}
	for _, req := range []sandbox.ExecRequest{{}, {Command: []string{}}, {Command: []string{""}}} {
		if _, st, err := exec(context.Background(), r, h, req); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("exec of %q = %+v, %v; want ErrInvalid", req.Command, st, err)
		}
	}
}

func (s *suite) testOutput(t *testing.T, r sandbox.Runtime) {
	h := s.start(t, r, sandbox.Spec{})
	expect(t, r, h, sh("echo hello"), 0, "hello\n", "")
	expect(t, r, h, sh("echo oops >&2; exit 2"), 2, "", "oops\n")
	expect(t, r, h, sandbox.ExecRequest{Command: []string{"echo", "a  b", "c"}}, 0, "a  b c\n", "")

	// The streams in the order written, each write as it happens.
	start := time.Now()
	o, _ := mustExec(t, r, h, sh("echo one; sleep 0.3; echo two >&2; sleep 0.3; echo three; sleep 0.3; echo four >&2"))
	end := time.Now()
	want := []run{{sandbox.Stdout, "one\n"}, {sandbox.Stderr, "two\n"}, {sandbox.Stdout, "three\n"}, {sandbox.Stderr, "four\n"}}
	if got := o.runs(); !reflect.DeepEqual(got, want) {
		t.Errorf("output in the order %+v; want %+v", got, want)
	}
	if len(o.times) > 0 && end.Sub(o.times[0]) < 600*time.Millisecond {
		t.Errorf("the first output arrived %v after the command started and %v before it ended: it was held back, not streamed",
			o.times[0].Sub(start), end.Sub(o.times[0]))
	}

	// Bytes as they are, every value, more than one event's worth.
	writeFile(t, r, h, kitDir+"/bin", binary, 0)
	o, code := mustExec(t, r, h, sh("cat "+kitDir+"/bin"))
	if got := o.text(sandbox.Stdout); code != 0 || got != binary {
		t.Errorf("cat of %d binary bytes = %d, %d bytes (equal: %v)", len(binary), code, len(got), got == binary)
	}
}

func (s *suite) testStdin(t *testing.T, r sandbox.Runtime) {
	h := s.start(t, r, sandbox.Spec{})
	in := "line one\nline two\n" + binary
	for _, cmd := range [][]string{{"cat"}, {"sh", "-c", "cat"}} {
		expect(t, r, h, sandbox.ExecRequest{Command: cmd, Stdin: strings.NewReader(in)}, 0, in, "")
		// No stdin is an empty one: cat ends at once.
		expect(t, r, h, sandbox.ExecRequest{Command: cmd}, 0, "", "")
	}
	// Input reaches the command as it comes, not once it ends.
	pr, pw := io.Pipe()
	defer pw.Close()
	o := newOutput()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		st, err := r.Exec(ctx, h, sandbox.ExecRequest{Command: []string{"cat"}, Stdin: pr}, o.event)
		if err == nil && st.Code != 0 {
			err = fmt.Errorf("exit code %d", st.Code)
		}
		done <- err
	}()
	go pw.Write([]byte("first\n"))
	if !o.waitFor(sandbox.Stdout, "first\n") {
		t.Fatalf("cat did not echo its first line of input within %v while the input stayed open", patience)
	}
	go func() { pw.Write([]byte("second\n")); pw.Close() }()
	if err := <-done; err != nil || o.text(sandbox.Stdout) != "first\nsecond\n" {
		t.Errorf("cat of a piped input = %q, %v", o.text(sandbox.Stdout), err)
	}
}

func (s *suite) testCancel(t *testing.T, r sandbox.Runtime) {
	h := s.start(t, r, sandbox.Spec{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := newOutput()
	type result struct {
		st  sandbox.ExitStatus
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The write comes 3 s after the start: a loaded machine may take a
		// second to bring "started" back, and the cancel must come first.
		st, err := r.Exec(ctx, h, sh("echo started; sleep 3; echo late > "+kitDir+"/late; sleep 30; echo never"), o.event)
		o.returned.Store(true)
		done <- result{st, err}
	}()
	if !o.waitFor(sandbox.Stdout, "started") {
		cancel()
		t.Fatalf("no output within %v from a command that echoes before it sleeps: output is not streamed", patience)
	}
	cancel()
	select {
	case res := <-done:
		if !errors.Is(res.err, context.Canceled) {
			t.Errorf("a cancelled exec returned %+v, %v; want an error wrapping context.Canceled", res.st, res.err)
		}
	case <-time.After(patience):
		t.Fatalf("a cancelled exec did not return within %v", patience)
	}
	if strings.Contains(o.text(sandbox.Stdout), "never") {
		t.Error("a cancelled command ran to its end")
	}
	// It was killed, not left to run on: past the 3 s its write waits.
	time.Sleep(3500 * time.Millisecond)
	notExist(t, r, h, kitDir+"/late", "a cancelled command ran on after Exec returned")
	if n := o.late.Load(); n > 0 {
		t.Errorf("events was called %d times after Exec returned", n)
	}
	expect(t, r, h, sh("echo still here"), 0, "still here\n", "")
}

func (s *suite) testDeadline(t *testing.T, r sandbox.Runtime) {
	h := s.start(t, r, sandbox.Spec{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, st, err := exec(ctx, r, h, sh("sleep 30"))
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > patience {
		t.Errorf("exec past its deadline = %+v, %v after %v; want an error wrapping context.DeadlineExceeded at once", st, err, took)
	}
	// A context that has ended runs nothing.
	_, st, err = exec(ctx, r, h, sh("echo never > "+kitDir+"/never"))
	if err == nil {
		t.Errorf("exec with an ended context = %+v; want an error", st)
	}
	notExist(t, r, h, kitDir+"/never", "a command ran under a context that had ended")
}

func (s *suite) testEnvAndDir(t *testing.T, r sandbox.Runtime) {
	h := s.start(t, r, sandbox.Spec{Env: map[string]string{"KIT_A": "from spec", "KIT_B": "spec"}})
	req := sh(`echo "$KIT_A|$KIT_B"`)
	req.Env = map[string]string{"KIT_B": "from exec"}
	expect(t, r, h, req, 0, "from spec|from exec\n", "")
	expect(t, r, h, sh(`echo "$KIT_A|$KIT_B"`), 0, "from spec|spec\n", "")

	writeFile(t, r, h, kitDir+"/d/x.txt", "in d\n", 0)
	req = sh("pwd; cat x.txt")
	req.Dir = kitDir + "/d"
	expect(t, r, h, req, 0, kitDir+"/d\nin d\n", "")
	o, code := mustExec(t, r, h, sandbox.ExecRequest{Command: []string{"pwd"}})
	if out := o.text(sandbox.Stdout); code != 0 || !strings.HasPrefix(out, "/") {
		t.Errorf("pwd in the default folder = %d, %q; want an absolute path", code, out)
	}
	req.Dir = kitDir + "/no-such-folder"
	if _, st, err := exec(context.Background(), r, h, req); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("exec in a missing folder = %+v, %v; want an error wrapping fs.ErrNotExist", st, err)
	}
	for _, bad := range []sandbox.ExecRequest{
		{Command: []string{"pwd"}, Dir: "tmp"},
		{Command: []string{"pwd"}, Dir: kitDir + "/d/"},
		{Command: []string{"true"}, Env: map[string]string{"A=B": "x"}},
	} {
		if _, st, err := exec(context.Background(), r, h, bad); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("exec %+v = %+v, %v; want ErrInvalid", bad, st, err)
		}
	}
}

func (s *suite) testConcurrentExec(t *testing.T, r sandbox.Runtime) {
	h := s.start(t, r, sandbox.Spec{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	long := newOutput()
	done := make(chan error, 1)
	go func() {
		_, err := r.Exec(ctx, h, sh("echo started; sleep 30"), long.event)
		done <- err
	}()
	if !long.waitFor(sandbox.Stdout, "started") {
		t.Fatalf("the long command gave no output within %v", patience)
	}
	// A second command runs while the first does.
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			want := fmt.Sprintf("quick %d\n", i)
			o, st, err := exec(ctx, r, h, sh(fmt.Sprintf("echo quick %d", i)))
			if err != nil || st.Code != 0 || o.text(sandbox.Stdout) != want {
				t.Errorf("a command beside a running one = %d, %q, %v; want it to run at once", st.Code, o.text(sandbox.Stdout), err)
			}
		})
	}
	wg.Wait()
	select {
	case err := <-done:
		t.Errorf("the long command ended (%v) before it was cancelled", err)
	default:
	}
	cancel()
	select {
	case <-done:
	case <-time.After(patience):
		t.Fatalf("the long command did not end within %v of its cancellation", patience)
	}
}

func (s *suite) testFiles(t *testing.T, r sandbox.Runtime) {
	ctx := context.Background()
	h := s.start(t, r, sandbox.Spec{})
	files := map[string]string{
		kitDir + "/a.txt":             "hello\n",
		kitDir + "/bin":               binary,
		kitDir + "/empty":             "",
		kitDir + "/sub/deeper/c.md":   "made with its folders\n",
		kitDir + "/with space é.txt":  "named oddly\n",
		kitDir + "/sub/deeper/.dot":   "hidden\n",
		kitDir + "/sub/deeper/crlf\r": "a name with a carriage return\n",
	}
	for p, body := range files {
		writeFile(t, r, h, p, body, 0)
	}
	for p, body := range files {
		if got, err := readFile(r, h, p); err != nil || got != body {
			t.Errorf("read %s = %d bytes, %v; want the %d written", p, len(got), err, len(body))
		}
		fi, err := r.Stat(ctx, h, p)
		if err != nil || fi.Size != int64(len(body)) || !fi.Mode.IsRegular() || fi.IsDir() || fi.Name != p[strings.LastIndexByte(p, '/')+1:] {
			t.Errorf("stat %s = %+v, %v; want a regular file of %d bytes", p, fi, err, len(body))
		}
	}
	for p, perm := range map[string]fs.FileMode{kitDir + "/private": 0o600, kitDir + "/script.sh": 0o755, kitDir + "/default": 0} {
		writeFile(t, r, h, p, "x", perm)
		want := perm
		if want == 0 {
			want = 0o644
		}
		if fi, err := r.Stat(ctx, h, p); err != nil || fi.Mode.Perm() != want {
			t.Errorf("stat %s written with mode %o = %+v, %v; want mode %o", p, perm, fi, err, want)
		}
	}
	if fi, err := r.Stat(ctx, h, kitDir+"/sub"); err != nil || !fi.IsDir() || fi.Name != "sub" {
		t.Errorf("stat of a folder = %+v, %v", fi, err)
	}
	ents, err := r.ReadDir(ctx, h, kitDir+"/sub/deeper")
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	if want := []string{".dot", "c.md", "crlf\r"}; err != nil || !slices.Equal(names, want) {
		t.Errorf("read dir = %q, %v; want %q, sorted", names, err, want)
	}
	ents, err = r.ReadDir(ctx, h, kitDir)
	var dirs []string
	names = nil
	for _, e := range ents {
		names = append(names, e.Name)
		if e.IsDir() {
			dirs = append(dirs, e.Name)
		}
	}
	want := []string{".keep", "a.txt", "bin", "default", "empty", "private", "script.sh", "sub", "with space é.txt"}
	if err != nil || !slices.Equal(names, want) || !slices.Equal(dirs, []string{"sub"}) {
		t.Errorf("read dir %s = %q (folders %q), %v; want %q, sorted, with the folder sub", kitDir, names, dirs, err, want)
	}

	// Overwriting truncates.
	writeFile(t, r, h, kitDir+"/a.txt", "short", 0)
	if got := mustRead(t, r, h, kitDir+"/a.txt"); got != "short" {
		t.Errorf("read after a shorter write = %q; want %q", got, "short")
	}
	// Commands and file operations see the same files.
	expect(t, r, h, sh("cat "+kitDir+"/a.txt"), 0, "short", "")
	expect(t, r, h, sh("echo made by a command > "+kitDir+"/by-exec.txt"), 0, "", "")
	if got := mustRead(t, r, h, kitDir+"/by-exec.txt"); got != "made by a command\n" {
		t.Errorf("read of a file a command wrote = %q", got)
	}

	// Removing a file, and a folder with all it holds.
	if err := r.Remove(ctx, h, kitDir+"/a.txt"); err != nil {
		t.Errorf("remove a file: %v", err)
	}
	notExist(t, r, h, kitDir+"/a.txt", "removed")
	if err := r.Remove(ctx, h, kitDir+"/sub"); err != nil {
		t.Errorf("remove a folder: %v", err)
	}
	notExist(t, r, h, kitDir+"/sub/deeper/c.md", "its folder was removed")
	notExist(t, r, h, kitDir+"/sub", "removed")
	expect(t, r, h, sh("cat "+kitDir+"/sub/deeper/c.md 2>"+kitDir+"/err || echo gone"), 0, "gone\n", "")

	// What is missing, and what is not a file or not a folder.
	missing := kitDir + "/no-such-file"
	for op, err := range map[string]error{
		"remove": r.Remove(ctx, h, missing),
		"read":   func() error { _, err := readFile(r, h, missing); return err }(),
		"stat":   func() error { _, err := r.Stat(ctx, h, missing); return err }(),
		"readdir": func() error {
			_, err := r.ReadDir(ctx, h, missing)
			return err
		}(),
	} {
		var pe *fs.PathError
		if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Path != missing {
			t.Errorf("%s of a missing file: %v; want an *fs.PathError for %s wrapping fs.ErrNotExist", op, err, missing)
		}
	}
	if got, err := readFile(r, h, kitDir); err == nil {
		t.Errorf("read of a folder = %q; want an error", got)
	}
	if err := r.WriteFile(ctx, h, kitDir, strings.NewReader("x"), 0); err == nil {
		t.Error("write over a folder succeeded")
	}
	if err := r.WriteFile(ctx, h, kitDir+"/bin/under-a-file", strings.NewReader("x"), 0); err == nil {
		t.Error("write below a file succeeded")
	}
	if ents, err := r.ReadDir(ctx, h, kitDir+"/bin"); err == nil {
		t.Errorf("read dir of a file = %+v; want an error", ents)
	}
	if err := r.Remove(ctx, h, "/"); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("remove / = %v; want ErrInvalid", err)
	}
	if got := mustRead(t, r, h, kitDir+"/bin"); got != binary {
		t.Error("the refused writes changed a file")
	}
}

func (s *suite) testPaths(t *testing.T, r sandbox.Runtime) {
	ctx := context.Background()
	h := s.start(t, r, sandbox.Spec{})
	for _, p := range []string{
		"", "kiln-kit", "tmp/kiln-kit/a", "./a", kitDir + "/", kitDir + "//a", kitDir + "/./a",
		kitDir + "/../../kit-escape", "/..", "/../kit-escape", kitDir + "/a\x00b",
	} {
		for op, err := range map[string]error{
			"read":    func() error { _, err := readFile(r, h, p); return err }(),
			"write":   r.WriteFile(ctx, h, p, strings.NewReader("x"), 0),
			"stat":    func() error { _, err := r.Stat(ctx, h, p); return err }(),
			"readdir": func() error { _, err := r.ReadDir(ctx, h, p); return err }(),
			"remove":  r.Remove(ctx, h, p),
		} {
			if !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), p) {
				t.Errorf("%s %q: %v; want ErrInvalid, naming the path", op, p, err)
			}
		}
	}
	notExist(t, r, h, "/kit-escape", "a refused path was written after all, cleaned")
	if _, err := r.Stat(ctx, h, "/"); err != nil {
		t.Errorf("stat /: %v", err)
	}
}

func (s *suite) testDestroy(t *testing.T, r sandbox.Runtime) {
	ctx := context.Background()
	id := s.id()
	h := s.start(t, r, sandbox.Spec{ID: id})
	writeFile(t, r, h, kitDir+"/mark", "old", 0)
	// A command running in it ends with it.
	running := newOutput()
	done := make(chan error, 1)
	go func() {
		_, err := r.Exec(ctx, h, sh("echo started; sleep 30"), running.event)
		done <- err
	}()
	if !running.waitFor(sandbox.Stdout, "started") {
		t.Fatalf("no output within %v", patience)
	}
	if err := r.Destroy(ctx, h); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("a command running in a destroyed sandbox ended without an error")
		}
	case <-time.After(patience):
		t.Fatalf("a command running in a destroyed sandbox did not end within %v", patience)
	}
	gone := func(what string) {
		t.Helper()
		for op, err := range map[string]error{
			"exec":    func() error { _, _, err := exec(ctx, r, h, sh("true")); return err }(),
			"read":    func() error { _, err := readFile(r, h, kitDir+"/mark"); return err }(),
			"write":   r.WriteFile(ctx, h, kitDir+"/mark", strings.NewReader("x"), 0),
			"stat":    func() error { _, err := r.Stat(ctx, h, kitDir); return err }(),
			"readdir": func() error { _, err := r.ReadDir(ctx, h, kitDir); return err }(),
			"remove":  r.Remove(ctx, h, kitDir+"/mark"),
			"recover": func() error { _, err := r.Recover(ctx, h); return err }(),
		} {
			if !errors.Is(err, sandbox.ErrNotFound) {
				t.Errorf("%s in a sandbox %s: %v; want ErrNotFound", op, what, err)
			}
		}
		if r.Capabilities().Pause {
			if err := sandbox.Pause(ctx, r, h); !errors.Is(err, sandbox.ErrNotFound) {
				t.Errorf("pause of a sandbox %s: %v; want ErrNotFound", what, err)
			}
		}
	}
	gone("destroyed")
	if err := r.Destroy(ctx, h); err != nil {
		t.Errorf("a second Destroy: %v; want nil (Destroy is idempotent)", err)
	}
	// The ID may be used again, for a new sandbox; the old handle does
	// not reach it.
	h2 := s.start(t, r, sandbox.Spec{ID: id})
	notExist(t, r, h2, kitDir+"/mark", "a new sandbox of a destroyed one's ID has its files")
	gone("destroyed, whose ID names a new sandbox")
	expect(t, r, h2, sh("echo new"), 0, "new\n", "")
}

func (s *suite) testRestart(t *testing.T, r sandbox.Runtime) {
	ctx := context.Background()
	h := s.start(t, r, sandbox.Spec{Env: map[string]string{"KIT_A": "kept"}})
	writeFile(t, r, h, kitDir+"/before", "written before the restart\n", 0)

	// Kiln stores the handle and restarts: a new Runtime value gets it
	// back from the store.
	stored, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var back sandbox.Handle
	if err := json.Unmarshal(stored, &back); err != nil || !reflect.DeepEqual(back, h) {
		t.Fatalf("the handle does not survive JSON: %+v, %v", back, err)
	}
	r2 := s.newRuntime(t)
	st, err := r2.Recover(ctx, back)
	if err != nil || st.Status != sandbox.StatusRunning || st.Handle.Version < 1 {
		t.Fatalf("Recover after a restart = %+v, %v; want the sandbox running", st, err)
	}
	h2 := st.Handle
	expect(t, r2, h2, sh(`cat `+kitDir+`/before; echo "$KIT_A"`), 0, "written before the restart\nkept\n", "")
	writeFile(t, r2, h2, kitDir+"/after", "after", 0)
	if got := mustRead(t, r2, h2, kitDir+"/after"); got != "after" {
		t.Errorf("read after the restart = %q", got)
	}
	if err := r2.Destroy(ctx, h2); err != nil {
		t.Fatalf("Destroy after the restart: %v", err)
	}
	r3 := s.newRuntime(t)
	if st, err := r3.Recover(ctx, back); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Recover of a sandbox destroyed before another restart = %+v, %v; want ErrNotFound", st, err)
	}
}

func (s *suite) testHandleVersion(t *testing.T, r sandbox.Runtime) {
	ctx := context.Background()
	h := s.start(t, r, sandbox.Spec{})
	newer := sandbox.Handle{Version: h.Version + 1000, Data: h.Data}
	v := strconv.Itoa(newer.Version)
	for op, err := range map[string]error{
		"recover": func() error { _, err := r.Recover(ctx, newer); return err }(),
		"exec":    func() error { _, _, err := exec(ctx, r, newer, sh("true")); return err }(),
		"read":    func() error { _, err := readFile(r, newer, kitDir+"/.keep"); return err }(),
		"write":   r.WriteFile(ctx, newer, kitDir+"/x", strings.NewReader("x"), 0),
		"stat":    func() error { _, err := r.Stat(ctx, newer, kitDir); return err }(),
		"destroy": r.Destroy(ctx, newer),
	} {
		if !errors.Is(err, sandbox.ErrBadHandle) || !strings.Contains(err.Error(), v) {
			t.Errorf("%s with a handle of version %s: %v; want ErrBadHandle naming the version", op, v, err)
		}
	}
	if _, err := r.Recover(ctx, sandbox.Handle{}); !errors.Is(err, sandbox.ErrBadHandle) {
		t.Errorf("Recover of the zero handle: %v; want ErrBadHandle", err)
	}
	garbled := sandbox.Handle{Version: h.Version, Data: []byte("\x00not a handle\xff")}
	if _, err := r.Recover(ctx, garbled); !errors.Is(err, sandbox.ErrBadHandle) && !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Recover of a handle with garbled data: %v; want ErrBadHandle or ErrNotFound", err)
	}
	if err := r.Destroy(ctx, garbled); !errors.Is(err, sandbox.ErrBadHandle) && err != nil {
		t.Errorf("Destroy of a handle with garbled data: %v; want ErrBadHandle (or nil: nothing to destroy)", err)
	}
	// None of it touched the sandbox.
	expect(t, r, h, sh("echo fine"), 0, "fine\n", "")
}

func (s *suite) testPause(t *testing.T, r sandbox.Runtime) {
	ctx := context.Background()
	h := s.start(t, r, sandbox.Spec{})
	if !r.Capabilities().Pause {
		unsupported(t, r, "Pause from a runtime without Pause", sandbox.Pause(ctx, r, h), "pause")
		unsupported(t, r, "Resume from a runtime without Pause", sandbox.Resume(ctx, r, h), "resume")
		if p, ok := r.(sandbox.Pauser); ok {
			unsupported(t, r, "Pauser.Pause of a runtime without Pause", p.Pause(ctx, h), "pause")
			unsupported(t, r, "Pauser.Resume of a runtime without Pause", p.Resume(ctx, h), "resume")
		}
		expect(t, r, h, sh("echo running"), 0, "running\n", "")
		return
	}
	writeFile(t, r, h, kitDir+"/kept", "kept", 0)
	for range 2 { // pausing a paused sandbox changes nothing
		if err := sandbox.Pause(ctx, r, h); err != nil {
			t.Fatalf("Pause: %v", err)
		}
	}
	if st, err := r.Recover(ctx, h); err != nil || st.Status != sandbox.StatusPaused {
		t.Errorf("Recover of a paused sandbox = %+v, %v; want it paused", st, err)
	}
	if _, st, err := exec(ctx, r, h, sh("echo no")); !errors.Is(err, sandbox.ErrPaused) {
		t.Errorf("exec in a paused sandbox = %+v, %v; want ErrPaused", st, err)
	}
	for range 2 {
		if err := sandbox.Resume(ctx, r, h); err != nil {
			t.Fatalf("Resume: %v", err)
		}
	}
	if st, err := r.Recover(ctx, h); err != nil || st.Status != sandbox.StatusRunning {
		t.Errorf("Recover of a resumed sandbox = %+v, %v; want it running", st, err)
	}
	expect(t, r, h, sh("cat "+kitDir+"/kept"), 0, "kept", "")
}
