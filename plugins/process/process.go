package process

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/integrity"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc"
)

// State is where a plugin process is in its life.
type State string

// States.
const (
	StateRunning    State = "running"    // a process is serving calls
	StateRestarting State = "restarting" // the process died; a new one is being started
	StateFailed     State = "failed"     // no process and no more attempts; see LastError
	StateClosed     State = "closed"     // Close was called
)

// Status is a plugin's health.
type Status struct {
	State State
	// Restarts counts the attempts to start the plugin again after its
	// process died, successful or not.
	Restarts int
	// LastError is the most recent start failure or the reason the last
	// process ended, or "". It is kept after a successful restart.
	LastError string
	// PID is the running process's ID, or 0 when none runs.
	PID int
}

// Options tune a process host. The zero value is usable.
type Options struct {
	// Logger receives the host's and go-plugin's messages and the plugin's
	// stderr; nil means slog.Default(). Every record carries plugin=<id> and
	// component=process:<id>.
	Logger *slog.Logger
	// LookupEnv reads the host environment for the variables the manifest
	// declares; nil means os.LookupEnv.
	LookupEnv func(name string) (string, bool)
	// StartTimeout bounds one start: exec, handshake and Describe.
	// Default 10s.
	StartTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before a restart, which
	// doubles with each restart in the last minute. Defaults 100ms and 10s.
	MinBackoff, MaxBackoff time.Duration
	// MaxRestartsPerMinute is how many restarts may be attempted in any
	// minute; past it the plugin is failed. Default 5.
	MaxRestartsPerMinute int
	// Now is the clock of the restart budget; nil means time.Now.
	Now func() time.Time
	// Args are the command-line arguments of the entry (tests and
	// LoadSelf use them; installed plugins get none).
	Args []string
	// Env holds extra NAME=value variables the host sets for the plugin,
	// added after the declared ones (so one of the same name wins). The
	// runtime's loader (NewLoader) sets KILN_PLUGIN_DATA, the plugin's
	// data folder, here.
	Env []string
	// KV is the plugin's key/value namespace behind the host's callbacks
	// (protocol 2); nil gives it none.
	KV plugins.KV
	// Emit receives the plugin's progress events with the context of the
	// call that sent them (core.ReportProgress); nil drops them.
	Emit func(ctx context.Context, event json.RawMessage)
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 10 * time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(10*time.Second, o.MinBackoff)
	}
	if o.MaxRestartsPerMinute <= 0 {
		o.MaxRestartsPerMinute = 5
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// backoff returns the wait before a restart when n restarts were
// attempted in the last minute: MinBackoff doubled n times, at most
// MaxBackoff.
func (o Options) backoff(n int) time.Duration {
	d := o.MinBackoff
	for range n {
		d *= 2
		if d >= o.MaxBackoff {
			return o.MaxBackoff
		}
	}
	return d
}

// Plugin is a plugin process: what the kinds it provides reach it
// through (Dispense, Do). Load returns one; it is safe for concurrent
// use.
type Plugin struct {
	id      string
	dir     string
	m       *plugins.Manifest
	entry   string // absolute path of the executable
	sum     []byte // m.SHA256 decoded
	timeout time.Duration
	opts    Options
	log     *slog.Logger

	desc described   // from the first start; later starts must agree
	host *hostServer // the host's callbacks, shared by the plugin's processes

	mu       sync.Mutex
	inst     *instance // the serving process, nil when there is none
	state    State
	restarts int
	lastErr  string
	attempts []time.Time   // restart attempts within the last minute
	wake     chan struct{} // closed and replaced when inst or state changes
	stop     chan struct{} // closed by Close
	wg       sync.WaitGroup
}

// instance is one plugin process.
type instance struct {
	client  *goplugin.Client
	version int                          // the protocol version negotiated
	conns   map[plugins.Capability]*Conn // the process's end of each kind the manifest lists
	done    <-chan struct{}              // closed when the process exits
	pid     int
}

// described is what a process says about itself at start: each kind's
// description (Kind.Describe).
type described map[plugins.Capability]any

func (d described) equal(o described) bool { return reflect.DeepEqual(d, o) }

// knownEntries are the plugin executables this server verified, so that
// starting one again while it is unchanged skips hashing it (20 ms for a
// 20 MB Go binary, most of a start).
var knownEntries integrity.Known

// Load starts the process plugin in dir described by m and returns it.
// m must have runtime "process" and provide only kinds the runtime
// carries (RegisterKind); the process must serve every kind m provides,
// at a protocol version that carries it (version 1 carries a toolset
// only). Before
// this and every later start the entry is checked (a regular file inside
// dir) and go-plugin hashes it just before exec against m's sha256; a
// mismatch returns an error wrapping plugins.ErrChecksumMismatch. The process gets an environment holding
// only the variables m.Permissions.Env declares (their values from the
// host's environment; an unset one is left out), then opts.Env, plus
// go-plugin's handshake variables; its working directory is dir. A
// failure to start returns an error wrapping plugins.ErrTransport.
//
// Each Call has the deadline m.Permissions.TimeoutMS. When the process
// dies it is started again after a backoff (Options); Health reports it.
// Close ends the process.
func Load(ctx context.Context, dir string, m *plugins.Manifest, opts Options) (*Plugin, error) {
	if m == nil {
		return nil, errors.New("load process plugin: nil manifest")
	}
	if m.Runtime != plugins.RuntimeProcess {
		return nil, fmt.Errorf("load plugin %s: runtime is %q, not %q", m.ID, m.Runtime, plugins.RuntimeProcess)
	}
	for _, c := range m.Provides {
		if _, ok := lookupKind(c); !ok {
			return nil, fmt.Errorf("load plugin %s: a process plugin cannot provide %q (only %s)", m.ID, c, quoteKinds(carried(0)))
		}
	}
	sum, err := hex.DecodeString(m.SHA256)
	if err != nil || len(sum) != sha256.Size {
		return nil, fmt.Errorf("load plugin %s: manifest sha256 %q is not a SHA-256 digest", m.ID, m.SHA256)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("load plugin %s: %w", m.ID, err)
	}
	timeout := time.Duration(m.Permissions.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = plugins.DefaultTimeoutMS * time.Millisecond
	}
	opts = opts.withDefaults()
	p := &Plugin{
		id:      m.ID,
		dir:     abs,
		m:       m,
		entry:   filepath.Join(abs, filepath.FromSlash(m.Entry)),
		sum:     sum,
		timeout: timeout,
		opts:    opts,
		log:     opts.Logger.With("component", "process:"+m.ID, "plugin", m.ID),
		wake:    make(chan struct{}),
		stop:    make(chan struct{}),
	}
	p.host = newHostServer(p.log, opts.KV, opts.Emit)
	inst, desc, err := p.start(ctx)
	if err != nil {
		return nil, fmt.Errorf("load plugin %s: %w", m.ID, err)
	}
	p.desc = desc
	p.inst, p.state = inst, StateRunning
	p.wg.Add(1)
	go p.watch(inst)
	p.log.Info("plugin started", "pid", inst.pid, "protocol", inst.version, "provides", m.Provides)
	return p, nil
}

// Dispense returns the client of kind, one the manifest lists: what the
// kind's Client makes of the plugin.
func (p *Plugin) Dispense(_ context.Context, kind plugins.Capability) (any, error) {
	k, ok := lookupKind(kind)
	if !ok || !slices.Contains(p.m.Provides, kind) {
		return nil, fmt.Errorf("does not provide %q", kind)
	}
	return k.Client(p, p.desc[kind])
}

// environ returns the plugin's environment: the declared variables that
// the host has, then Options.Env.
func (p *Plugin) environ() []string {
	env := []string{} // non-nil: exec.Cmd would inherit the host's for nil
	for _, name := range p.m.Permissions.Env {
		if !p.m.Permissions.AllowsEnv(name) {
			continue
		}
		if v, ok := p.opts.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return append(env, p.opts.Env...)
}

// start checks the entry, starts a process and asks it for its tools.
// The entry's sha256 is checked by go-plugin (SecureConfig) just before
// exec, once per start. Errors wrap plugins.ErrChecksumMismatch or
// plugins.ErrTransport.
//
// The channel is mutual TLS with a fresh P-256 certificate on each side
// (pluginrpc.NewCertificate): the host's goes to the plugin in
// PLUGIN_CLIENT_CERT, as with go-plugin's AutoMTLS, and the plugin's comes
// back on a pipe only the plugin holds (pluginrpc.CertFDEnv), or, from a
// plugin built before that, in go-plugin's handshake line. Until one of
// them arrives the host trusts no server certificate at all.
func (p *Plugin) start(ctx context.Context) (*instance, described, error) {
	if err := integrity.EntryFile(p.dir, p.m); err != nil {
		return nil, described{}, fmt.Errorf("%w: %w", plugins.ErrTransport, err)
	}
	cert, certPEM, err := pluginrpc.NewCertificate()
	if err != nil {
		return nil, described{}, fmt.Errorf("%w: generate the host's certificate: %w", plugins.ErrTransport, err)
	}
	plugin := x509.NewCertPool() // the plugin's certificate, once known
	tlsConfig := &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      plugin,
		ServerName:   "localhost",
		// The host serves its callbacks on the broker with this
		// configuration too (protocol 2): there the plugin is the client,
		// and only the plugin is accepted.
		ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs:  plugin,
		MinVersion: tls.VersionTLS12, // what AutoMTLS plugins accept
	}
	certR, certW, err := os.Pipe()
	if err != nil {
		return nil, described{}, fmt.Errorf("%w: %w", plugins.ErrTransport, err)
	}
	defer certR.Close()
	defer certW.Close()
	cmd := exec.Command(p.entry, p.opts.Args...)
	cmd.Dir = p.dir
	cmd.Env = append(p.environ(), pluginrpc.ClientCertEnv+"="+string(certPEM))
	if runtime.GOOS != "windows" { // no inherited files there: the plugin does AutoMTLS
		cmd.Env = append(cmd.Env, pluginrpc.CertFDEnv+"="+strconv.Itoa(pluginrpc.CertFD))
		cmd.ExtraFiles = []*os.File{certW} // pluginrpc.CertFD
	}
	dieWithHost(cmd)
	// go-plugin hashes the entry just before exec, unless this server
	// verified these very bytes before (knownEntries: same inode, size and
	// change time, which every write or replacement changes).
	var secure *goplugin.SecureConfig
	before := integrity.FingerprintOf(p.entry)
	if !knownEntries.Good(p.entry, p.m.SHA256, before) {
		secure = &goplugin.SecureConfig{Checksum: p.sum, Hash: sha256.New()}
	}
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  pluginrpc.Handshake,
		VersionedPlugins: hostPlugins(),
		Cmd:              cmd,
		SkipHostEnv:      true,
		SecureConfig:     secure,
		TLSConfig:        tlsConfig,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		StartTimeout:     p.opts.StartTimeout,
		Logger:           newHCLog(p.log, "go-plugin"),
	})
	inst, desc, err := p.connect(ctx, client, tlsConfig, certR, certW)
	if err == nil && secure != nil {
		knownEntries.Remember(p.entry, p.m.SHA256, before)
	}
	if err != nil {
		client.Kill()
		if errors.Is(err, goplugin.ErrChecksumsDoNotMatch) {
			return nil, described{}, fmt.Errorf("refusing to start %q: %w (checked just before exec)", p.m.Entry, plugins.ErrChecksumMismatch)
		}
		if v, ok := unknownVersion(err); ok {
			return nil, described{}, fmt.Errorf("%w: %q speaks Kiln plugin protocol %s; this Kiln speaks %s (rebuild the plugin with a matching sdk/plugin, or upgrade Kiln)",
				plugins.ErrTransport, p.m.Entry, v, versionList(pluginrpc.Versions))
		}
		return nil, described{}, fmt.Errorf("%w: start %q: %w", plugins.ErrTransport, p.m.Entry, err)
	}
	return inst, desc, nil
}

