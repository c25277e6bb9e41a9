// Package service is Kiln's sandbox service: the lifecycle of sandboxes
// over the runtimes that plugins provide (sandbox.Runtime), with every
// sandbox's record in the Store (core.Sandbox, through RecordReader and
// RecordTx, which the service declares and a Store's transactions
// implement), so that expiry and the runtimes' handles survive a restart. The sandbox API (sandbox/api)
// serves it over HTTP in OpenSandbox's wire format.
//
// States are the sandbox API's: a create stores a Pending record before
// the runtime starts anything (so a crash in between leaves a record to
// clean up), then Running with the runtime's handle; Paused after a
// pause; Terminated after expiry (the record is kept for an hour, with
// the reason); Failed when the runtime lost the sandbox or could not
// start it. Delete destroys the sandbox and its record.
//
// Expiry is enforced by a reaper over the records, not by timers, so it
// holds across restarts. On Start the service reconciles the records
// with each runtime: a sandbox the runtime still has is recovered, one it
// lost is marked Failed with the reason, and one the runtime has but the
// Store does not know (a crash between the runtime's start and the
// record) is destroyed.
//
// A sandbox whose networkPolicy allows some hosts (network mode egress)
// has an egress gate in Kiln (sandbox/egress): a unix socket under
// Config.EgressDir that the runtime puts in the sandbox as its only way
// out, and that connects only to the allowed hosts. The gate opens before
// the runtime starts the sandbox, closes when the sandbox ends (destroyed,
// deleted, expired or failed), and opens again on Reconcile after a
// restart.
//
// Every sandbox has its own access token for the execution API, derived
// from the service's key and the sandbox's ID (HMAC-SHA256), so no token
// is ever stored.
package service

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/egress"
)

// Sandbox states, as the sandbox API names them.
const (
	StatePending    = "Pending"
	StateRunning    = "Running"
	StatePaused     = "Paused"
	StateTerminated = "Terminated"
	StateFailed     = "Failed"
)

// ExtRuntime is the create request's extensions key that picks the
// runtime for one sandbox, by the name it was added under (AddRuntime).
const ExtRuntime = "kiln.runtime"

// Config configures a Service.
type Config struct {
	Store core.Store
	// Key derives the sandboxes' access tokens: at least 32 random bytes
	// that stay the same across restarts (LoadKey).
	Key []byte
	// Default is the runtime that serves a create naming none; "" picks
	// the first of Preferred that is registered. An owner's choice
	// (Chosen) wins over it.
	Default string
	// Chosen returns the runtime an owner chose for the sandboxes they
	// create without naming one (their sandbox_runtime setting), or ""
	// when they chose none; nil means no owner chooses. A chosen runtime
	// that is not enabled (its plugin disabled since) is passed over for
	// Default, with a warning in the log.
	Chosen func(ctx context.Context, owner string) (string, error)
	// Preferred are the runtimes a server can have, in the order a create
	// naming none prefers them; a create when none is enabled is told to
	// enable one of them.
	Preferred []string
	// Grants lists an owner's folder grants: a host volume must lie in
	// one, and is read-only unless the grant is writable.
	Grants func(ctx context.Context, owner string) ([]*core.Grant, error)
	// MaxSandboxes bounds the live sandboxes of the server; zero means
	// 100. A create past it fails at once.
	MaxSandboxes int
	// MaxTimeout bounds a create's timeout; zero means a week.
	MaxTimeout time.Duration
	// DefaultTimeout is the lifetime of a sandbox whose create over the
	// API names no timeout (an explicit null is manual cleanup); zero
	// means DefaultCreateTimeout, negative none (manual cleanup, as
	// OpenSandbox's server). It must be whole seconds and at most
	// MaxTimeout.
	DefaultTimeout time.Duration
	// ReapEvery is the reaper's period; zero means one second.
	ReapEvery time.Duration
	// StartTimeout bounds a runtime's Start; zero means one minute.
	StartTimeout time.Duration
	// ThreadTTL is how long a thread's sandbox (ForThread) lives after
	// its last use; zero means DefaultThreadTTL.
	ThreadTTL time.Duration
	// EgressDir is the host folder of the sandboxes' egress sockets
	// (network mode egress: Kiln's end, sandbox/egress, enforces the
	// allowlist), created when missing (0700); "" refuses egress
	// creates with EUNAVAIL. Its path must leave room for a unix socket
	// (MaxEgressDir).
	EgressDir string
	// SkillsDir is the host folder of the skills staged into thread
	// sandboxes (StageSkill): a folder per sandbox, named by its ID and
	// mounted read-only at SkillsPath in each thread sandbox whose
	// runtime has Capabilities.Mounts. It is created when missing
	// (0700); "" stages no skills.
	SkillsDir string
	// Replica names this server when several share the Store (its
	// replica-id): its sandboxes' records carry it, and it reconciles,
	// reaps and pools only its own (and those of no replica, made before
	// replicas). "" on a single server.
	Replica string
	// Alive reports whether the server named replica still runs (its
	// presence is fresh). The reaper adopts the live sandboxes of a
	// server that is gone when this server's runtime of the same name
	// can recover them (a Docker engine both reach), and marks the others
	// Failed, reason "lost". nil: every other server is alive.
	Alive func(replica string) bool
	// Pools are the warm pools Start keeps filled.
	Pools  []PoolConfig
	Now    core.Clock
	Logger *slog.Logger
}

