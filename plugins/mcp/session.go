package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/mcp/mcpservers"
)

// session is one connection to a server.
type session struct {
	server   string
	client   *client.Client
	protocol string
	secrets  []string // expanded values, redacted from messages
	// registered is what the session's last listing registered (only
	// the supervisor touches it).
	registered listed

	// timeout bounds every tools/call (ServerConfig.Timeout or
	// Config.CallTimeout).
	timeout time.Duration

	cmdMu  sync.Mutex
	cmd    *exec.Cmd     // the stdio server's process
	stdout *os.File      // the read end of its output
	exited chan struct{} // closed when it has ended
	tail   *tail         // its stderr

	cancel      context.CancelFunc
	lostOnce    sync.Once
	lostCh      chan struct{}
	lostErr     error
	listChanged chan struct{} // cap 1
	// suspect (cap 1) asks the supervisor to ping the server now: a call
	// timed out.
	suspect   chan struct{}
	closeOnce sync.Once

	progressMu sync.Mutex
	progress   map[string]func(json.RawMessage) // by progress token
	tokens     atomic.Uint64
}

// lost reports the connection gone; the supervisor reconnects.
func (s *session) lost(err error) {
	s.lostOnce.Do(func() {
		s.lostErr = err
		close(s.lostCh)
	})
}

func (s *session) isClosed() bool {
	select {
	case <-s.lostCh:
		return true
	default:
		return false
	}
}

// close ends the session. A stdio server has its input closed and
// gracePeriod to exit before its process group is killed.
func (s *session) close() {
	s.closeOnce.Do(func() {
		s.lost(errClosed)
		if s.client != nil {
			_ = s.client.Close()
		}
		s.cancel()
		s.cmdMu.Lock()
		defer s.cmdMu.Unlock()
		if s.cmd == nil {
			return
		}
		select {
		case <-s.exited:
		case <-time.After(gracePeriod):
		}
		killGroup(s.cmd)
		_ = s.stdout.Close()
	})
}

// gracePeriod is how long a stdio server has to exit once its input is
// closed.
const gracePeriod = 2 * time.Second

