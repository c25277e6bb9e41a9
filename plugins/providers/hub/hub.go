package hub

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/netguard"
	"github.com/kilnhq/kiln/plugins/providers"
)

// Provider states.
const (
	StateReady         = "ready"
	StateNotConfigured = "not_configured"
	StateDisabled      = "disabled"
	StateError         = "error"
)

// BareProvider is the provider Models names for the bare models.
const BareProvider = "builtin"

// maxValue bounds a stored setting.
const maxValue = 4096

// Config configures a Hub.
type Config struct {
	// Path is the file holding what the user configured:
	// <data>/providers.json, mode 0600.
	Path string
	// Defs are the built-in providers; the server passes Registered().
	Defs []Def
	// Getenv reads the server's environment; nil means os.Getenv.
	Getenv func(string) string
	// ClientFor returns the HTTP client of a provider allowed perms; nil
	// means netguard.NewClient.
	ClientFor func(perms plugins.Permissions) *http.Client
	// Retry is the policy of retryable failures.
	Retry providers.RetryPolicy
	// ModelsTTL is how long a live model list is kept; default 5 minutes.
	ModelsTTL time.Duration
	// CheckTTL is how long the answer of a provider's Check is kept, so
	// that describing the providers stays fast; default 30 seconds.
	// CheckTimeout bounds one Check; default 2 seconds.
	CheckTTL, CheckTimeout time.Duration
	// Now is the clock of the kept checks; nil means time.Now.
	Now func() time.Time
	// Default is the server's default model.
	Default string
	Logger  *slog.Logger
	// Redactor learns every secret setting's value as soon as it is
	// resolved (from the environment or the credentials file), before any
	// provider uses it, so an upstream that echoes a key in its error text
	// cannot leak it; nil means none.
	Redactor *core.Redactor
}

// Hub is the server's set of model providers. It is safe for concurrent
// use.
type Hub struct {
	cfg  Config
	defs map[string]*Def
	log  *slog.Logger

	mu       sync.Mutex
	order    []string                     // provider IDs, in the order they were added
	bare     []BareModel                  // models referenced by bare name, in the order added
	stored   map[string]map[string]string // provider -> setting -> value or ${ENV}
	live     map[string]*live
	disabled map[string]bool
	models   map[string]modelList
	checks   map[string]checked
}

// Checker is implemented by a provider whose API may simply not be there,
// such as Ollama, a server on the user's machine that may not be running:
// describing such a provider asks it, rather than calling it ready until
// a run fails. Check reports, within ctx (CheckTimeout), whether the API
// answers; its error, in plain words such as "cannot reach Ollama at
// http://127.0.0.1:11434: connection refused", becomes the provider's
// Error in state "error". The hub keeps the answer CheckTTL, and asks
// again sooner when the settings change. Providers that do not implement
// it are ready once configured.
type Checker interface {
	Check(ctx context.Context) error
}

// live is a provider built from one set of resolved settings.
type live struct {
	key string // the resolved settings it was built from
	p   providers.Provider
	raw providers.Provider // p without the retries, for optional interfaces
}

// checked is the answer of a provider's Check.
type checked struct {
	at  time.Time
	key string // the resolved settings it was asked with
	err string // "" when the API answered
}

type modelList struct {
	at     time.Time
	key    string
	models []providers.ModelInfo
	err    string
}

// file is providers.json. Version 0 (no "version") is read as version 1:
// the two are the same.
type file struct {
	Version   int                          `json:"version"`
	Providers map[string]map[string]string `json:"providers"`
}

// fileVersion is the version of providers.json the hub writes.
const fileVersion = 1

