package execapi

import (
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

// utf8Splitter holds back the end of a chunk that starts a UTF-8
// character the next chunk ends, so that no event splits one.
type utf8Splitter struct{ held []byte }

func (u *utf8Splitter) split(p []byte) string {
	b := append(u.held, p...)
	n := len(b)
	for i := 1; i <= 3 && i <= len(b); i++ {
		c := b[len(b)-i]
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				n = len(b) - i
			}
			break
		}
	}
	u.held = append([]byte(nil), b[n:]...)
	return string(b[:n])
}

// streamOut returns an output function that sends each stream's text as
// events.
func streamOut(s *eventStream) func(sandbox.Stream, []byte) {
	var out, errs utf8Splitter
	return func(st sandbox.Stream, p []byte) {
		typ, u := "stdout", &out
		if st == sandbox.Stderr {
			typ, u = "stderr", &errs
		}
		if t := u.split(p); t != "" {
			s.send(event{Type: typ, Text: t})
		}
	}
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
	code, err := h.b.Run(ctx, bc, func() {
		ran = true
		s.send(event{Type: "init", Text: c.id})
		stop = pinger(s)
	}, streamOut(s))
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
		http.NotFound(w, r)
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
