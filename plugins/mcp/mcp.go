// Package mcp is Kiln's MCP client: the bridge that connects to configured
// MCP servers and offers their tools to runs.
//
// A Manager keeps one connection per configured server, each in one of the
// states connecting, connected, error and disabled. On connect it
// initializes the session (mcp-go negotiates the protocol version, which
// the status records), lists the server's tools and registers them with
// its Host under the source "mcp.<server>", so a tool is called
// "mcp.<server>.<tool>" (an '_' in a server's name becomes '-', as tool
// sources allow no '_'). When the server says its tool list changed, the
// manager lists and registers the tools again; when the connection is
// lost (a failed ping or a call cut off by the transport), it withdraws
// them and reconnects with exponential backoff.
//
// Calls: every tools/call has a deadline (the server's "timeout" in
// milliseconds, else Config.CallTimeout, else DefaultCallTimeout). A call
// past it, or whose run is cancelled, is cancelled on the server with
// notifications/cancelled; past the deadline it is a tool error the
// model reads, and the server is pinged at once: one that does not
// answer is lost. Every message a server sends is checked before mcp-go
// reads it (which drops a malformed one without a word, leaving its call
// waiting): a line of a stdio server's output, a JSON body or an event of
// an HTTP server's. A message that is not JSON-RPC 2.0 loses the session
// (the status says why, with the start of the message), and the calls in
// flight fail with a tool error. A call carries a progress token; the
// server's notifications/progress for it become the run's tool.progress
// events, {"progress", "total", "message"} (core.ReportProgress).
//
// Approval: a tool the server does not annotate readOnlyHint is held for
// a decision by default (core.Rule{Interrupt: true} in the source's
// default policy), unless the server's Trust is TrustAll. A run's own
// interrupt_on and the server's default policy still take precedence.
// Idempotent comes from idempotentHint.
//
// Environment: a stdio server runs with only the variables its
// configuration sets, plus PATH (the Kiln process's) when the
// configuration does not set PATH, so that a bare command name such as
// "npx" resolves. Nothing else of Kiln's environment (API keys included)
// reaches it. "${NAME}" references are expanded at connect time from
// Config.LookupEnv. Messages never contain the values of variables or
// headers: every expanded value is replaced by "[redacted]" in errors and
// in the stderr tail.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/mcp/mcpservers"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// Host takes the tools of connected servers. core.Service satisfies it.
type Host interface {
	AddTools(source string, tools []core.Tool, defaults core.Policy) error
	RemoveTools(source string) error
}

// State is a server connection's state (shared with the API's types).
type State = pluginapi.MCPState

// States.
const (
	StateConnecting = pluginapi.MCPConnecting
	StateConnected  = pluginapi.MCPConnected
	StateError      = pluginapi.MCPError
	StateDisabled   = pluginapi.MCPDisabled
)

// Trust levels of a server's tools.
const (
	// TrustReadOnly (the default) holds every tool not annotated
	// readOnlyHint for a decision.
	TrustReadOnly = ""
	// TrustAll holds none of the server's tools by default.
	TrustAll = "all"
)

// ServerConfig is one configured server: its definition as mcp.json
// gives it (see mcpservers.Parse) and Kiln's own settings for it, which a
// plugin's mcp.json cannot set.
type ServerConfig struct {
	mcpservers.Server
	// Trust is TrustReadOnly or TrustAll.
	Trust string
	// Disabled servers are not connected until Enable.
	Disabled bool
}

// Backoff is the wait before the attempt-th reconnection (from 1).
type Backoff func(attempt int) time.Duration

// DefaultBackoff doubles from 500 ms up to 30 s.
func DefaultBackoff(attempt int) time.Duration {
	d := 500 * time.Millisecond
	for i := 1; i < attempt && d < 30*time.Second; i++ {
		d *= 2
	}
	return min(d, 30*time.Second)
}

// DefaultCallTimeout is how long a tool call waits for its answer when
// neither the server's configuration nor the Manager's sets a timeout.
const DefaultCallTimeout = 10 * time.Minute