// Open reads the configuration file (a missing one is empty). A file that
// others can read is made private (0600) and the change logged.
func Open(cfg Config) (*Hub, error) {
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.ClientFor == nil {
		cfg.ClientFor = netguard.NewClient
	}
	if cfg.ModelsTTL <= 0 {
		cfg.ModelsTTL = 5 * time.Minute
	}
	if cfg.CheckTTL <= 0 {
		cfg.CheckTTL = 30 * time.Second
	}
	if cfg.CheckTimeout <= 0 {
		cfg.CheckTimeout = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h := &Hub{cfg: cfg, defs: map[string]*Def{}, log: cmp.Or(cfg.Logger, slog.Default()),
		stored: map[string]map[string]string{}, live: map[string]*live{}, disabled: map[string]bool{},
		models: map[string]modelList{}, checks: map[string]checked{}}
	for _, d := range cfg.Defs {
		h.defs[d.ID] = &d
		h.order = append(h.order, d.ID)
	}
	if err := h.read(); err != nil {
		return nil, err
	}
	// Resolving every provider now registers its secrets with the redactor.
	h.mu.Lock()
	for _, d := range h.defs {
		h.resolve(d)
	}
	h.mu.Unlock()
	return h, nil
}

// read loads the configuration file, if there is one.
func (h *Hub) read() error {
	cfg := h.cfg
	fi, err := os.Stat(cfg.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("providers: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(cfg.Path, 0o600); err != nil {
			return fmt.Errorf("providers: %s is readable by others and cannot be made private: %w", cfg.Path, err)
		}
		h.log.Warn("made the provider credentials file private (0600)", "path", cfg.Path)
	}
	data, err := os.ReadFile(cfg.Path)
	if err != nil {
		return fmt.Errorf("providers: %w", err)
	}
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("providers: read %s: %w (fix or remove the file)", cfg.Path, err)
	}
	if f.Version > fileVersion {
		return fmt.Errorf("providers: %s is version %d, written by a newer Kiln; this one reads up to version %d", cfg.Path, f.Version, fileVersion)
	}
	// Settings of a provider that is not added (yet: its plugin loads
	// later, or is disabled) are kept.
	for id, s := range f.Providers {
		if s != nil {
			h.stored[id] = s
		}
	}
	return nil
}

// Reload reads the configuration file again, for servers sharing it: the
// settings another server saved there replace this hub's (its providers
// are rebuilt from them at their next use, and their secrets known to the
// redactor now). A file that cannot be read leaves the settings as they
// were.
func (h *Hub) Reload() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	kept := h.stored
	h.stored = map[string]map[string]string{}
	if err := h.read(); err != nil {
		h.stored = kept
		return err
	}
	for _, d := range h.defs {
		h.resolve(d)
	}
	return nil
}