// reVersion finds the plugin's version in go-plugin's refusal of a
// protocol version the host does not speak.
var reVersion = regexp.MustCompile(`(?i)incompatible API version with plugin\. Plugin version: (\d+)`)

// unknownVersion returns the version a plugin asked for when err is
// go-plugin's refusal of it.
func unknownVersion(err error) (string, bool) {
	m := reVersion.FindStringSubmatch(err.Error())
	if m == nil {
		return "", false
	}
	return m[1], true
}

// versionList is "1, 2 and 3".
func versionList(vs []int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(v)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

func quoteKinds(cs []plugins.Capability) string {
	q := make([]string, len(cs))
	for i, c := range cs {
		q[i] = strconv.Quote(string(c))
	}
	return strings.Join(q, " and ")
}

// connect starts the process and learns its certificate, then completes
// the handshake on a new client, dispenses each kind the manifest lists,
// starts the host's callbacks (protocol 2) and asks the process to
// describe itself.
func (p *Plugin) connect(ctx context.Context, client *goplugin.Client, tlsConfig *tls.Config, certR, certW *os.File) (*instance, described, error) {
	pending := tlsConfig.RootCAs
	if _, err := client.Start(); err != nil {
		return nil, described{}, err
	}
	certW.Close() // the plugin holds the only write end now
	if tlsConfig.RootCAs == pending {
		// No certificate in the handshake line (go-plugin would have
		// trusted it): the plugin sent it on the pipe, before that line.
		cert, err := readCert(certR, time.Now().Add(p.opts.StartTimeout))
		if err != nil {
			return nil, described{}, fmt.Errorf("the plugin's certificate: %w", err)
		}
		pending.AddCert(cert)
	}
	rpcClient, err := client.Client()
	if err != nil {
		return nil, described{}, err
	}
	inst := &instance{client: client, version: client.NegotiatedVersion()}
	if rc := client.ReattachConfig(); rc != nil {
		inst.pid = rc.Pid
	}
	inst.conns = map[plugins.Capability]*Conn{}
	var broker *goplugin.GRPCBroker
	for _, c := range p.m.Provides {
		k, _ := lookupKind(c) // Load checked
		if k.Plugin(inst.version) == nil {
			return nil, described{}, fmt.Errorf("the plugin speaks Kiln plugin protocol %d, which carries only %s; it provides %q (rebuild it with a newer sdk/plugin)", inst.version, quoteKinds(carried(inst.version)), c)
		}
		raw, err := rpcClient.Dispense(string(c))
		if err != nil {
			return nil, described{}, fmt.Errorf("dispense %q: %w", c, err)
		}
		d, ok := raw.(dispensed)
		if !ok {
			return nil, described{}, fmt.Errorf("dispensed %T for %q", raw, c)
		}
		inst.conns[c] = &Conn{Client: d.client, Version: inst.version, inst: inst}
		inst.done, broker = d.done, d.broker
	}
	var hostID uint32
	if inst.version >= pluginrpc.ProtocolV2 && broker != nil {
		hostID = broker.NextId()
		go broker.AcceptAndServe(hostID, p.host.serve)
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.StartTimeout)
	defer cancel()
	desc := described{}
	for _, c := range p.m.Provides {
		conn := inst.conns[c]
		conn.Host = hostID
		k, _ := lookupKind(c)
		d, err := k.Describe(ctx, conn)
		if err != nil {
			return nil, described{}, fmt.Errorf("describe %q: %w", c, err)
		}
		desc[c] = d
	}
	return inst, desc, nil
}

// readCert reads the one PEM certificate a plugin writes on its
// certificate pipe, at most pluginrpc.MaxCertPEM bytes, by deadline.
func readCert(r *os.File, deadline time.Time) (*x509.Certificate, error) {
	if err := r.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	buf := make([]byte, pluginrpc.MaxCertPEM)
	n := 0
	for {
		m, err := r.Read(buf[n:])
		n += m
		if block, _ := pem.Decode(buf[:n]); block != nil {
			if block.Type != "CERTIFICATE" {
				return nil, fmt.Errorf("a PEM %q block, not a certificate", block.Type)
			}
			return x509.ParseCertificate(block.Bytes)
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil, fmt.Errorf("the plugin sent none (%d bytes)", n)
		case err != nil:
			return nil, err
		case n == len(buf):
			return nil, fmt.Errorf("no certificate in %d bytes", n)
		}
	}
}

// setLocked changes the state and wakes the waiters; p.mu is held.
func (p *Plugin) setLocked(inst *instance, state State) {
	p.inst, p.state = inst, state
	close(p.wake)
	p.wake = make(chan struct{})
}

// closedLocked reports whether Close was called; p.mu is held.
func (p *Plugin) closedLocked() bool { return p.state == StateClosed }

// closed reports whether Close was called.
func (p *Plugin) closed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closedLocked()
}