// Config is a Manager's configuration. Zero fields take the defaults.
type Config struct {
	Servers []ServerConfig
	// LookupEnv resolves "${NAME}"; default os.LookupEnv.
	LookupEnv func(name string) (string, bool)
	// Dir is the directory a relative cwd is taken from; default the
	// process's working directory.
	Dir string
	// Backoff is DefaultBackoff by default.
	Backoff Backoff
	// After is time.After by default (tests pass a fake clock).
	After func(time.Duration) <-chan time.Time
	// PingInterval is how often a connected server is pinged to notice
	// that it went away; default 10 s.
	PingInterval time.Duration
	// ConnectTimeout bounds initialize, the tool listing and a ping;
	// default 20 s.
	ConnectTimeout time.Duration
	// CallTimeout bounds a tools/call of a server whose configuration
	// sets no timeout; default DefaultCallTimeout.
	CallTimeout time.Duration
	// ClientName and ClientVersion are sent in initialize; default
	// "kiln" and "dev".
	ClientName, ClientVersion string
}

// ServerStatus is a server's connection at one moment.
type ServerStatus = pluginapi.MCPServerStatus

// Manager keeps the configured servers connected. Its methods are safe
// for concurrent use.
type Manager struct {
	host   Host
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.RWMutex
	servers map[string]*server
	ids     []string
	// bundles maps a plugin's ID to the servers its mcp-servers bundle
	// added (AddServers).
	bundles map[string][]string
}