// Service runs sandboxes. It is safe for concurrent use.
type Service struct {
	cfg Config
	log *slog.Logger

	mu       sync.RWMutex
	runtimes map[string]sandbox.Runtime
	// creating counts the creates in flight, toward MaxSandboxes.
	creating int

	// pooled are the pools' waiting sandboxes by pool, oldest first, which
	// claimMu guards; fillMu orders the fillers' counts; refill wakes the
	// fillers.
	claimMu sync.Mutex
	pooled  map[string][]string
	fillMu  sync.Mutex
	refill  chan struct{}
	// lastClaim is when the last claim came (Unix nanoseconds).
	lastClaim atomic.Int64
	// claims counts each pool's claims that found a sandbox waiting and
	// those that did not, by pool name (set up at New, read-only after).
	claims map[string]*claimCounts
	// threads serialises ForThread by thread and runtime.
	threads threadLocks
	// staged are the fingerprints of the skills StageSkill copied, by
	// sandbox ID and skill name; stageMu guards it and orders the copies.
	stageMu sync.Mutex
	staged  map[string]string
	// onEnd are the OnEnd functions, and gates the egress gates of the
	// live sandboxes in network mode egress by ID, which mu guards.
	onEnd []func(id string)
	gates map[string]*egress.Gate
	// started is Start's context, once it was called (mu guards it).
	started context.Context
	// passedOver holds, by owner, the chosen runtime (Config.Chosen) last
	// passed over because it is not enabled, so that the log says so once.
	passedOver sync.Map
}

// OnEnd has f called with a sandbox's ID once it has ended: destroyed
// (Delete, the reaper, a deleted thread) or failed, so that what is kept
// for it elsewhere (the API's proxies) can go. f must not block.
func (s *Service) OnEnd(f func(id string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onEnd = append(s.onEnd, f)
}

func (s *Service) ended(id string) {
	s.closeGate(id)
	s.dropSkills(id)
	s.mu.RLock()
	fs := s.onEnd
	s.mu.RUnlock()
	for _, f := range fs {
		f(id)
	}
}

// LoadKey returns the key in the file at path, creating the file (mode
// 0600, 32 random bytes) when it is missing. The server keeps two such
// files: the sandboxes' (their tokens derive from it) and the triggers'
// (it seals the webhook secrets).
func LoadKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if len(b) < 32 {
			return nil, fmt.Errorf("key file %s holds %d bytes, fewer than 32; delete it to make a new one (what derives from it changes: the sandboxes' tokens, or the webhook secrets, which then need rotating)", path, len(b))
		}
		return b, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	b = make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadKey(path)
	}
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, err
	}
	return b, f.Close()
}

// DefaultCreateTimeout is the lifetime of a sandbox created over the API
// without a timeout, unless Config.DefaultTimeout says otherwise.
const DefaultCreateTimeout = 30 * time.Minute

// DefaultTimeout is the lifetime of a sandbox whose create names no
// timeout, or 0 when such a sandbox has none (manual cleanup).
func (s *Service) DefaultTimeout() time.Duration { return max(s.cfg.DefaultTimeout, 0) }

// New returns a Service; Start reconciles and starts the reaper. The
// Store must keep sandbox records (RecordReader, RecordTx): New checks
// with a View and an Update that writes nothing.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || len(cfg.Key) < 32 {
		return nil, errors.New("sandbox service: a Store and a key of at least 32 bytes are required")
	}
	if cfg.MaxSandboxes <= 0 {
		cfg.MaxSandboxes = 100
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = 7 * 24 * time.Hour
	}
	if cfg.DefaultTimeout == 0 {
		cfg.DefaultTimeout = min(DefaultCreateTimeout, cfg.MaxTimeout)
	}
	if cfg.DefaultTimeout > 0 && (cfg.DefaultTimeout > cfg.MaxTimeout || cfg.DefaultTimeout%time.Second != 0) {
		return nil, fmt.Errorf("sandbox service: the default timeout %s is not whole seconds up to the longest timeout %s", cfg.DefaultTimeout, cfg.MaxTimeout)
	}
	if cfg.ReapEvery <= 0 {
		cfg.ReapEvery = time.Second
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = time.Minute
	}
	if cfg.ThreadTTL <= 0 {
		cfg.ThreadTTL = DefaultThreadTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := checkPools(cfg); err != nil {
		return nil, err
	}
	if err := checkRecords(context.Background(), cfg.Store); err != nil {
		return nil, err
	}
	if cfg.SkillsDir != "" {
		if err := os.MkdirAll(cfg.SkillsDir, 0o700); err != nil {
			return nil, fmt.Errorf("sandbox service: %w", err)
		}
		if err := removeStaging(cfg.SkillsDir); err != nil {
			return nil, fmt.Errorf("sandbox service: skills folder: %w", err)
		}
	}
	if cfg.EgressDir != "" {
		if len(cfg.EgressDir) > MaxEgressDir {
			return nil, fmt.Errorf("sandbox service: the egress folder %s is %d bytes long, more than the %d a unix socket in it allows; use a shorter data root", cfg.EgressDir, len(cfg.EgressDir), MaxEgressDir)
		}
		if err := os.MkdirAll(cfg.EgressDir, 0o700); err != nil {
			return nil, fmt.Errorf("sandbox service: egress folder: %w", err)
		}
	}
	claims := map[string]*claimCounts{}
	for _, p := range cfg.Pools {
		claims[p.Name] = new(claimCounts)
	}
	return &Service{cfg: cfg, log: cfg.Logger, runtimes: map[string]sandbox.Runtime{}, pooled: map[string][]string{}, refill: make(chan struct{}, 1),
		claims: claims, gates: map[string]*egress.Gate{}}, nil
}