// save writes the configuration atomically, mode 0600; h.mu is held.
func (h *Hub) save() error {
	data, err := json.MarshalIndent(file{Version: fileVersion, Providers: h.stored}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(h.cfg.Path), 0o700); err != nil {
		return fmt.Errorf("save provider settings: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(h.cfg.Path), ".providers-*.json")
	if err != nil {
		return fmt.Errorf("save provider settings: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(append(data, '\n'))
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("save provider settings: %w", err)
	}
	if err := os.Rename(tmp.Name(), h.cfg.Path); err != nil {
		return fmt.Errorf("save provider settings: %w", err)
	}
	return nil
}

var reEnvRef = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)

// resolve returns a provider's settings: stored value (an environment
// reference expanded), else the first environment variable set, else the
// default; with each setting's source. A stored reference whose variable
// is not set resolves to nothing, and its Setting says so in Error. h.mu
// is held.
func (h *Hub) resolve(d *Def) (map[string]string, []Setting) {
	values := map[string]string{}
	var out []Setting
	for _, sd := range d.Settings {
		v, src, problem := "", "", ""
		if stored, ok := h.stored[d.ID][sd.Name]; ok {
			if m := reEnvRef.FindStringSubmatch(stored); m != nil {
				v, src = h.cfg.Getenv(m[1]), "config (env ref "+stored+")"
				if v == "" {
					problem = missingRef(stored, m[1])
				}
			} else if sd.Secret {
				v, src = stored, "credentials file"
			} else {
				v, src = stored, "config"
			}
		} else {
			for _, e := range sd.Env {
				if x := h.cfg.Getenv(e); x != "" {
					v, src = x, "env "+e
					break
				}
			}
			if v == "" && sd.Default != "" {
				v, src = sd.Default, "default"
			}
		}
		if sd.Name == "base_url" {
			v = d.normalize(v)
		}
		if v != "" {
			values[sd.Name] = v
		}
		shown := v
		if sd.Secret {
			h.cfg.Redactor.SetSecret("provider "+d.ID+" "+sd.Name, v)
			shown = "not set"
			if v != "" {
				shown = "set"
			}
		}
		if v == "" && problem == "" {
			src = ""
		}
		out = append(out, Setting{Name: sd.Name, Secret: sd.Secret, Value: shown, Source: src, Error: problem})
	}
	return values, out
}

// missingRef says that the environment reference ref, to variable name,
// is stored but the variable is not set. A reference names a variable: it
// is no secret, and may be shown.
func missingRef(ref, name string) string {
	return ref + " stored, but " + name + " is not set in the server's environment"
}

// settingErrors joins the errors of settings as "api_key: ${MY_KEY}
// stored, but ...", or returns "" when none has one.
func settingErrors(settings []Setting) string {
	var out []string
	for _, s := range settings {
		if s.Error != "" {
			out = append(out, s.Name+": "+s.Error)
		}
	}
	return strings.Join(out, "; ")
}

func envNames(d *Def) []string {
	var out []string
	for _, sd := range d.Settings {
		out = append(out, sd.Env...)
	}
	return out
}

// status describes d; h.mu is held.
func (h *Hub) status(d *Def) Status {
	st, _ := h.describe(d)
	return st
}

// describe returns d's status and its resolved settings; h.mu is held.
func (h *Hub) describe(d *Def) (Status, map[string]string) {
	values, settings := h.resolve(d)
	st := Status{ID: d.ID, Name: d.Name, Settings: settings, Env: envNames(d)}
	problems := settingErrors(settings)
	switch {
	case h.disabled[d.ID]:
		st.State = StateDisabled
	case problems != "":
		// Configured, but not as the configuration says: an error, not
		// "not configured", and why.
		st.State, st.Error = StateError, problems
	case !d.configured(values):
		st.State = StateNotConfigured
		if len(st.Env) > 0 {
			st.Error = "set " + st.Env[0] + " in the server's environment or configure it (kiln providers set " + d.ID + ")"
		}
	case d.New == nil:
		st.State, st.Error = StateError, "this build has no "+d.Name+" provider"
	default:
		st.State = StateReady
		key := fingerprint(values)
		if c, ok := h.checks[d.ID]; ok && c.err != "" && c.key == key {
			st.State, st.Error = StateError, c.err
		} else if ml, ok := h.models[d.ID]; ok && ml.err != "" && ml.key == key {
			st.State, st.Error = StateError, ml.err
		}
	}
	return st, values
}

// all is every provider's definition, in the order they were added. It
// takes h.mu.
func (h *Hub) all() []*Def {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.allLocked()
}

// allLocked is all with h.mu held.
func (h *Hub) allLocked() []*Def {
	out := make([]*Def, len(h.order))
	for i, id := range h.order {
		out[i] = h.defs[id]
	}
	return out
}

// def returns the provider id's definition. It takes h.mu.
func (h *Hub) def(id string) (*Def, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, ok := h.defs[id]
	return d, ok
}

// BareModel is a model referenced by its bare name ("demo"), not as
// "<provider>:<model>": Kiln's own models, which need no provider.
type BareModel struct {
	Name  string
	Model core.Model
	// Source is the plugin that adds it.
	Source string
}

// Add makes a provider available (its plugin was enabled), or replaces
// the definition of one added before. Its secrets are registered with the
// redactor at once.
func (h *Hub) Add(d Def) error {
	if d.ID == "" || strings.ContainsAny(d.ID, ": ") {
		return core.Errorf(core.EINVALID, "provider id %q: want a plugin id", d.ID)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.defs[d.ID]; !ok {
		h.order = append(h.order, d.ID)
	}
	h.defs[d.ID] = &d
	delete(h.disabled, d.ID)
	delete(h.live, d.ID)
	delete(h.models, d.ID)
	h.resolve(&d)
	return nil
}

// Remove makes provider id unavailable (its plugin was disabled): its
// models cannot be used, and it is listed in state "disabled" with its
// settings kept.
func (h *Hub) Remove(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.disabled[id] = true
	delete(h.live, id)
}

// Forget drops provider id entirely (its plugin was removed): its
// definition, and its stored settings, credentials included, from the
// settings file.
func (h *Hub) Forget(id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.defs, id)
	h.order = slices.DeleteFunc(h.order, func(o string) bool { return o == id })
	delete(h.disabled, id)
	delete(h.live, id)
	delete(h.models, id)
	delete(h.checks, id)
	if _, ok := h.stored[id]; !ok {
		return nil
	}
	prev := h.stored[id]
	delete(h.stored, id)
	if err := h.save(); err != nil {
		h.stored[id] = prev
		return err
	}
	h.log.Info("provider forgotten with its plugin", "provider", id)
	return nil
}

// AddModels makes models available by their bare names. A name already
// taken is an ECONFLICT.
func (h *Hub) AddModels(source string, models []BareModel) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range models {
		if strings.Contains(m.Name, ":") || m.Name == "" {
			return core.Errorf(core.EINVALID, "model name %q: a bare name has no ':'", m.Name)
		}
		if slices.ContainsFunc(h.bare, func(b BareModel) bool { return b.Name == m.Name }) {
			return core.Errorf(core.ECONFLICT, "model %q is already added", m.Name)
		}
	}
	for _, m := range models {
		m.Source = source
		h.bare = append(h.bare, m)
	}
	return nil
}

// RemoveModels withdraws the bare models source added.
func (h *Hub) RemoveModels(source string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bare = slices.DeleteFunc(h.bare, func(b BareModel) bool { return b.Source == source })
}

// check asks those of defs whose provider is a Checker and would be used
// (configured, enabled) whether their API answers, unless an answer for
// the same settings is younger than CheckTTL: concurrently, each within
// CheckTimeout, without holding h.mu meanwhile. An answer is kept unless
// ctx ended first. An API that answers again also drops a failed model
// list, so that the next Models lists it anew. It takes h.mu.
func (h *Hub) check(ctx context.Context, defs []*Def) {
	type job struct {
		id, key string
		c       Checker
		err     string
	}
	h.mu.Lock()
	now := h.cfg.Now()
	var jobs []*job
	for _, d := range defs {
		_, values, err := h.provider(d)
		if err != nil {
			continue
		}
		c, ok := h.live[d.ID].raw.(Checker)
		key := fingerprint(values)
		if prev, done := h.checks[d.ID]; !ok || done && prev.key == key && now.Sub(prev.at) < h.cfg.CheckTTL {
			continue
		}
		jobs = append(jobs, &job{id: d.ID, key: key, c: c})
	}
	h.mu.Unlock()
	if len(jobs) == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, h.cfg.CheckTimeout)
			defer cancel()
			if err := j.c.Check(cctx); err != nil {
				j.err = err.Error()
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // the caller went away: the answers may be its cancellation
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, j := range jobs {
		h.checks[j.id] = checked{at: now, key: j.key, err: j.err}
		if ml, ok := h.models[j.id]; ok && j.err == "" && ml.err != "" {
			delete(h.models, j.id)
		}
	}
}

// List describes every provider, in the order of Config.Defs and then of
// Add, first checking those that are Checkers (kept CheckTTL).
func (h *Hub) List(ctx context.Context) []Status {
	h.check(ctx, h.all())
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Status, 0, len(h.order))
	for _, d := range h.allLocked() {
		out = append(out, h.status(d))
	}
	return out
}