// startStdio starts def's command in dir, in a process group of its own,
// with env alone, its stderr kept in the session's tail, and returns the
// transport that speaks to it. Every line of its output is checked
// (frameReader): a message that is not JSON-RPC 2.0 ends the session.
func (s *session) startStdio(def mcpservers.Server, dir string, env []string) (transport.Interface, error) {
	cmd := exec.Command(def.Command, def.Args...)
	cmd.Env, cmd.Dir, cmd.Stderr = env, dir, s.tail
	cmd.WaitDelay = gracePeriod
	ownGroup(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// An output pipe of our own, not StdoutPipe: Wait would close it
	// while the last answers may still be unread.
	out, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		out.Close()
		return nil, fmt.Errorf("start %s: %w", def.Command, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	s.cmdMu.Lock()
	s.cmd, s.stdout, s.exited = cmd, out, exited
	s.cmdMu.Unlock()
	fr := newFrameReader(out, func(m *MalformedError) { s.lost(m) })
	fr.eof = func() {
		// The output is read to its end: every answer is delivered.
		select {
		case <-exited:
			s.lost(fmt.Errorf("the server exited (%v)", waitErr))
		case <-time.After(gracePeriod):
			s.lost(errors.New("the server closed its output"))
		}
	}
	t := transport.NewIO(fr, stdin, nil)
	transport.WithCommandLogger(quiet)(t)
	return t, nil
}

// httpClient is the client of an HTTP server's session: every message
// it answers with is checked (checkedHTTP), and a malformed one ends the
// session.
func (s *session) httpClient() *http.Client {
	return &http.Client{Transport: checkedHTTP{base: http.DefaultTransport, bad: func(m *MalformedError) { s.lost(m) }}}
}

// watchProgress gives a call a progress token: the server's progress
// notifications that carry it go to f until done.
func (s *session) watchProgress(f func(json.RawMessage)) (token string, done func()) {
	token = fmt.Sprintf("kiln-%d", s.tokens.Add(1))
	s.progressMu.Lock()
	if s.progress == nil {
		s.progress = map[string]func(json.RawMessage){}
	}
	s.progress[token] = f
	s.progressMu.Unlock()
	return token, func() {
		s.progressMu.Lock()
		delete(s.progress, token)
		s.progressMu.Unlock()
	}
}

// maxProgressMessage bounds a progress notification's message, in bytes.
const maxProgressMessage = 1 << 10

// onNotification handles what the server notifies: a changed tool list,
// and the progress of a call, passed on as {"progress", "total",
// "message"} (total and message when the server sends them, the message
// cut at maxProgressMessage and redacted). A progress notification whose
// token no call in flight has, or without a numeric progress, is dropped.
func (s *session) onNotification(n mcp.JSONRPCNotification) {
	switch n.Method {
	case string(mcp.MethodNotificationToolsListChanged):
		select {
		case s.listChanged <- struct{}{}:
		default:
		}
	case string(mcp.MethodNotificationProgress):
		f := n.Params.AdditionalFields
		token, _ := f["progressToken"].(string)
		s.progressMu.Lock()
		report := s.progress[token]
		s.progressMu.Unlock()
		progress, ok := f["progress"].(float64)
		if report == nil || !ok {
			return
		}
		var p struct {
			Progress float64  `json:"progress"`
			Total    *float64 `json:"total,omitempty"`
			Message  string   `json:"message,omitempty"`
		}
		p.Progress = progress
		if total, ok := f["total"].(float64); ok {
			p.Total = &total
		}
		if msg, ok := f["message"].(string); ok {
			if len(msg) > maxProgressMessage {
				msg = strings.ToValidUTF8(msg[:maxProgressMessage], "") + "…"
			}
			p.Message = redact(msg, s.secrets)
		}
		if b, err := json.Marshal(p); err == nil {
			report(b)
		}
	}
}

// describe is err with the stderr tail, secrets redacted.
func (s *session) describe(err error) string {
	msg := err.Error()
	if s.tail != nil {
		if t := s.tail.String(); t != "" {
			msg += "\nstderr:\n" + t
		}
	}
	return redact(msg, s.secrets)
}

// process returns the stdio server's process, nil for HTTP.
func (s *session) process() *os.Process {
	s.cmdMu.Lock()
	defer s.cmdMu.Unlock()
	if s.cmd == nil {
		return nil
	}
	return s.cmd.Process
}

func redact(msg string, secrets []string) string {
	for _, v := range secrets {
		if len(v) >= 4 {
			msg = strings.ReplaceAll(msg, v, "[redacted]")
		}
	}
	return msg
}

// connect starts a session: the transport, initialize, and the tools'
// registration. Its error is described (stderr tail, redacted).
func (s *server) connect(ctx context.Context) (*session, error) {
	m := s.m
	sess := &session{
		server:      s.cfg.Name,
		timeout:     m.cfg.CallTimeout,
		lostCh:      make(chan struct{}),
		listChanged: make(chan struct{}, 1),
		suspect:     make(chan struct{}, 1),
	}
	if s.cfg.Timeout > 0 {
		sess.timeout = time.Duration(s.cfg.Timeout) * time.Millisecond
	}
	// Expand, recording every substituted value and every env and
	// header value as a secret.
	lookup := m.cfg.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	def, err := mcpservers.Expand(s.cfg.Server, func(name string) (string, bool) {
		v, ok := lookup(name)
		if ok {
			sess.secrets = append(sess.secrets, v)
		}
		return v, ok
	})
	if err != nil {
		return nil, err
	}
	for _, v := range def.Env {
		sess.secrets = append(sess.secrets, v)
	}
	for _, v := range def.Headers {
		sess.secrets = append(sess.secrets, v)
	}
	// Longest first, so a secret containing another is redacted whole.
	slices.SortFunc(sess.secrets, func(a, b string) int { return len(b) - len(a) })

	sctx, cancel := context.WithCancel(ctx)
	sess.cancel = cancel
	fail := func(err error) (*session, error) {
		if sess.isClosed() {
			err = sess.lostErr // why the handshake was cut off
		}
		msg := sess.describe(err)
		sess.close()
		return nil, fmt.Errorf("%s", msg)
	}

	var c *client.Client
	switch s.cfg.Type {
	case mcpservers.TypeStdio:
		sess.tail = newTail(20)
		dir := def.Cwd
		if dir != "" && !filepath.IsAbs(dir) && m.cfg.Dir != "" {
			dir = filepath.Join(m.cfg.Dir, dir)
		}
		t, err := sess.startStdio(def, dir, stdioEnv(def.Env))
		if err != nil {
			return fail(err)
		}
		c = client.NewClient(t)
	case mcpservers.TypeHTTP:
		c, err = client.NewStreamableHttpClient(def.URL, transport.WithHTTPHeaders(def.Headers), transport.WithContinuousListening(), transport.WithHTTPLogger(quiet),
			transport.WithHTTPBasicClient(sess.httpClient()))
	case mcpservers.TypeSSE:
		c, err = client.NewSSEMCPClient(def.URL, client.WithHeaders(def.Headers), transport.WithHTTPClient(sess.httpClient()))
	}
	if err != nil {
		return fail(err)
	}
	sess.client = c
	if err := c.Start(sctx); err != nil {
		return fail(err)
	}
	c.OnNotification(sess.onNotification)
	c.OnConnectionLost(sess.lost)
	// A session lost while it connects (a malformed message, an exit)
	// ends the handshake at once.
	go func() {
		select {
		case <-sess.lostCh:
			cancel()
		case <-sctx.Done():
		}
	}()

	ictx, icancel := context.WithTimeout(sctx, m.cfg.ConnectTimeout)
	defer icancel()
	var req mcp.InitializeRequest
	req.Params.ClientInfo = mcp.Implementation{Name: m.cfg.ClientName, Version: m.cfg.ClientVersion}
	res, err := c.Initialize(ictx, req)
	if err != nil {
		return fail(fmt.Errorf("initialize: %w", err))
	}
	sess.protocol = res.ProtocolVersion
	if mcp.IsModernProtocol(sess.protocol) && res.Capabilities.Tools != nil && res.Capabilities.Tools.ListChanged {
		// From 2026-07-28 a client opts in to notifications with a
		// subscriptions/listen stream, held open for the session.
		go func() { _ = c.Listen(sctx, mcp.SubscriptionFilter{ToolsListChanged: true}) }()
	}
	if err := s.register(sctx, sess, false); err != nil {
		return fail(err)
	}
	return sess, nil
}

// quiet drops mcp-go's own log lines: what matters reaches the status.
var quiet = slog.New(slog.DiscardHandler)

// stdioEnv is the configured environment, plus the process's PATH when
// it sets none, as KEY=value lines in key order.
func stdioEnv(vars map[string]string) []string {
	env := maps.Clone(vars)
	if env == nil {
		env = map[string]string{}
	}
	if _, ok := env["PATH"]; !ok {
		if p, ok := os.LookupEnv("PATH"); ok {
			env["PATH"] = p
		}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

type listed struct {
	tools  []core.Tool
	policy core.Policy
}

// same reports whether l registers exactly what o does.
func (l listed) same(o listed) bool {
	if len(l.tools) != len(o.tools) || !maps.EqualFunc(l.policy, o.policy, func(a, b core.Rule) bool {
		return a.Interrupt == b.Interrupt && slices.Equal(a.AllowedDecisions, b.AllowedDecisions)
	}) {
		return false
	}
	for i := range l.tools {
		a, b := l.tools[i].Spec(), o.tools[i].Spec()
		if a.Name != b.Name || a.Description != b.Description || a.Idempotent != b.Idempotent || !bytes.Equal(a.Schema, b.Schema) {
			return false
		}
	}
	return true
}

func (l listed) names(source string) []string {
	var out []string
	for _, t := range l.tools {
		out = append(out, source+"."+t.Spec().Name)
	}
	slices.Sort(out)
	return out
}

func (s *session) listTools(ctx context.Context, trust string) (listed, error) {
	res, err := s.client.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return listed{}, fmt.Errorf("list tools: %w", err)
	}
	tools, policy := convertTools(s, res.Tools, trust)
	return listed{tools, policy}, nil
}

// tail keeps the last lines written to it.
type tail struct {
	mu      sync.Mutex
	max     int
	lines   []string
	partial []byte
}

func newTail(max int) *tail { return &tail{max: max} }

const maxLine = 1 << 10

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			t.partial = append(t.partial, p...)
			if len(t.partial) > maxLine {
				t.partial = t.partial[:maxLine]
			}
			break
		}
		line := append(t.partial, p[:i]...)
		t.partial = nil
		if len(line) > maxLine {
			line = line[:maxLine]
		}
		t.lines = append(t.lines, strings.TrimRight(string(line), "\r"))
		if len(t.lines) > t.max {
			t.lines = t.lines[len(t.lines)-t.max:]
		}
		p = p[i+1:]
	}
	return n, nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := slices.Clone(t.lines)
	if len(t.partial) > 0 {
		lines = append(lines, string(t.partial))
	}
	if len(lines) > t.max {
		lines = lines[len(lines)-t.max:]
	}
	return strings.Join(lines, "\n")
}