// AddRuntime makes a runtime available under name (its plugin's ID,
// which must be its Capabilities.Name); plugins/sandboxruntime calls it.
func (s *Service) AddRuntime(name string, r sandbox.Runtime) error {
	if got := r.Capabilities().Name; got != name {
		return fmt.Errorf("sandbox runtime %q calls itself %q", name, got)
	}
	s.mu.RLock()
	_, dup := s.runtimes[name]
	started := s.started
	s.mu.RUnlock()
	if dup {
		return fmt.Errorf("sandbox runtime %q is already added", name)
	}
	if started != nil {
		// Enabled on a running server: its sandboxes are recovered (and
		// their egress gates opened) before anything can use it, as at a
		// start, so that no create or claim races the reconciliation.
		recs, err := s.records(started)
		if err == nil {
			err = s.reconcileRuntime(started, name, r, recs)
		}
		if err != nil {
			s.log.Warn("reconcile the sandboxes of a runtime enabled", "runtime", name, "err", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.runtimes[name]; dup {
		return fmt.Errorf("sandbox runtime %q is already added", name)
	}
	s.runtimes[name] = r
	return nil
}

// RemoveRuntime withdraws a runtime; its sandboxes' operations then fail
// saying it is disabled, and their records stay.
func (s *Service) RemoveRuntime(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.runtimes, name)
}

// Runtimes lists the names of the runtimes available now, sorted.
func (s *Service) Runtimes() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.runtimes))
}

// runtime returns the runtime of a name, or EUNAVAIL saying it is not
// enabled.
func (s *Service) runtime(name string) (sandbox.Runtime, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if r := s.runtimes[name]; r != nil {
		return r, nil
	}
	have := slices.Sorted(maps.Keys(s.runtimes))
	if len(have) == 0 {
		return nil, core.Errorf(core.EUNAVAIL, "sandbox runtime %q is not enabled, and no sandbox runtime is (enable one with kiln plugin enable)", name)
	}
	return nil, core.Errorf(core.EUNAVAIL, "sandbox runtime %q is not enabled (enable its plugin with kiln plugin enable %s); enabled: %s", name, name, strings.Join(have, ", "))
}

// enableOneOf asks to enable the plugin of one of the runtimes names:
// "enable the docker, wasm or js plugin".
func enableOneOf(names []string) string {
	switch len(names) {
	case 0:
		return "enable one with kiln plugin enable"
	case 1:
		return "enable the " + names[0] + " plugin"
	}
	return "enable the " + strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1] + " plugin"
}

// DefaultRuntime is the runtime of owner's creates that name none: the
// one they chose (Config.Chosen) while it is enabled, else the server's
// (Config.Default, else the first of Preferred that is enabled), or ""
// when there is none. It fails only when reading the owner's choice
// fails. A chosen runtime passed over is logged as a warning, once until
// it is enabled again or the choice changes.
func (s *Service) DefaultRuntime(ctx context.Context, owner string) (string, error) {
	if s.cfg.Chosen == nil {
		return s.serverDefault(), nil
	}
	chosen, err := s.cfg.Chosen(ctx, owner)
	if err != nil {
		return "", fmt.Errorf("read the sandbox runtime of %s's settings: %w", owner, err)
	}
	if chosen == "" {
		return s.serverDefault(), nil
	}
	s.mu.RLock()
	enabled := s.runtimes[chosen] != nil
	s.mu.RUnlock()
	if enabled {
		s.passedOver.Delete(owner)
		return chosen, nil
	}
	name := s.serverDefault()
	if prev, seen := s.passedOver.Swap(owner, chosen); !seen || prev != chosen {
		s.log.Warn("the sandbox runtime chosen in the settings is not enabled: sandboxes created without a runtime go to the server's default until its plugin is enabled again or the setting changes",
			"owner", owner, "chosen", chosen, "runtime", name, "fix", "kiln plugin enable "+chosen+", or kiln settings set sandbox_runtime=NAME")
	}
	return name, nil
}

// serverDefault is the server's default runtime: Config.Default, else
// the first of Preferred that is enabled, else "".
func (s *Service) serverDefault() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.cfg.Default != "" {
		return s.cfg.Default
	}
	for _, name := range s.cfg.Preferred {
		if s.runtimes[name] != nil {
			return name
		}
	}
	return ""
}

