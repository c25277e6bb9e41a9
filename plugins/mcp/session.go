package mcp

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/mcpservers"
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

	cmdMu sync.Mutex
	cmd   *exec.Cmd // the stdio server's process
	tail  *tail     // its stderr

	cancel      context.CancelFunc
	lostOnce    sync.Once
	lostCh      chan struct{}
	lostErr     error
	listChanged chan struct{} // cap 1
	closeOnce   sync.Once
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

func (s *session) close() {
	s.closeOnce.Do(func() {
		s.lost(errClosed)
		if s.client != nil {
			_ = s.client.Close()
		}
		s.cancel()
		s.cmdMu.Lock()
		if s.cmd != nil {
			killGroup(s.cmd)
		}
		s.cmdMu.Unlock()
	})
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
		lostCh:      make(chan struct{}),
		listChanged: make(chan struct{}, 1),
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
		env := stdioEnv(def.Env)
		t := transport.NewStdioWithOptions(def.Command, env, def.Args,
			transport.WithCommandFunc(func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
				cmd := exec.CommandContext(ctx, command, args...)
				cmd.Env = env
				cmd.Dir = dir
				ownGroup(cmd)
				sess.cmdMu.Lock()
				sess.cmd = cmd
				sess.cmdMu.Unlock()
				return cmd, nil
			}),
			transport.WithCommandStderrWriter(sess.tail),
			transport.WithCommandLogger(quiet))
		c = client.NewClient(t)
	case mcpservers.TypeHTTP:
		c, err = client.NewStreamableHttpClient(def.URL, transport.WithHTTPHeaders(def.Headers), transport.WithContinuousListening(), transport.WithHTTPLogger(quiet))
	case mcpservers.TypeSSE:
		c, err = client.NewSSEMCPClient(def.URL, client.WithHeaders(def.Headers))
	}
	if err != nil {
		return fail(err)
	}
	sess.client = c
	if err := c.Start(sctx); err != nil {
		return fail(err)
	}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == mcp.MethodNotificationToolsListChanged {
			select {
			case sess.listChanged <- struct{}{}:
			default:
			}
		}
	})
	c.OnConnectionLost(sess.lost)

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
