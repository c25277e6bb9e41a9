package execapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/kilnhq/kiln/sandbox"
)

// pingEvery is how often a running command's stream carries a ping.
const pingEvery = 3 * time.Second

// event is one object of an output stream.
type event struct {
	Type          string     `json:"type"`
	Text          string     `json:"text,omitempty"`
	Partial       bool       `json:"partial,omitempty"`
	ExecutionTime *int64     `json:"execution_time,omitempty"`
	Timestamp     int64      `json:"timestamp"`
	Error         *execError `json:"error,omitempty"`
}

type execError struct {
	Ename     string   `json:"ename"`
	Evalue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// eventStream writes events to a response as execd does: raw JSON
// objects each followed by "\n\n", flushed one by one. The headers go out
// with the first event, so that errors before it are plain JSON.
type eventStream struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func newEventStream(w http.ResponseWriter) *eventStream {
	return &eventStream{w: w, rc: http.NewResponseController(w)}
}

func (s *eventStream) send(e event) {
	e.Timestamp = time.Now().UnixMilli()
	data, _ := json.Marshal(e)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		s.started = true
		hd := s.w.Header()
		hd.Set("Content-Type", "text/event-stream")
		hd.Set("Cache-Control", "no-cache")
		hd.Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
	}
	s.w.Write(append(data, '\n', '\n'))
	s.rc.Flush()
}

// maxLine is the longest line one output event carries: a longer line
// goes out in pieces of at most maxLine bytes, each cut before a UTF-8
// character starts, so that what a command prints without a line ending
// is held to a bound.
const maxLine = 64 << 10

// lineFramer turns one stream of a command's output into events as
// execd frames them: one event per line, its text without the line
// ending ("\n", "\r\n" or a lone "\r"), an empty line as the text "\n",
// and a last line without an ending sent by flush when the command ends.
// A piece of a line longer than maxLine and a last line without an
// ending are marked partial (a Kiln field execd does not send): the
// client appends no line ending to them, so Kiln's clients get the
// output back byte for byte (but a "\r" ending, which comes back as
// "\n").
// Each stream has its own framer, so a line of stdout and one of stderr
// never share an event; the events of the two go out in the order their
// lines ended.
type lineFramer struct {
	typ     string
	s       *eventStream
	line    []byte // the current line's text not sent yet
	started bool   // the current line has text, sent or not
	lastCR  bool   // the last byte was a "\r" that ended a line
}

func (f *lineFramer) write(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			f.add(p)
			return
		}
		f.add(p[:i])
		switch {
		case len(f.line) > 0:
			f.emit(len(f.line), false)
		case f.started:
			// a long line whose last piece went out at maxLine
		case p[i] == '\n' && f.lastCR:
			// the "\n" of a "\r\n" whose "\r" ended the line
		default:
			f.s.send(event{Type: f.typ, Text: "\n"})
		}
		f.started, f.lastCR = false, p[i] == '\r'
		p = p[i+1:]
	}
}

// add appends text without line endings, sending maxLine pieces.
func (f *lineFramer) add(p []byte) {
	if len(p) == 0 {
		return
	}
	f.started, f.lastCR = true, false
	f.line = append(f.line, p...)
	for len(f.line) > maxLine {
		n := maxLine
		for k := 0; k < utf8.UTFMax-1 && !utf8.RuneStart(f.line[n]); k++ {
			n--
		}
		if !utf8.RuneStart(f.line[n]) {
			n = maxLine // not UTF-8 there: cut anywhere
		}
		f.emit(n, true)
	}
}

// emit sends the first n bytes of the line held and keeps the rest;
// partial says they do not end the line.
func (f *lineFramer) emit(n int, partial bool) {
	f.s.send(event{Type: f.typ, Text: string(f.line[:n]), Partial: partial})
	f.line = append(f.line[:0], f.line[n:]...)
}

// flush sends what is held of a last line without an ending.
func (f *lineFramer) flush() {
	if len(f.line) > 0 {
		f.emit(len(f.line), true)
	}
}

// outFramer frames a command's stdout and stderr as events.
type outFramer struct{ out, err lineFramer }

func newOutFramer(s *eventStream) *outFramer {
	return &outFramer{out: lineFramer{typ: "stdout", s: s}, err: lineFramer{typ: "stderr", s: s}}
}

// write is the output function of a run.
func (o *outFramer) write(st sandbox.Stream, p []byte) {
	if st == sandbox.Stderr {
		o.err.write(p)
		return
	}
	o.out.write(p)
}

// flush sends the last lines without an ending, stdout's first.
func (o *outFramer) flush() {
	o.out.flush()
	o.err.flush()
}