// Token returns a sandbox's access token for the execution API.
func (s *Service) Token(id string) string {
	m := hmac.New(sha256.New, s.cfg.Key)
	m.Write([]byte("kiln sandbox exec token\x00" + id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// CheckToken reports whether token is the sandbox's, in constant time.
func (s *Service) CheckToken(id, token string) bool {
	return token != "" && subtle.ConstantTimeCompare([]byte(s.Token(id)), []byte(token)) == 1
}

// CreateRequest asks for a sandbox. Timeout nil means manual cleanup.
type CreateRequest struct {
	Image      string
	Entrypoint []string
	Timeout    *int
	Resources  map[string]string
	Env        map[string]string
	Metadata   map[string]string
	Network    NetworkPolicy
	Volumes    []Volume
	Extensions map[string]string
}

// NetworkPolicy is the create request's networkPolicy: DefaultAction
// "deny" (or "") with Egress rules allowing targets, or "allow".
type NetworkPolicy struct {
	DefaultAction string       `json:"defaultAction,omitempty"`
	Egress        []EgressRule `json:"egress,omitempty"`
}

// EgressRule allows or denies one target (a host, "*.example.com").
type EgressRule struct {
	Action string `json:"action"`
	Target string `json:"target"`
}

// Volume is a host folder to mount: HostPath must lie in one of the
// owner's folder grants.
type Volume struct {
	Name      string `json:"name"`
	HostPath  string `json:"hostPath"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
	SubPath   string `json:"subPath,omitempty"`
}

// request is what a record keeps of the create request (no env values).
type request struct {
	Image      string            `json:"image,omitempty"`
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Timeout    *int              `json:"timeout,omitempty"`
	Resources  map[string]string `json:"resourceLimits,omitempty"`
	EnvNames   []string          `json:"envNames,omitempty"`
	Network    NetworkPolicy     `json:"networkPolicy"`
	Volumes    []Volume          `json:"volumes,omitempty"`
	Extensions map[string]string `json:"extensions,omitempty"`
}

var (
	reMetaKey = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	reMetaVal = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`)
	reCPU     = regexp.MustCompile(`^([0-9]+)(m?)$|^([0-9]*\.[0-9]+)$`)
	reMem     = regexp.MustCompile(`^([0-9]+)(Ki|Mi|Gi|K|M|G)?$`)
)

// checkMetadata checks keys and values by the rules of Kubernetes labels,
// as OpenSandbox does; the prefixes opensandbox.io/ and kiln.io/ are
// reserved.
func checkMetadata(m map[string]string, allowNull map[string]bool) error {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if strings.HasPrefix(k, "opensandbox.io/") || strings.HasPrefix(k, "kiln.io/") {
			return core.Errorf(core.EINVALID, "metadata key %q: the prefixes opensandbox.io/ and kiln.io/ are reserved", k)
		}
		if !reMetaKey.MatchString(k) || len(k) > 317 {
			return core.Errorf(core.EINVALID, "metadata key %q: want a label key (an optional DNS prefix and '/', then up to 63 letters, digits, '-', '_' or '.')", k)
		}
		if allowNull[k] {
			continue
		}
		if !reMetaVal.MatchString(m[k]) {
			return core.Errorf(core.EINVALID, "metadata %q: value %q: want up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", k, m[k])
		}
	}
	return nil
}

// CheckResources checks resource amounts as resourceLimits takes them
// and returns them in the runtime's terms.
func CheckResources(m map[string]string) (sandbox.Resources, error) { return resources(m) }

// mebibytes reads the size v of resourceLimits.k in Kubernetes'
// notation (bytes, or K, M, G and Ki, Mi, Gi; the decimal ones read as
// the binary) in MiB, between 1 MiB and 1 TiB.
func mebibytes(k, v string) (int, error) {
	g := reMem.FindStringSubmatch(v)
	if g == nil {
		return 0, core.Errorf(core.EINVALID, "resourceLimits.%s %q: want a size such as 512Mi or 2Gi", k, v)
	}
	n, _ := strconv.ParseInt(g[1], 10, 64)
	switch g[2] {
	case "", "K", "Ki":
		if g[2] == "" {
			n >>= 10
		}
		n >>= 10
	case "G", "Gi":
		n <<= 10
	}
	if n <= 0 || n > 1<<20 {
		return 0, core.Errorf(core.EINVALID, "resourceLimits.%s %q: want between 1 MiB and 1 TiB", k, v)
	}
	return int(n), nil
}

// resources turns resourceLimits into the runtime's terms.
func resources(m map[string]string) (sandbox.Resources, error) {
	var r sandbox.Resources
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := strings.TrimSpace(m[k])
		switch k {
		case "cpu":
			g := reCPU.FindStringSubmatch(v)
			switch {
			case g == nil:
				return r, core.Errorf(core.EINVALID, "resourceLimits.cpu %q: want cores (\"1\", \"0.5\") or millicores (\"500m\")", v)
			case g[3] != "":
				f, _ := strconv.ParseFloat(g[3], 64)
				r.CPUMillis = int(f * 1000)
			default:
				n, _ := strconv.Atoi(g[1])
				if g[2] == "" {
					n *= 1000
				}
				r.CPUMillis = n
			}
		case "memory":
			n, err := mebibytes(k, v)
			if err != nil {
				return r, err
			}
			r.MemoryMiB = n
		case "disk", "ephemeral-storage":
			n, err := mebibytes(k, v)
			if err != nil {
				return r, err
			}
			r.DiskMiB = n
		default:
			return r, core.Errorf(core.EINVALID, "resourceLimits.%s: Kiln takes cpu, memory and disk (a GPU cannot be given to a sandbox here)", k)
		}
	}
	return r, nil
}

// network turns a networkPolicy into the runtime's terms, and the deny
// rules that Kiln's egress gate applies over the allowlist (the runtime
// never sees them).
func network(p NetworkPolicy) (netw sandbox.Network, deny []string, err error) {
	switch p.DefaultAction {
	case "allow":
		for _, e := range p.Egress {
			if e.Action == "deny" {
				return sandbox.Network{}, nil, core.Errorf(core.EINVALID, "networkPolicy: deny rules under defaultAction allow are not supported; use defaultAction deny with allow rules")
			}
		}
		return sandbox.Network{Mode: sandbox.NetworkOpen}, nil, nil
	case "", "deny":
		var allow []string
		for _, e := range p.Egress {
			t := strings.ToLower(strings.TrimSpace(e.Target))
			switch {
			case e.Action != "allow" && e.Action != "deny":
				return sandbox.Network{}, nil, core.Errorf(core.EINVALID, "networkPolicy.egress: action %q: want allow or deny", e.Action)
			case t == "":
				return sandbox.Network{}, nil, core.Errorf(core.EINVALID, "networkPolicy.egress: a rule needs a target")
			}
			if err := egress.CheckAllow([]string{t}); err != nil {
				return sandbox.Network{}, nil, core.Errorf(core.EINVALID, "networkPolicy.egress: %v", err)
			}
			if e.Action == "allow" {
				allow = append(allow, t)
			} else {
				deny = append(deny, t)
			}
		}
		if len(allow) == 0 {
			// Nothing allowed: the deny rules have nothing to carve from.
			return sandbox.Network{Mode: sandbox.NetworkNone}, nil, nil
		}
		return sandbox.Network{Mode: sandbox.NetworkEgress, Allow: allow}, deny, nil
	}
	return sandbox.Network{}, nil, core.Errorf(core.EINVALID, "networkPolicy.defaultAction %q: want allow or deny", p.DefaultAction)
}