// Get describes one provider, first checking it if it is a Checker;
// ENOTFOUND for an unknown ID.
func (h *Hub) Get(ctx context.Context, id string) (Status, error) {
	d, ok := h.def(id)
	if !ok {
		return Status{}, h.unknown(id)
	}
	return h.checkedStatus(ctx, d), nil
}

// checkedStatus checks d if it is a Checker and describes it. It takes
// h.mu.
func (h *Hub) checkedStatus(ctx context.Context, d *Def) Status {
	h.check(ctx, []*Def{d})
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.status(d)
}

func (h *Hub) unknown(id string) error {
	h.mu.Lock()
	ids := slices.Clone(h.order)
	h.mu.Unlock()
	return core.Errorf(core.ENOTFOUND, "unknown provider %q (providers: %s)", id, strings.Join(ids, ", "))
}

// Configure changes a provider's stored settings: each value is stored as
// given (an environment reference "${NAME}" as the reference, a secret in
// the 0600 file), "" removes it. EINVALID names the bad setting. The
// status returned is checked anew, if the provider is a Checker.
func (h *Hub) Configure(ctx context.Context, id string, in ConfigInput) (Status, error) {
	d, ok := h.def(id)
	if !ok {
		return Status{}, h.unknown(id)
	}
	if err := h.configure(d, in); err != nil {
		return Status{}, err
	}
	return h.checkedStatus(ctx, d), nil
}

// configure is Configure but for the status. It takes h.mu.
func (h *Hub) configure(d *Def, in ConfigInput) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := d.ID
	if len(in.Settings) == 0 {
		return core.Errorf(core.EINVALID, "no settings given")
	}
	next := map[string]string{}
	for k, v := range h.stored[id] {
		next[k] = v
	}
	for _, name := range slices.Sorted(maps.Keys(in.Settings)) {
		v := strings.TrimSpace(in.Settings[name])
		sd := d.setting(name)
		if sd == nil {
			return core.Errorf(core.EINVALID, "%s has no setting %q (settings: %s)", id, name, settingNames(d))
		}
		if err := checkValue(d, sd, v); err != nil {
			return err
		}
		if v == "" {
			delete(next, name)
		} else {
			next[name] = v
		}
	}
	prev := h.stored[id]
	if len(next) == 0 {
		delete(h.stored, id)
	} else {
		h.stored[id] = next
	}
	if err := h.save(); err != nil {
		h.stored[id] = prev
		return err
	}
	delete(h.models, id)
	h.log.Info("provider configured", "provider", id, "settings", slices.Sorted(maps.Keys(in.Settings)))
	return nil
}