// finish sends the end of a run: execution_complete for exit code 0, an
// error event whose evalue is the exit code for another, and an error
// event naming why for a run that did not end by itself.
func finish(s *eventStream, start time.Time, code int, err error) {
	ms := time.Since(start).Milliseconds()
	switch {
	case err != nil:
		s.send(event{Type: "error", Error: runError(err)})
	case code != 0:
		s.send(event{Type: "error", Error: &execError{Ename: "CommandExecError", Evalue: strconv.Itoa(code), Traceback: []string{}}})
	default:
		s.send(event{Type: "execution_complete", ExecutionTime: &ms})
	}
}

// errInterrupted is the cause of a run that DELETE /command ended.
var errInterrupted = errors.New("interrupted")

func runError(err error) *execError {
	ename := "RuntimeError"
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		ename = "TimeoutError"
	case errors.Is(err, errInterrupted):
		ename = "Interrupted"
	}
	return &execError{Ename: ename, Evalue: err.Error(), Traceback: []string{}}
}

// pinger sends a ping every pingEvery until the returned function is
// called.
func pinger(s *eventStream) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(pingEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s.send(event{Type: "ping", Text: "pong"})
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}

// commandRequest is the body of POST /command.
type commandRequest struct {
	Command    string            `json:"command"`
	Cwd        string            `json:"cwd"`
	Background bool              `json:"background"`
	Timeout    int64             `json:"timeout"` // ms; 0 is none
	UID        *uint32           `json:"uid"`
	GID        *uint32           `json:"gid"`
	Envs       map[string]string `json:"envs"`
}

// check validates req as a sandbox.ExecRequest is validated.
func (req *commandRequest) check() error {
	if strings.TrimSpace(req.Command) == "" {
		return badRequest("command is empty")
	}
	if req.Timeout < 0 {
		return badRequest("timeout %d is negative", req.Timeout)
	}
	if req.GID != nil && req.UID == nil {
		return badRequest("gid needs uid")
	}
	er := sandbox.ExecRequest{Command: []string{req.Command}, Dir: req.Cwd, Env: req.Envs}
	if err := er.Check(); err != nil {
		return badRequest("%v", err)
	}
	return nil
}

// decodeCommand reads a /command body and validates it.
func decodeCommand(w http.ResponseWriter, r *http.Request) (commandRequest, error) {
	var req commandRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return req, err
	}
	return req, req.check()
}

// checkDir refuses a cwd that is not a folder.
func (h *handler) checkDir(ctx context.Context, dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := h.b.Stat(ctx, dir)
	if err == nil && !fi.Mode.IsDir() {
		return badRequest("cwd %q is not a folder", dir)
	}
	return err
}

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// maxLog is how much of a background command's output is kept; beyond
// it the oldest is dropped.
const maxLog = 16 << 20

// maxFinished is how many finished background commands are kept for
// status and logs; beyond it the oldest are forgotten.
const maxFinished = 256

// cmdState is one command, running or finished.
type cmdState struct {
	id, content string
	started     time.Time
	cancel      context.CancelCauseFunc

	mu       sync.Mutex
	running  bool
	code     int
	err      error
	finished time.Time
	log      []byte // the last maxLog bytes of the output
	logStart int64  // the offset of log[0] in the whole output
}

func (c *cmdState) write(_ sandbox.Stream, p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, p...)
	if over := len(c.log) - maxLog; over > 0 {
		// Reslicing, not copying: append moves the kept bytes to a new
		// array only when the old one is full, so dropping costs O(1)
		// per byte written.
		c.log = c.log[over:]
		c.logStart += int64(over)
	}
}

func (c *cmdState) end(code int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running, c.code, c.err, c.finished = false, code, err, time.Now()
}

// commands are the commands started, by ID.
type commands struct {
	mu       sync.Mutex
	byID     map[string]*cmdState
	finished []string // background commands that ended, oldest first
}

func newCommands() *commands { return &commands{byID: map[string]*cmdState{}} }

func (cs *commands) add(content string, cancel context.CancelCauseFunc) *cmdState {
	c := &cmdState{id: newID(), content: content, started: time.Now(), cancel: cancel, running: true}
	cs.mu.Lock()
	cs.byID[c.id] = c
	cs.mu.Unlock()
	return c
}

func (cs *commands) get(id string) (*cmdState, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.byID[id]; ok {
		return c, nil
	}
	return nil, &apiError{http.StatusNotFound, "COMMAND_NOT_FOUND", fmt.Sprintf("no command %q", id)}
}