// mounts resolves host volumes against the owner's grants: each host path
// must be, or lie in, a granted folder, and is read-only unless the grant
// is writable (a writable volume on a read-only grant is refused).
func (s *Service) mounts(ctx context.Context, owner string, vols []Volume) ([]sandbox.Mount, error) {
	if len(vols) == 0 {
		return nil, nil
	}
	if s.cfg.Grants == nil {
		return nil, core.Errorf(core.EINVALID, "volumes: this server grants no host folders to sandboxes")
	}
	grants, err := s.cfg.Grants(ctx, owner)
	if err != nil {
		return nil, err
	}
	var out []sandbox.Mount
	for i, v := range vols {
		host := v.HostPath
		if v.SubPath != "" {
			host = filepath.Join(host, v.SubPath)
		}
		if host == "" || !filepath.IsAbs(host) {
			return nil, core.Errorf(core.EINVALID, "volumes[%d]: host.path must be an absolute path", i)
		}
		real, err := filepath.EvalSymlinks(host)
		if err != nil {
			return nil, core.Errorf(core.EINVALID, "volumes[%d]: host path %s: %v", i, host, errors.Unwrap(err))
		}
		var g *core.Grant
		for _, c := range grants {
			if rel, err := filepath.Rel(c.Path, real); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				g = c
				break
			}
		}
		if g == nil {
			return nil, core.Errorf(core.EFORBIDDEN, "volumes[%d]: host path %s is not in a folder granted to Kiln (grant it with kiln grants add)", i, host)
		}
		if !v.ReadOnly && !g.Writable {
			return nil, core.Errorf(core.EFORBIDDEN, "volumes[%d]: %s is in the read-only grant %q; set readOnly: true or make the grant writable", i, host, g.Name)
		}
		if err := sandbox.CheckPath("mount", v.MountPath); err != nil || v.MountPath == "/" {
			return nil, core.Errorf(core.EINVALID, "volumes[%d]: mountPath %q: want an absolute, clean path other than /", i, v.MountPath)
		}
		out = append(out, sandbox.Mount{HostPath: real, Path: v.MountPath, ReadOnly: v.ReadOnly || !g.Writable})
	}
	return out, nil
}

// live are the states of a sandbox that has (or is getting) a runtime's
// resources.
var live = []string{StatePending, StatePooled, StateRunning, StatePaused}

// newID returns a sandbox ID: a UUID, as OpenSandbox's are.
func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("sandbox: crypto/rand failed: " + err.Error())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Create starts a sandbox for owner and returns its record once it runs.
// It fails at once, changing nothing, for a bad request (EINVALID), a
// host path outside the grants (EFORBIDDEN), a runtime that is not
// enabled (EUNAVAIL), a full server (ELIMIT), or what the runtime cannot
// do (sandbox.ErrUnsupported); when the runtime fails to start it, the
// record stays Failed with the reason.
func (s *Service) Create(ctx context.Context, owner string, req CreateRequest) (*core.Sandbox, error) {
	if err := checkMetadata(req.Metadata, nil); err != nil {
		return nil, err
	}
	return s.create(ctx, owner, req, false)
}