var reID = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,59}$`)

// Source returns the tool source of the server id: "mcp.<id>" with '_'
// as '-'.
func Source(id string) string { return "mcp." + strings.ReplaceAll(id, "_", "-") }

// New checks cfg and starts connecting its enabled servers in the
// background. EINVALID for a bad server name, two servers of the same
// source, a bad Trust or a server without a command or URL.
func New(host Host, cfg Config) (*Manager, error) {
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 10 * time.Second
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 20 * time.Second
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.ClientName == "" {
		cfg.ClientName = "kiln"
	}
	if cfg.ClientVersion == "" {
		cfg.ClientVersion = "dev"
	}
	m := &Manager{host: host, cfg: cfg, servers: map[string]*server{}, bundles: map[string][]string{}}
	var add []*server
	for _, sc := range cfg.Servers {
		s, err := m.newServer(sc, add)
		if err != nil {
			return nil, err
		}
		add = append(add, s)
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range add {
		m.startLocked(s)
	}
	return m, nil
}

// newServer checks sc against the servers there are and those about to
// be added.
func (m *Manager) newServer(sc ServerConfig, adding []*server) (*server, error) {
	id := sc.Name
	if !reID.MatchString(id) {
		return nil, core.Errorf(core.EINVALID, "mcp server %q: a name is 1 to 60 characters of a-z, 0-9, '_' and '-', starting with a letter or digit", id)
	}
	m.mu.RLock()
	others := slices.Collect(maps.Values(m.servers))
	m.mu.RUnlock()
	for _, o := range append(others, adding...) {
		if o.source == Source(id) {
			return nil, core.Errorf(core.EINVALID, "mcp servers %q and %q both have the tool source %q", o.cfg.Name, id, Source(id))
		}
	}
	if sc.Trust != TrustReadOnly && sc.Trust != TrustAll {
		return nil, core.Errorf(core.EINVALID, "mcp server %q: trust %q: want \"\" or \"all\"", id, sc.Trust)
	}
	if sc.Type == "" {
		sc.Type = mcpservers.TypeStdio
		if sc.URL != "" {
			sc.Type = mcpservers.TypeHTTP
		}
	}
	switch {
	case sc.Type == mcpservers.TypeStdio && sc.Command == "",
		sc.Type != mcpservers.TypeStdio && sc.URL == "":
		return nil, core.Errorf(core.EINVALID, "mcp server %q: type %q needs a %s", id, sc.Type, map[bool]string{true: "command", false: "url"}[sc.Type == mcpservers.TypeStdio])
	case sc.Type != mcpservers.TypeStdio && sc.Type != mcpservers.TypeHTTP && sc.Type != mcpservers.TypeSSE:
		return nil, core.Errorf(core.EINVALID, "mcp server %q: type %q: want stdio, http or sse", id, sc.Type)
	}
	s := &server{
		m: m, cfg: sc, source: Source(id), wake: make(chan struct{}, 1), enabled: !sc.Disabled,
		status: ServerStatus{ID: id, State: StateConnecting, Transport: sc.Type}, done: make(chan struct{}),
	}
	if !s.enabled {
		s.status.State = StateDisabled
	}
	return s, nil
}

// startLocked adds s and starts its supervisor; m.mu is held.
func (m *Manager) startLocked(s *server) {
	id := s.cfg.Name
	m.servers[id] = s
	m.ids = append(m.ids, id)
	slices.Sort(m.ids)
	var ctx context.Context
	ctx, s.stop = context.WithCancel(m.ctx)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(s.done)
		s.run(ctx)
	}()
}

// AddServers connects the servers of a plugin's mcp-servers bundle
// (source is the plugin's ID), replacing what it added before; it
// implements plugins/mcp/mcpservers.Host. A server whose name another
// server has is refused (EINVALID), and then none is added.
func (m *Manager) AddServers(source string, servers []mcpservers.Server) error {
	m.RemoveServers(source)
	var add []*server
	for _, sv := range servers {
		s, err := m.newServer(ServerConfig{Server: sv}, add)
		if err != nil {
			return fmt.Errorf("plugin %s: %w", source, err)
		}
		add = append(add, s)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range add {
		s.plugin = source
		s.status.Plugin = source
		m.startLocked(s)
		m.bundles[source] = append(m.bundles[source], s.cfg.Name)
	}
	return nil
}

// AddServer connects one server of the user's own configuration, as New
// does for cfg.Servers, in the background. ECONFLICT when a server has
// its ID or its tool source (the message names the plugin when the
// server is a plugin's); EINVALID as New.
func (m *Manager) AddServer(sc ServerConfig) error {
	m.mu.RLock()
	err := m.conflictLocked(sc.Name)
	m.mu.RUnlock()
	if err != nil {
		return err
	}
	s, err := m.newServer(sc, nil)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.conflictLocked(sc.Name); err != nil {
		return err
	}
	m.startLocked(s)
	return nil
}

// conflictLocked is the ECONFLICT of a server that has id or its tool
// source; m.mu is held.
func (m *Manager) conflictLocked(id string) error {
	for _, o := range m.servers {
		if o.source != Source(id) {
			continue
		}
		what := fmt.Sprintf("mcp server %q", o.cfg.Name)
		if o.cfg.Name != id {
			what += fmt.Sprintf(" has the tool source %q of %q and", o.source, id)
		}
		if o.plugin != "" {
			return core.Errorf(core.ECONFLICT, "%s exists: it comes from the plugin %q", what, o.plugin)
		}
		return core.Errorf(core.ECONFLICT, "%s exists", what)
	}
	return nil
}

// RemoveServer disconnects a server of the user's configuration (New or
// AddServer), withdraws its tools and forgets it. ENOTFOUND for an
// unknown ID; ECONFLICT, naming the plugin, for a server of a plugin's
// bundle, which goes with its plugin (RemoveServers).
func (m *Manager) RemoveServer(id string) error {
	m.mu.Lock()
	s, ok := m.servers[id]
	switch {
	case !ok:
		m.mu.Unlock()
		return core.Errorf(core.ENOTFOUND, "mcp server %q not found", id)
	case s.plugin != "":
		m.mu.Unlock()
		return core.Errorf(core.ECONFLICT, "mcp server %q comes from the plugin %q: it goes with the plugin (disable or remove the plugin)", id, s.plugin)
	}
	delete(m.servers, id)
	m.ids = slices.DeleteFunc(m.ids, func(x string) bool { return x == id })
	m.mu.Unlock()
	s.stop()
	<-s.done
	return nil
}

// RemoveServers disconnects the servers a plugin added and withdraws
// their tools.
func (m *Manager) RemoveServers(source string) {
	m.mu.Lock()
	ids := m.bundles[source]
	delete(m.bundles, source)
	var gone []*server
	for _, id := range ids {
		gone = append(gone, m.servers[id])
		delete(m.servers, id)
		m.ids = slices.DeleteFunc(m.ids, func(x string) bool { return x == id })
	}
	m.mu.Unlock()
	for _, s := range gone {
		s.stop()
		<-s.done
	}
}

// Close disconnects every server, withdraws its tools and stops the
// processes of stdio servers.
func (m *Manager) Close() error {
	m.cancel()
	m.wg.Wait()
	return nil
}

// Statuses returns every server's status, by ID.
func (m *Manager) Statuses() []ServerStatus {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]ServerStatus, 0, len(m.ids))
	for _, id := range m.ids {
		out = append(out, m.servers[id].snapshot())
	}
	return out
}

// Status returns one server's status; ENOTFOUND for an unknown ID.
func (m *Manager) Status(id string) (ServerStatus, error) {
	s, err := m.server(id)
	if err != nil {
		return ServerStatus{}, err
	}
	return s.snapshot(), nil
}

// Reconnect drops the server's connection, if any, and connects again at
// once, without waiting for the backoff. ENOTFOUND for an unknown ID,
// ECONFLICT when the server is disabled.
func (m *Manager) Reconnect(id string) error {
	s, err := m.server(id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.enabled {
		return core.Errorf(core.ECONFLICT, "mcp server %q is disabled", id)
	}
	s.reconnect = true
	s.kick()
	return nil
}

// Enable connects a disabled server. ENOTFOUND for an unknown ID.
func (m *Manager) Enable(id string) error { return m.setEnabled(id, true) }

// Disable disconnects the server and withdraws its tools until Enable.
// ENOTFOUND for an unknown ID.
func (m *Manager) Disable(id string) error { return m.setEnabled(id, false) }

func (m *Manager) setEnabled(id string, on bool) error {
	s, err := m.server(id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.enabled != on {
		s.enabled = on
		s.kick()
	}
	return nil
}

func (m *Manager) server(id string) (*server, error) {
	m.mu.RLock()
	s, ok := m.servers[id]
	m.mu.RUnlock()
	if !ok {
		return nil, core.Errorf(core.ENOTFOUND, "mcp server %q not found", id)
	}
	return s, nil
}

// server is one configured server and its supervisor's state.
type server struct {
	m      *Manager
	cfg    ServerConfig
	source string
	plugin string        // the plugin of a bundle's server, else ""
	wake   chan struct{} // cap 1: enabled or reconnect changed
	stop   context.CancelFunc
	done   chan struct{} // closed when the supervisor has ended

	mu        sync.Mutex
	enabled   bool
	reconnect bool
	status    ServerStatus
	sess      *session // the connected session, nil between sessions
}

// kick wakes the supervisor; s.mu is held.
func (s *server) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *server) snapshot() ServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.Tools = slices.Clone(st.Tools)
	return st
}

func (s *server) set(f func(st *ServerStatus)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.status)
}

type endReason int

const (
	endLost endReason = iota
	endWake
	endClosed
)

// run is the server's supervisor: connect, serve, and after a failure
// wait the backoff and connect again, until ctx ends.
func (s *server) run(ctx context.Context) {
	attempt := 0
	for ctx.Err() == nil {
		s.mu.Lock()
		enabled := s.enabled
		s.reconnect = false
		s.mu.Unlock()
		if !enabled {
			s.set(func(st *ServerStatus) {
				*st = ServerStatus{ID: st.ID, State: StateDisabled, Transport: st.Transport, Plugin: st.Plugin}
			})
			select {
			case <-s.wake:
			case <-ctx.Done():
			}
			attempt = 0
			continue
		}
		s.set(func(st *ServerStatus) {
			st.State, st.Protocol, st.Tools = StateConnecting, "", nil
		})
		sess, err := s.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			attempt++
			s.set(func(st *ServerStatus) { st.State, st.Error = StateError, err.Error() })
			s.sleep(ctx, s.m.cfg.Backoff(attempt))
			continue
		}
		attempt = 0
		s.mu.Lock()
		s.sess = sess
		s.mu.Unlock()
		reason, lostErr := s.serve(ctx, sess)
		_ = s.m.host.RemoveTools(s.source)
		sess.close()
		s.mu.Lock()
		s.sess = nil
		s.mu.Unlock()
		switch reason {
		case endClosed:
			return
		case endWake:
			s.set(func(st *ServerStatus) { st.Error = "" })
			continue
		}
		attempt = 1
		var me *MalformedError
		if !errors.As(lostErr, &me) {
			lostErr = fmt.Errorf("connection lost: %w", lostErr)
		}
		msg := sess.describe(lostErr)
		s.set(func(st *ServerStatus) {
			st.State, st.Error, st.Tools = StateError, msg, nil
		})
		s.sleep(ctx, s.m.cfg.Backoff(attempt))
	}
}

// sleep waits d, or less when the server is woken or ctx ends.
func (s *server) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-s.m.cfg.After(d):
	case <-s.wake:
	case <-ctx.Done():
	}
}

// serve keeps a connected session until it is lost, the server is
// disabled or reconnected, or ctx ends.
func (s *server) serve(ctx context.Context, sess *session) (endReason, error) {
	for {
		select {
		case <-ctx.Done():
			return endClosed, nil
		case <-sess.lostCh:
			return endLost, sess.lostErr
		case <-s.wake:
			s.mu.Lock()
			again := !s.enabled || s.reconnect
			s.mu.Unlock()
			if again {
				return endWake, nil
			}
		case <-sess.listChanged:
			if err := s.register(ctx, sess, true); err != nil {
				return endLost, err
			}
		case <-sess.suspect:
			if err := s.ping(ctx, sess); err != nil {
				return endLost, fmt.Errorf("a call timed out, and the server did not answer a ping either: %w", err)
			}
		case <-s.m.cfg.After(s.m.cfg.PingInterval):
			if err := s.ping(ctx, sess); err != nil {
				return endLost, err
			}
		}
	}
}

// ping checks that the server answers, within ConnectTimeout. nil when
// ctx ends first.
func (s *server) ping(ctx context.Context, sess *session) error {
	pctx, cancel := context.WithTimeout(ctx, s.m.cfg.ConnectTimeout)
	defer cancel()
	if err := sess.client.Ping(pctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// register lists the session's tools and registers them, replacing the
// registration of the source when again (a tools/list_changed).
func (s *server) register(ctx context.Context, sess *session, again bool) error {
	lctx, cancel := context.WithTimeout(ctx, s.m.cfg.ConnectTimeout)
	defer cancel()
	tools, err := sess.listTools(lctx, s.cfg.Trust)
	if err != nil {
		return err
	}
	if again {
		if tools.same(sess.registered) {
			return nil // nothing changed that Kiln sees
		}
		_ = s.m.host.RemoveTools(s.source)
	}
	if err := s.m.host.AddTools(s.source, tools.tools, tools.policy); err != nil {
		if core.ErrorCode(err) != core.ECONFLICT || again {
			return fmt.Errorf("register tools: %w", err)
		}
		// left over from a session that ended without its removal
		_ = s.m.host.RemoveTools(s.source)
		if err := s.m.host.AddTools(s.source, tools.tools, tools.policy); err != nil {
			return fmt.Errorf("register tools: %w", err)
		}
	}
	sess.registered = tools
	s.set(func(st *ServerStatus) {
		st.State, st.Error, st.Protocol, st.Tools = StateConnected, "", sess.protocol, tools.names(s.source)
	})
	return nil
}

var errClosed = errors.New("the manager is closed")