// forget drops a foreground command once its stream has ended.
func (cs *commands) forget(id string) {
	cs.mu.Lock()
	delete(cs.byID, id)
	cs.mu.Unlock()
}

// retire records that a background command ended, and forgets the oldest
// beyond maxFinished.
func (cs *commands) retire(id string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.finished = append(cs.finished, id)
	for len(cs.finished) > maxFinished {
		delete(cs.byID, cs.finished[0])
		cs.finished = cs.finished[1:]
	}
}

func (h *handler) command(w http.ResponseWriter, r *http.Request) {
	req, err := decodeCommand(w, r)
	if err == nil {
		err = h.checkDir(r.Context(), req.Cwd)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	bc := Command{Shell: req.Command, Dir: req.Cwd, Env: req.Envs, UID: req.UID, GID: req.GID}
	parent := r.Context()
	if req.Background {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancelCause(parent)
	if req.Timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, time.Duration(req.Timeout)*time.Millisecond)
		inner := cancel
		cancel = func(err error) { inner(err); stop() }
	}
	c := h.cmds.add(req.Command, cancel)
	s := newEventStream(w)
	if req.Background {
		// The answer waits for the command to start, so that a command
		// that cannot is an error with its status.
		began := make(chan error, 1)
		go func() {
			ran := false
			code, err := h.b.Run(ctx, bc, func() { ran = true; began <- nil }, c.write)
			cancel(nil)
			if !ran {
				h.cmds.forget(c.id)
				began <- err
				return
			}
			c.end(code, err)
			h.cmds.retire(c.id)
		}()
		if err := <-began; err != nil {
			writeError(w, err)
			return
		}
		zero := int64(0)
		s.send(event{Type: "init", Text: c.id})
		s.send(event{Type: "execution_complete", ExecutionTime: &zero})
		return
	}
	defer h.cmds.forget(c.id)
	defer cancel(nil)
	stop := func() {}
	ran := false
	out := newOutFramer(s)
	code, err := h.b.Run(ctx, bc, func() {
		ran = true
		s.send(event{Type: "init", Text: c.id})
		stop = pinger(s)
	}, out.write)
	out.flush()
	stop()
	if !ran {
		writeError(w, err)
		return
	}
	c.end(code, err)
	finish(s, c.started, code, err)
}

// interrupt kills the command of ?id= with everything it started.
func (h *handler) interrupt(w http.ResponseWriter, r *http.Request) {
	c, err := h.cmds.get(r.URL.Query().Get("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	c.cancel(errInterrupted)
}

// commandInfo serves /command/status/{id} and /command/{id}/logs.
func (h *handler) commandInfo(w http.ResponseWriter, r *http.Request) {
	a, b := r.PathValue("a"), r.PathValue("b")
	switch {
	case a == "status":
		h.status(w, b)
	case b == "logs":
		h.logs(w, r, a)
	default:
		writeError(w, routeNotFound(r))
	}
}

func (h *handler) status(w http.ResponseWriter, id string) {
	c, err := h.cmds.get(id)
	if err != nil {
		writeError(w, err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]any{"id": c.id, "content": c.content, "running": c.running, "started_at": c.started.UTC().Format(time.RFC3339Nano)}
	if !c.running {
		out["finished_at"] = c.finished.UTC().Format(time.RFC3339Nano)
		if c.err != nil {
			out["error"] = c.err.Error()
		} else {
			out["exit_code"] = c.code
		}
	}
	writeJSON(w, out)
}

// logs answers the output from byte offset ?cursor= (0 when absent) on,
// with the offset to ask for next in EXECD-COMMANDS-TAIL-CURSOR. Output
// dropped beyond maxLog is skipped, and Kiln-Output-Dropped says how many
// bytes were.
func (h *handler) logs(w http.ResponseWriter, r *http.Request, id string) {
	c, err := h.cmds.get(id)
	if err != nil {
		writeError(w, err)
		return
	}
	var cursor int64
	if s := r.URL.Query().Get("cursor"); s != "" {
		if cursor, err = strconv.ParseInt(s, 10, 64); err != nil || cursor < 0 {
			writeError(w, badRequest("cursor %q: want a byte offset", s))
			return
		}
	}
	c.mu.Lock()
	end := c.logStart + int64(len(c.log))
	from := min(max(cursor, c.logStart), end)
	data := append([]byte(nil), c.log[from-c.logStart:]...)
	dropped := c.logStart
	c.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("EXECD-COMMANDS-TAIL-CURSOR", strconv.FormatInt(end, 10))
	if cursor < dropped {
		w.Header().Set("Kiln-Output-Dropped", strconv.FormatInt(dropped, 10))
	}
	w.Write(data)
}