// watch waits for inst's process to exit, then calls died.
func (p *Plugin) watch(inst *instance) {
	defer p.wg.Done()
	select {
	case <-inst.done:
		p.died(inst)
	case <-p.stop:
	}
}

// died replaces inst, whose process exited, unless that was done already:
// the plugin is restarting until restart starts a new process.
func (p *Plugin) died(inst *instance) {
	p.mu.Lock()
	if p.inst != inst || p.closedLocked() {
		p.mu.Unlock()
		return
	}
	p.lastErr = "plugin process " + strconv.Itoa(inst.pid) + " exited"
	p.setLocked(nil, StateRestarting)
	p.wg.Add(1)
	p.mu.Unlock()
	p.log.Warn("plugin process exited; restarting", "pid", inst.pid)
	go func() {
		defer p.wg.Done()
		inst.client.Kill() // the process is gone; this releases go-plugin's resources
		p.restart()
	}()
}

// restart starts a new process, waiting a backoff before each attempt,
// until one serves, the restart budget is spent, the binary fails its
// checksum or Close is called.
func (p *Plugin) restart() {
	for {
		p.mu.Lock()
		if p.closedLocked() {
			p.mu.Unlock()
			return
		}
		now := p.opts.Now()
		p.attempts = slices.DeleteFunc(p.attempts, func(t time.Time) bool { return now.Sub(t) >= time.Minute })
		if len(p.attempts) >= p.opts.MaxRestartsPerMinute {
			p.lastErr = fmt.Sprintf("gave up after %d restarts within a minute; last error: %s", len(p.attempts), p.lastErr)
			msg := p.lastErr
			p.setLocked(nil, StateFailed)
			p.mu.Unlock()
			p.log.Error("plugin failed", "error", msg)
			return
		}
		delay := p.opts.backoff(len(p.attempts))
		p.attempts = append(p.attempts, now)
		p.restarts++
		p.mu.Unlock()

		select {
		case <-time.After(delay):
		case <-p.stop:
			return
		}
		inst, desc, err := p.start(context.Background())
		if err == nil && !desc.equal(p.desc) {
			inst.client.Kill()
			inst, err = nil, fmt.Errorf("%w: the restarted plugin describes itself differently", plugins.ErrTransport)
		}

		p.mu.Lock()
		if p.closedLocked() {
			p.mu.Unlock()
			if inst != nil {
				inst.client.Kill()
			}
			return
		}
		if err != nil {
			p.lastErr = err.Error()
			if errors.Is(err, plugins.ErrChecksumMismatch) {
				// The binary changed under the host: never run it.
				p.setLocked(nil, StateFailed)
				p.mu.Unlock()
				p.log.Error("plugin failed: its entry no longer matches the manifest", "error", err)
				return
			}
			p.mu.Unlock()
			p.log.Warn("plugin restart failed", "error", err)
			continue
		}
		p.setLocked(inst, StateRunning)
		p.wg.Add(1)
		p.mu.Unlock()
		p.log.Info("plugin restarted", "pid", inst.pid)
		go p.watch(inst)
		return
	}
}