func checkValue(d *Def, sd *SettingDef, v string) error {
	switch {
	case v == "":
		return nil
	case len(v) > maxValue:
		return core.Errorf(core.EINVALID, "%s.%s: longer than %d bytes", d.ID, sd.Name, maxValue)
	case strings.ContainsAny(v, "\r\n\x00"):
		return core.Errorf(core.EINVALID, "%s.%s: must be one line", d.ID, sd.Name)
	case strings.HasPrefix(v, "${") && !reEnvRef.MatchString(v):
		if sd.Secret { // never echo what may be a secret
			return core.Errorf(core.EINVALID, "%s.%s: the value starts with ${ but is not an environment reference like ${NAME}", d.ID, sd.Name)
		}
		return core.Errorf(core.EINVALID, "%s.%s: %q is not an environment reference like ${NAME}", d.ID, sd.Name, v)
	case reEnvRef.MatchString(v):
		return nil
	case len(sd.Values) > 0 && !slices.Contains(sd.Values, v):
		return core.Errorf(core.EINVALID, "%s.%s: %q is not one of %s", d.ID, sd.Name, v, strings.Join(sd.Values, ", "))
	case sd.Name == "base_url":
		u, err := url.Parse(d.normalize(v))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return core.Errorf(core.EINVALID, "%s.base_url: %q is not an http(s) URL", d.ID, v)
		}
	}
	return nil
}

func settingNames(d *Def) string {
	names := make([]string, len(d.Settings))
	for i, s := range d.Settings {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// Reset forgets a provider's stored settings; the environment and the
// defaults apply again. The status returned is checked anew, if the
// provider is a Checker.
func (h *Hub) Reset(ctx context.Context, id string) (Status, error) {
	d, ok := h.def(id)
	if !ok {
		return Status{}, h.unknown(id)
	}
	if err := h.reset(d); err != nil {
		return Status{}, err
	}
	return h.checkedStatus(ctx, d), nil
}

// reset is Reset but for the status. It takes h.mu.
func (h *Hub) reset(d *Def) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if prev, had := h.stored[d.ID]; had {
		delete(h.stored, d.ID)
		if err := h.save(); err != nil {
			h.stored[d.ID] = prev
			return err
		}
	}
	delete(h.models, d.ID)
	return nil
}

// HostsOf returns the host:port patterns the provider d may reach with
// the settings stored and in the environment now, whether or not d is
// added: what its plugin's network permission says.
func (h *Hub) HostsOf(d Def) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	values, _ := h.resolve(&d)
	return d.hosts(values)
}

// fingerprint identifies a set of resolved settings.
func fingerprint(values map[string]string) string {
	b, _ := json.Marshal(values)
	return string(b)
}

// provider returns d's provider built from its current settings, or an
// EINVALID error saying why there is none. h.mu is held.
func (h *Hub) provider(d *Def) (providers.Provider, map[string]string, error) {
	st, values := h.describe(d)
	switch st.State {
	case StateDisabled:
		return nil, nil, core.Errorf(core.EINVALID, "provider %s is disabled (kiln plugin enable %s)", d.ID, d.ID)
	case StateNotConfigured:
		return nil, nil, core.Errorf(core.EINVALID, "provider %s is not configured: %s", d.ID, st.Error)
	}
	if problems := settingErrors(st.Settings); problems != "" {
		return nil, nil, core.Errorf(core.EINVALID, "provider %s cannot be used: %s (set it where the server runs and restart the server, or change the setting: kiln providers set %s)", d.ID, problems, d.ID)
	}
	if d.New == nil {
		return nil, nil, core.Errorf(core.EINVALID, "%s", st.Error)
	}
	key := fingerprint(values)
	if l, ok := h.live[d.ID]; ok && l.key == key {
		return l.p, values, nil
	}
	s := providers.Settings{APIKey: values["api_key"], BaseURL: values["base_url"], Extra: map[string]string{},
		HTTP: h.cfg.ClientFor(plugins.Permissions{Network: d.hosts(values)})}
	for k, v := range values {
		if k != "api_key" && k != "base_url" {
			s.Extra[k] = v
		}
	}
	p, err := d.New(s)
	if err != nil {
		return nil, nil, core.Errorf(core.EINVALID, "provider %s: %v", d.ID, err)
	}
	h.live[d.ID] = &live{key: key, p: providers.Retry(p, h.cfg.Retry), raw: p}
	return h.live[d.ID].p, values, nil
}

