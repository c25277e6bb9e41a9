package execapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kilnhq/kiln/sandbox"
)

// A session is a long-lived sh that reads its commands from a pipe, so
// that the folder and the exported variables persist between runs. Each
// run is written as
//
//	eval '<command>' </dev/null
//	printf '\n%s %d\n' <marker> $? ; printf '\n%s %d\n' <marker> 0 >&2
//
// and its output is what comes before the "\n<marker> " on each stream:
// the newline printf adds is dropped, so output that lacks a trailing
// newline stays as it was. A run that times out, or a command that exits
// the shell, ends the session.
type session struct {
	run    sync.Mutex // one run at a time
	proc   *Process
	marker string
	chunks chan chunk // both streams; closed when the shell has exited
	held   [3][]byte  // per stream: bytes read past the last marker

	once sync.Once
}

func (s *session) kill() { s.once.Do(func() { s.proc.Kill() }) }

type sessions struct {
	mu   sync.Mutex
	byID map[string]*session
}

func newSessions() *sessions { return &sessions{byID: map[string]*session{}} }

func (ss *sessions) get(id string) (*session, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s, ok := ss.byID[id]; ok {
		return s, nil
	}
	return nil, &apiError{http.StatusNotFound, "SESSION_NOT_FOUND", fmt.Sprintf("no session %q", id)}
}

func (ss *sessions) remove(id string) {
	ss.mu.Lock()
	s, ok := ss.byID[id]
	delete(ss.byID, id)
	ss.mu.Unlock()
	if ok {
		s.kill()
	}
}

func (h *handler) newSession(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Cwd string `json:"cwd"`
	}
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &req); err != nil {
			writeError(w, err)
			return
		}
	}
	if req.Cwd != "" {
		if err := checkPath("cwd", req.Cwd); err != nil {
			writeError(w, err)
			return
		}
	}
	if err := h.checkDir(r.Context(), req.Cwd); err != nil {
		writeError(w, err)
		return
	}
	proc, err := h.b.Shell(req.Cwd)
	if err != nil {
		writeError(w, err)
		return
	}
	s := &session{proc: proc, marker: "__kiln_end_" + newID(), chunks: make(chan chunk, 16)}
	var wg sync.WaitGroup
	for _, src := range []struct {
		r  io.Reader
		st sandbox.Stream
	}{{proc.Stdout, sandbox.Stdout}, {proc.Stderr, sandbox.Stderr}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := src.r.Read(buf)
				if n > 0 {
					s.chunks <- chunk{src.st, bytes.Clone(buf[:n])}
				}
				if err != nil {
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(s.chunks) }()
	id := newID()
	h.sessions.mu.Lock()
	h.sessions.byID[id] = s
	h.sessions.mu.Unlock()
	writeJSON(w, map[string]string{"session_id": id})
}

func (h *handler) deleteSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := h.sessions.get(id); err != nil {
		writeError(w, err)
		return
	}
	h.sessions.remove(id)
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (h *handler) runSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s, err := h.sessions.get(id)
	if err != nil {
		writeError(w, err)
		return
	}
	var req commandRequest
	if err := decodeJSON(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := req.check(); err != nil {
		writeError(w, err)
		return
	}
	ctx := r.Context()
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.Timeout)*time.Millisecond)
		defer cancel()
	}
	s.run.Lock()
	defer s.run.Unlock()
	script := "eval " + shellQuote(req.Command) + " </dev/null\n"
	if req.Cwd != "" {
		script = "cd " + shellQuote(req.Cwd) + " && " + script
	}
	script += fmt.Sprintf("printf '\\n%%s %%d\\n' %s $?; printf '\\n%%s %%d\\n' %s 0 >&2\n", s.marker, s.marker)
	start := time.Now()
	if _, err := io.WriteString(s.proc.Stdin, script); err != nil {
		h.sessions.remove(id)
		writeError(w, fmt.Errorf("session %s has ended: %w", id, err))
		return
	}
	es := newEventStream(w)
	es.send(event{Type: "init", Text: id})
	stop := pinger(es)
	out := newOutFramer(es)
	code, err := s.collect(ctx, out.write)
	out.flush()
	stop()
	if err != nil {
		h.sessions.remove(id)
	}
	finish(es, start, code, err)
}

// collect passes the output of the run just written to out until both
// streams have shown the marker, and returns the exit code the marker
// carries.
func (s *session) collect(ctx context.Context, out func(sandbox.Stream, []byte)) (int, error) {
	needle := []byte("\n" + s.marker + " ")
	var done [3]bool
	code := 0
	// scan passes what precedes a marker in the held bytes of st, or all
	// but a tail that may begin one, and reports whether it found it.
	scan := func(st sandbox.Stream) bool {
		b := s.held[st]
		if i := bytes.Index(b, needle); i >= 0 {
			rest := b[i+len(needle):]
			j := bytes.IndexByte(rest, '\n')
			if j < 0 {
				if i > 0 {
					out(st, b[:i])
					s.held[st] = append([]byte(nil), b[i:]...)
				}
				return false
			}
			if i > 0 {
				out(st, b[:i])
			}
			if st == sandbox.Stdout {
				code, _ = strconv.Atoi(string(rest[:j]))
			}
			s.held[st] = append([]byte(nil), rest[j+1:]...)
			return true
		}
		keep := 0
		for k := min(len(b), len(needle)-1); k > 0; k-- {
			if bytes.Equal(b[len(b)-k:], needle[:k]) {
				keep = k
				break
			}
		}
		if n := len(b) - keep; n > 0 {
			out(st, b[:n])
			s.held[st] = append([]byte(nil), b[n:]...)
		}
		return false
	}
	for _, st := range []sandbox.Stream{sandbox.Stdout, sandbox.Stderr} {
		done[st] = scan(st)
	}
	for !done[sandbox.Stdout] || !done[sandbox.Stderr] {
		select {
		case <-ctx.Done():
			s.kill()
			return 0, fmt.Errorf("session command: %w (the session has ended)", context.Cause(ctx))
		case c, ok := <-s.chunks:
			if !ok {
				return 0, errors.New("the session's shell exited")
			}
			s.held[c.s] = append(s.held[c.s], c.data...)
			if !done[c.s] {
				done[c.s] = scan(c.s)
			}
		}
	}
	return code, nil
}