// create is Create for a request whose metadata Kiln set (its reserved
// keys allowed). With skills, on a runtime with mounts and a SkillsDir,
// the sandbox gets its skills folder (StageSkill) at SkillsPath.
func (s *Service) create(ctx context.Context, owner string, req CreateRequest, skills bool) (*core.Sandbox, error) {
	name := req.Extensions[ExtRuntime]
	if name == "" {
		var err error
		if name, err = s.DefaultRuntime(ctx, owner); err != nil {
			return nil, err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(req.Extensions)) {
		switch k {
		case ExtRuntime:
		case "poolRef":
			return nil, sandbox.Unsupported(name, "pools over the API (poolRef); Kiln's warm pools are set in its settings")
		case "access.renew.extend.seconds":
			return nil, sandbox.Unsupported(name, "renew on access (access.renew.extend.seconds)")
		default:
			return nil, core.Errorf(core.EINVALID, "extensions.%s: unknown extension (Kiln takes %s)", k, ExtRuntime)
		}
	}
	if name == "" {
		return nil, core.Errorf(core.EUNAVAIL, "no sandbox runtime is enabled (%s)", enableOneOf(s.cfg.Preferred))
	}
	r, err := s.runtime(name)
	if err != nil {
		return nil, err
	}
	res, err := resources(req.Resources)
	if err != nil {
		return nil, err
	}
	netw, deny, err := network(req.Network)
	if err != nil {
		return nil, err
	}
	var expires *time.Time
	now := s.cfg.Now()
	if req.Timeout != nil {
		d := time.Duration(*req.Timeout) * time.Second
		if *req.Timeout < 1 || d > s.cfg.MaxTimeout {
			return nil, core.Errorf(core.EINVALID, "timeout %d: want seconds between 1 and %d, or none for manual cleanup", *req.Timeout, int(s.cfg.MaxTimeout/time.Second))
		}
		t := now.Add(d)
		expires = &t
	}
	mounts, err := s.mounts(ctx, owner, req.Volumes)
	if err != nil {
		return nil, err
	}
	image, entrypoint, err := environment(r.Capabilities(), name, req)
	if err != nil {
		return nil, err
	}
	id := newID()
	skills = skills && s.cfg.SkillsDir != "" && r.Capabilities().Mounts
	if skills {
		mounts = append(mounts, sandbox.Mount{HostPath: s.skillsDir(id), Path: SkillsPath, ReadOnly: true})
	}
	spec := sandbox.Spec{ID: id, Image: image, Env: req.Env, Resources: res, Network: netw,
		Entrypoint: entrypoint, Mounts: mounts, ExecToken: s.Token(id)}
	if netw.Mode == sandbox.NetworkEgress && slices.Contains(r.Capabilities().Network, sandbox.NetworkEgress) {
		if s.cfg.EgressDir == "" {
			return nil, core.Errorf(core.EUNAVAIL, "networkPolicy: this server has no egress folder, so it runs no sandbox with an egress allowlist")
		}
		spec.EgressSocket = s.egressSocket(id)
	}
	if err := spec.Check(r.Capabilities()); err != nil {
		return nil, err
	}
	rec := &core.Sandbox{ID: id, OwnerID: owner, Runtime: name, Replica: s.cfg.Replica, Metadata: req.Metadata, State: StatePending,
		ExpiresAt: expires, CreatedAt: now, UpdatedAt: now, TransitionAt: now}
	rec.Request, _ = json.Marshal(request{Image: req.Image, Entrypoint: req.Entrypoint, Timeout: req.Timeout,
		Resources: req.Resources, EnvNames: slices.Sorted(maps.Keys(req.Env)), Network: req.Network,
		Volumes: req.Volumes, Extensions: req.Extensions})
	if p := s.poolFor(r.Capabilities(), req, spec); p != nil {
		claimed, err := s.claim(ctx, p, owner, rec)
		if err != nil || claimed != nil {
			return claimed, err
		}
	}
	if err := s.reserve(ctx); err != nil {
		return nil, err
	}
	defer s.release()
	if err := s.put(ctx, rec); err != nil {
		return nil, err
	}
	if err := s.openGate(id, netw, deny); err != nil {
		s.fail(rec, "start_failed", err)
		return nil, err
	}
	if skills {
		if err := mkdirShared(s.skillsDir(id)); err != nil {
			s.fail(rec, "start_failed", err)
			return nil, err
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.StartTimeout)
	defer cancel()
	h, err := r.Start(sctx, spec)
	if err != nil {
		s.fail(rec, "start_failed", err)
		return nil, err
	}
	if err := s.transition(context.WithoutCancel(ctx), rec, StateRunning, "", "", &h); err != nil {
		_ = r.Destroy(context.WithoutCancel(ctx), h)
		s.closeGate(id)
		return nil, err
	}
	return rec, nil
}

// MaxEgressDir is the longest Config.EgressDir: a unix socket's path is
// at most 107 bytes, and a sandbox's is <EgressDir>/<16 hex>/egress.sock.
const MaxEgressDir = 107 - len("/0123456789abcdef/egress.sock")

// egressSocket is the host path of a sandbox's egress socket, alone in a
// folder of its own, named by a short hash of the ID (a socket's path is
// short, and an ID may be 128 bytes).
func (s *Service) egressSocket(id string) string {
	sum := sha256.Sum256([]byte(id))
	return filepath.Join(s.cfg.EgressDir, hex.EncodeToString(sum[:8]), "egress.sock")
}

// openGate opens the egress gate of a sandbox in network mode egress,
// with the networkPolicy's deny rules over its allowlist (once: a gate
// already open stays), creating its folder; for any other mode it does
// nothing.
func (s *Service) openGate(id string, netw sandbox.Network, deny []string) error {
	if netw.Mode != sandbox.NetworkEgress || s.cfg.EgressDir == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gates[id] != nil {
		return nil
	}
	path := s.egressSocket(id)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("sandbox %s: egress folder: %w", id, err)
	}
	g, err := egress.Listen(path, netw.Allow, deny, s.log.With("sandbox", id))
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	s.gates[id] = g
	return nil
}

// closeGate closes a sandbox's egress gate, when it has one, and removes
// its folder.
func (s *Service) closeGate(id string) {
	s.mu.Lock()
	g := s.gates[id]
	delete(s.gates, id)
	s.mu.Unlock()
	if g == nil {
		return
	}
	g.Close()
	if err := os.RemoveAll(filepath.Dir(s.egressSocket(id))); err != nil {
		s.log.Warn("remove a sandbox's egress folder", "sandbox", id, "err", err)
	}
}

// reopenGate opens the egress gate of a live record whose request asked
// for an egress allowlist, as a restarted server must.
func (s *Service) reopenGate(rec *core.Sandbox) error {
	var req request
	if err := json.Unmarshal(rec.Request, &req); err != nil {
		return fmt.Errorf("sandbox %s: stored request: %w", rec.ID, err)
	}
	netw, deny, err := network(req.Network)
	if err != nil {
		return fmt.Errorf("sandbox %s: stored networkPolicy: %w", rec.ID, err)
	}
	return s.openGate(rec.ID, netw, deny)
}

// keepRunning are the entrypoints that only keep a container alive, which
// OpenSandbox's SDKs send by default.
var keepRunning = [][]string{{"tail", "-f", "/dev/null"}, {"sleep", "infinity"}}

// environment is the image and entrypoint the runtime gets. A runtime
// without images has one environment: a create names it by the runtime's
// name as its image (or none), and only an entrypoint that keeps the
// sandbox running, which such a sandbox does anyway.
func environment(c sandbox.Capabilities, name string, req CreateRequest) (string, []string, error) {
	if c.Images {
		return req.Image, req.Entrypoint, nil
	}
	if req.Image != "" && req.Image != name {
		return "", nil, core.Errorf(core.EINVALID, "sandbox runtime %q has one environment and takes no image; name it as the image %q, or give none", name, name)
	}
	if len(req.Entrypoint) > 0 && !slices.ContainsFunc(keepRunning, func(k []string) bool { return slices.Equal(k, req.Entrypoint) }) {
		return "", nil, sandbox.Unsupported(name, "an entrypoint (its sandboxes run commands, not a main process)")
	}
	return "", nil, nil
}

// reserve counts a create against MaxSandboxes, or fails with ELIMIT.
func (s *Service) reserve(ctx context.Context) error {
	var n int
	err := s.view(ctx, func(tx storeReadTx) error {
		list, err := tx.Sandboxes(core.SandboxQuery{States: live})
		n = len(list)
		return err
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n+s.creating >= s.cfg.MaxSandboxes {
		return core.Errorf(core.ELIMIT, "the server runs %d sandboxes, its limit; delete one first", s.cfg.MaxSandboxes)
	}
	s.creating++
	return nil
}

func (s *Service) release() {
	s.mu.Lock()
	s.creating--
	s.mu.Unlock()
}

func (s *Service) put(ctx context.Context, rec *core.Sandbox) error {
	return s.update(ctx, func(tx storeTx) error { return tx.PutSandbox(rec) })
}

// transition moves rec to a state (with its handle when h is set) and
// stores it.
func (s *Service) transition(ctx context.Context, rec *core.Sandbox, state, reason, msg string, h *sandbox.Handle) error {
	now := s.cfg.Now()
	if h != nil {
		b, err := json.Marshal(h)
		if err != nil {
			return err
		}
		rec.Handle = b
	}
	if rec.State != state {
		rec.TransitionAt = now
	}
	rec.State, rec.Reason, rec.Message, rec.UpdatedAt = state, reason, msg, now
	if err := s.put(ctx, rec); err != nil {
		return err
	}
	if state == StateTerminated || state == StateFailed {
		s.ended(rec.ID)
	}
	return nil
}

// mine reports whether rec's sandbox is this server's to run: its
// runtime holds it (Replica this server's), or it was made before
// replicas (Replica "").
func (s *Service) mine(rec *core.Sandbox) bool {
	return rec.Replica == "" || rec.Replica == s.cfg.Replica
}

// onlyMine is recs without other servers' sandboxes.
func (s *Service) onlyMine(recs []*core.Sandbox) []*core.Sandbox {
	return slices.DeleteFunc(recs, func(rec *core.Sandbox) bool { return !s.mine(rec) })
}

// fail records that a sandbox failed, with the reason.
func (s *Service) fail(rec *core.Sandbox, reason string, err error) {
	if perr := s.transition(context.Background(), rec, StateFailed, reason, err.Error(), nil); perr != nil {
		s.log.Error("record a failed sandbox", "sandbox", rec.ID, "err", perr)
	}
}

// Get returns one of owner's sandboxes, ENOTFOUND for another's.
func (s *Service) Get(ctx context.Context, owner, id string) (*core.Sandbox, error) {
	var rec *core.Sandbox
	err := s.view(ctx, func(tx storeReadTx) (err error) {
		rec, err = tx.Sandbox(id)
		return err
	})
	if err == nil && rec.OwnerID != owner {
		err = core.Errorf(core.ENOTFOUND, "sandbox %q not found", id)
	}
	return rec, err
}

// Holder names the server whose runtime holds sandbox id (its record's
// Replica: "" for this one on a single server), whoever its owner.
func (s *Service) Holder(ctx context.Context, id string) (string, error) {
	var rec *core.Sandbox
	err := s.view(ctx, func(tx storeReadTx) (err error) {
		rec, err = tx.Sandbox(id)
		return err
	})
	if err != nil {
		return "", err
	}
	return rec.Replica, nil
}

// ListQuery filters List: States (OR), Metadata (every pair must match),
// Page from 1 and PageSize up to 200 (zero: 20).
type ListQuery struct {
	States   []string
	Metadata map[string]string
	Page     int
	PageSize int
}

// Page is one page of List.
type Page struct {
	Items      []*core.Sandbox
	Page       int
	PageSize   int
	TotalItems int
}

// List lists owner's sandboxes, newest first.
func (s *Service) List(ctx context.Context, owner string, q ListQuery) (*Page, error) {
	if q.Page <= 0 {
		q.Page = 1
	}
	switch {
	case q.PageSize == 0:
		q.PageSize = 20
	case q.PageSize < 0 || q.PageSize > 200:
		return nil, core.Errorf(core.EINVALID, "pageSize %d: want 1 to 200", q.PageSize)
	}
	var all []*core.Sandbox
	err := s.view(ctx, func(tx storeReadTx) (err error) {
		all, err = tx.Sandboxes(core.SandboxQuery{OwnerID: owner, States: q.States})
		return err
	})
	if err != nil {
		return nil, err
	}
	all = slices.DeleteFunc(all, func(sb *core.Sandbox) bool {
		for k, v := range q.Metadata {
			if sb.Metadata[k] != v {
				return true
			}
		}
		return false
	})
	p := &Page{Page: q.Page, PageSize: q.PageSize, TotalItems: len(all), Items: []*core.Sandbox{}}
	if from := (q.Page - 1) * q.PageSize; from < len(all) {
		p.Items = all[from:min(len(all), from+q.PageSize)]
	}
	return p, nil
}

// handleOf returns a record's runtime and handle, or why they cannot be
// used (a sandbox that is not running, a runtime that is not enabled).
func (s *Service) handleOf(rec *core.Sandbox) (sandbox.Runtime, sandbox.Handle, error) {
	var h sandbox.Handle
	if rec.State == StatePending || len(rec.Handle) == 0 {
		return nil, h, core.Errorf(core.ECONFLICT, "sandbox %s is %s", rec.ID, strings.ToLower(rec.State))
	}
	if rec.State == StateTerminated || rec.State == StateFailed {
		return nil, h, core.Errorf(core.ECONFLICT, "sandbox %s is %s: %s", rec.ID, strings.ToLower(rec.State), rec.Message)
	}
	if err := json.Unmarshal(rec.Handle, &h); err != nil {
		return nil, h, fmt.Errorf("sandbox %s: stored handle: %w", rec.ID, err)
	}
	r, err := s.runtime(rec.Runtime)
	return r, h, err
}

// Open returns the runtime and handle of one of owner's running
// sandboxes, for the execution API.
func (s *Service) Open(ctx context.Context, owner, id string) (*core.Sandbox, sandbox.Runtime, sandbox.Handle, error) {
	rec, err := s.Get(ctx, owner, id)
	if err != nil {
		return nil, nil, sandbox.Handle{}, err
	}
	r, h, err := s.handleOf(rec)
	return rec, r, h, err
}

// Delete destroys one of owner's sandboxes and its record.
func (s *Service) Delete(ctx context.Context, owner, id string) error {
	rec, err := s.Get(ctx, owner, id)
	if err != nil {
		return err
	}
	if err := s.destroy(ctx, rec); err != nil {
		return err
	}
	err = s.update(ctx, func(tx storeTx) error { return tx.DeleteSandbox(id) })
	if err == nil {
		s.ended(id)
	}
	return err
}

// destroy destroys a record's sandbox in its runtime, when it has one.
func (s *Service) destroy(ctx context.Context, rec *core.Sandbox) error {
	if len(rec.Handle) == 0 || rec.State == StateTerminated || rec.State == StateFailed {
		return nil
	}
	var h sandbox.Handle
	if err := json.Unmarshal(rec.Handle, &h); err != nil {
		return fmt.Errorf("sandbox %s: stored handle: %w", rec.ID, err)
	}
	r, err := s.runtime(rec.Runtime)
	if err != nil {
		return err
	}
	if err := r.Destroy(ctx, h); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return err
	}
	return nil
}

// Pause pauses one of owner's running sandboxes.
func (s *Service) Pause(ctx context.Context, owner, id string) (*core.Sandbox, error) {
	return s.setPaused(ctx, owner, id, true)
}

// Resume resumes one of owner's paused sandboxes.
func (s *Service) Resume(ctx context.Context, owner, id string) (*core.Sandbox, error) {
	return s.setPaused(ctx, owner, id, false)
}

func (s *Service) setPaused(ctx context.Context, owner, id string, pause bool) (*core.Sandbox, error) {
	rec, err := s.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	want, from, op := StatePaused, StateRunning, sandbox.Pause
	if !pause {
		want, from, op = StateRunning, StatePaused, sandbox.Resume
	}
	if rec.State != from && rec.State != want {
		return nil, core.Errorf(core.ECONFLICT, "sandbox %s is %s; only a %s sandbox can be %s", id, strings.ToLower(rec.State),
			strings.ToLower(from), map[bool]string{true: "paused", false: "resumed"}[pause])
	}
	r, h, err := s.handleOf(rec)
	if err != nil {
		return nil, err
	}
	if err := op(ctx, r, h); err != nil {
		return nil, err
	}
	return rec, s.transition(ctx, rec, want, "", "", nil)
}

// Renew sets a new expiry: in the future, for a sandbox that expires.
func (s *Service) Renew(ctx context.Context, owner, id string, at time.Time) (*core.Sandbox, error) {
	rec, err := s.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	switch {
	case rec.ExpiresAt == nil:
		return nil, core.Errorf(core.ECONFLICT, "sandbox %s was created without a timeout (manual cleanup): it has no expiry to renew", id)
	case !slices.Contains(live, rec.State):
		return nil, core.Errorf(core.ECONFLICT, "sandbox %s is %s", id, strings.ToLower(rec.State))
	case !at.After(s.cfg.Now()):
		return nil, core.Errorf(core.EINVALID, "expiresAt %s is not in the future", at.UTC().Format(time.RFC3339))
	case at.Sub(rec.CreatedAt) > s.cfg.MaxTimeout:
		return nil, core.Errorf(core.EINVALID, "expiresAt %s is more than %s after the sandbox was created", at.UTC().Format(time.RFC3339), s.cfg.MaxTimeout)
	}
	t := at.UTC()
	rec.ExpiresAt, rec.UpdatedAt = &t, s.cfg.Now()
	return rec, s.put(ctx, rec)
}

// PatchMetadata applies a JSON merge patch to a sandbox's metadata: a
// nil value deletes the key.
func (s *Service) PatchMetadata(ctx context.Context, owner, id string, patch map[string]*string) (*core.Sandbox, error) {
	nulls, vals := map[string]bool{}, map[string]string{}
	for k, v := range patch {
		if v == nil {
			nulls[k] = true
			vals[k] = ""
		} else {
			vals[k] = *v
		}
	}
	if err := checkMetadata(vals, nulls); err != nil {
		return nil, err
	}
	rec, err := s.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	m := maps.Clone(rec.Metadata)
	if m == nil {
		m = map[string]string{}
	}
	for k, v := range patch {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = *v
		}
	}
	rec.Metadata, rec.UpdatedAt = m, s.cfg.Now()
	return rec, s.put(ctx, rec)
}