// Resolve returns the model of a bare name (AddModels) or a
// "<provider>:<model>" reference, or an EINVALID error saying what is
// wrong (unknown model or provider, not configured, disabled). Model IDs
// may contain ":" ("llama3:8b").
func (h *Hub) Resolve(ref string) (core.Model, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.bare {
		if b.Name == ref {
			return b.Model, nil
		}
	}
	id, model, ok := strings.Cut(ref, ":")
	d, known := h.defs[id]
	if !ok || !known {
		return nil, core.Errorf(core.EINVALID, "unknown model %q", ref)
	}
	if model == "" {
		return nil, core.Errorf(core.EINVALID, "model %q names no model: want %s:<model>", ref, id)
	}
	p, _, err := h.provider(d)
	if err != nil {
		return nil, err
	}
	return providers.Model(p, model), nil
}

// Handles reports whether ref names one of the hub's bare models or
// providers.
func (h *Hub) Handles(ref string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if slices.ContainsFunc(h.bare, func(b BareModel) bool { return b.Name == ref }) {
		return true
	}
	id, _, ok := strings.Cut(ref, ":")
	_, known := h.defs[id]
	return ok && known
}

// modelsTimeout bounds one provider's live model list.
const modelsTimeout = 10 * time.Second

// Models lists the built-in models and every ready provider's models,
// live where the provider lists them (kept ModelsTTL), with every
// provider's status; a provider whose list fails is in state "error" with
// the reason, and its well-known models are listed. Checkers are checked
// first, as by List, and one whose API does not answer is not asked for
// its list.
func (h *Hub) Models(ctx context.Context) Models {
	type job struct {
		d      *Def
		p      providers.Provider
		key    string
		cached *modelList
		// unreachable is set when the provider's Check failed: its list
		// is not asked for, it would only fail more slowly.
		unreachable bool
	}
	h.check(ctx, h.all())
	h.mu.Lock()
	var jobs []job
	for _, d := range h.allLocked() {
		p, values, err := h.provider(d)
		if err != nil {
			continue
		}
		j := job{d: d, p: p, key: fingerprint(values)}
		if ml, ok := h.models[d.ID]; ok && ml.key == j.key && time.Since(ml.at) < h.cfg.ModelsTTL {
			j.cached = &ml
		}
		if c, ok := h.checks[d.ID]; ok && c.key == j.key && c.err != "" {
			j.unreachable = true
		}
		jobs = append(jobs, j)
	}
	h.mu.Unlock()

	lists := make([]modelList, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		switch {
		case j.unreachable:
			lists[i] = modelList{key: j.key, err: "unreachable"}
			continue
		case j.cached != nil:
			lists[i] = *j.cached
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, modelsTimeout)
			defer cancel()
			ms, err := j.p.Models(cctx)
			lists[i] = modelList{at: time.Now(), key: j.key, models: ms}
			if err != nil {
				lists[i].err = "listing models: " + err.Error()
			}
		})
	}
	wg.Wait()

	h.mu.Lock()
	defer h.mu.Unlock()
	out := Models{Default: h.cfg.Default}
	for _, b := range h.bare {
		out.Models = append(out.Models, Model{Ref: b.Name, Provider: BareProvider, ID: b.Name})
	}
	for i, j := range jobs {
		if ctx.Err() == nil && !j.unreachable {
			h.models[j.d.ID] = lists[i]
		}
		ms := lists[i].models
		if lists[i].err != "" && len(ms) == 0 {
			for _, id := range j.d.Models {
				ms = append(ms, providers.ModelInfo{ID: id})
			}
		}
		for _, m := range ms {
			out.Models = append(out.Models, Model{Ref: j.d.ID + ":" + m.ID, Provider: j.d.ID, ID: m.ID, Name: m.Name, ContextSize: m.ContextSize})
		}
	}
	for _, d := range h.allLocked() {
		out.Providers = append(out.Providers, h.status(d))
	}
	if out.Models == nil {
		out.Models = []Model{}
	}
	return out
}