// Health reports the plugin's state.
func (p *Plugin) Health() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Status{State: p.state, Restarts: p.restarts, LastError: p.lastErr}
	if p.inst != nil {
		s.PID = p.inst.pid
	}
	return s
}

// ready returns the serving process, waiting while the plugin restarts.
func (p *Plugin) ready(ctx context.Context) (*instance, error) {
	for {
		p.mu.Lock()
		inst, state, lastErr, wake := p.inst, p.state, p.lastErr, p.wake
		p.mu.Unlock()
		if inst != nil {
			select {
			case <-inst.done: // exited, and the watcher has not acted yet
				p.died(inst)
				continue
			default:
				return inst, nil
			}
		}
		switch {
		case state == StateClosed:
			return nil, fmt.Errorf("%w: closed", plugins.ErrTransport)
		case state == StateFailed:
			return nil, fmt.Errorf("%w: the plugin failed: %s", plugins.ErrTransport, lastErr)
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the plugin to restart: %w", ctx.Err())
		}
	}
}

// exitGrace is how long Do waits, after a call failed on the channel,
// to learn whether the process died.
const exitGrace = 500 * time.Millisecond

// exited reports whether inst's process exits within exitGrace.
func (p *Plugin) exited(inst *instance) bool {
	t := time.NewTimer(exitGrace)
	defer t.Stop()
	select {
	case <-inst.done:
		return true
	case <-t.C:
		return false
	}
}

// Close ends the plugin process (gracefully, then by force after two
// seconds) and stops restarting it. Calls after Close fail with
// plugins.ErrTransport. Close is idempotent and returns nil.
func (p *Plugin) Close() error {
	p.mu.Lock()
	if p.closedLocked() {
		p.mu.Unlock()
		return nil
	}
	inst := p.inst
	p.setLocked(nil, StateClosed)
	close(p.stop)
	p.mu.Unlock()
	if inst != nil {
		inst.client.Kill()
	}
	p.wg.Wait()
	p.log.Info("plugin closed")
	return nil
}

// Interface guard.
var _ plugins.Instance = (*Plugin)(nil)
