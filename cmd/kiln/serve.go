package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kilnhq/kiln/cmd/kiln/internal/metrics"
	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/logs"
	"github.com/kilnhq/kiln/marketplace"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/builtin"
	"github.com/kilnhq/kiln/plugins/builtin/cron"
	"github.com/kilnhq/kiln/plugins/builtin/files"
	"github.com/kilnhq/kiln/plugins/mcp"
	"github.com/kilnhq/kiln/plugins/mcp/mcpservers"
	"github.com/kilnhq/kiln/plugins/providers/hub"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
	"github.com/kilnhq/kiln/plugins/registry"
	"github.com/kilnhq/kiln/plugins/sandboxruntime"
	"github.com/kilnhq/kiln/plugins/skillbundle"
	"github.com/kilnhq/kiln/plugins/toolset"
	"github.com/kilnhq/kiln/sandbox/service"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc"
	"github.com/kilnhq/kiln/skills"
	"github.com/kilnhq/kiln/web"
)

// Defaults of kiln serve.
const (
	defaultAddr  = "127.0.0.1:8420"
	defaultModel = "demo"
	// minTokenLen is the shortest API token accepted on a non-loopback
	// address: 32 characters, e.g. 16 random bytes in hex.
	minTokenLen = 32
	// shutdownTimeout bounds the graceful shutdown after a signal.
	shutdownTimeout = 30 * time.Second
)

// serveConfig is the resolved configuration of kiln serve.
type serveConfig struct {
	Addr     string
	DataRoot string
	// SharedRoot holds the configuration replicas share
	// (KILN_SHARED_ROOT, --shared; shared.go); "" is the data root.
	SharedRoot string
	// Database is the PostgreSQL database to use instead of
	// <data>/kiln.db (KILN_DATABASE, --database): a postgres:// URL.
	Database string
	// LeaseTTL is how long a run's lease lasts without a heartbeat
	// (KILN_LEASE_TTL); zero means the default: 3 s on PostgreSQL, so
	// the runs of a replica that died resume elsewhere within about 4 s,
	// and core's default on SQLite, where one server holds them all.
	LeaseTTL time.Duration
	Model    string
	Token    string
	// TokenFile is the file the token was read from
	// (KILN_API_TOKEN_FILE, when KILN_API_TOKEN is not set), and
	// TokenMade is true when kiln serve made it.
	TokenFile      string
	TokenMade      bool
	AllowedOrigins []string
	// Loopback is true when Addr is a loopback address.
	Loopback bool
	// MaxStreams caps the event streams open at once (KILN_MAX_STREAMS);
	// 0 means web.DefaultMaxStreams.
	MaxStreams int
	// MaxAttachment is the size limit of one upload
	// (KILN_MAX_ATTACHMENT_MB); zero means the web default.
	MaxAttachment int64
	// MCPTimeout bounds a call of an MCP server whose entry in .mcp.json
	// sets no "timeout" (KILN_MCP_TIMEOUT_MS); zero means
	// mcp.DefaultCallTimeout.
	MCPTimeout time.Duration
	// MaxToolResult is how many bytes of text one tool result keeps
	// (KILN_MAX_TOOL_RESULT_KB); zero means core.DefaultMaxToolResult.
	MaxToolResult int
	// Log configures the server log in <data>/logs.
	Log logConfig
}

// logConfig is the server log's configuration: the least level logged
// (to the file and stderr) and the rotation and retention of the files.
type logConfig struct {
	Level                           slog.Level
	MaxSizeMB, MaxAgeDays, MaxFiles int
}

func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the Kiln server",
		Long: `Run the Kiln HTTP API and the run engine.

Configuration (flags beat environment variables):

  --addr, KILN_ADDR          listen address (default ` + defaultAddr + `)
  --data, KILN_DATA_ROOT     data directory (default ~/.kiln); the database
                             is <data>/kiln.db, tool files go to <data>/scratch,
                             plugins live in <data>/plugins (kiln plugin --help)
  --database, KILN_DATABASE  a PostgreSQL database to keep threads, runs and
                             events in instead of <data>/kiln.db:
                             postgres://user:password@host:port/db?sslmode=...
                             (its tables go in the user's search_path)
  --shared, KILN_SHARED_ROOT a folder every replica on the database mounts,
                             holding what they share: plugins, custom skills,
                             providers.json, .mcp.json, marketplaces, the
                             webhook secrets' and the sandbox tokens' keys
                             (default: the data root)
  KILN_LEASE_TTL             how long a run's lease lasts without a heartbeat,
                             e.g. 3s (default 3s on PostgreSQL: a dead
                             replica's runs resume on another within ~4s)
  KILN_MODEL                 default model (default ` + defaultModel + `)
  KILN_API_TOKEN             bearer token required by every /api request
  KILN_API_TOKEN_FILE        a file holding the token, when KILN_API_TOKEN is
                             not set; a new random one is written to it
                             (mode 0600) when the file does not exist
  KILN_ALLOWED_ORIGINS       comma-separated browser origins allowed to call
                             the API, e.g. https://kiln.example.com
  KILN_MAX_STREAMS           event streams open at once (default 2048); past
                             it a new one is refused with 503
  KILN_MAX_ATTACHMENT_MB     size limit of one attachment upload (default 25)
  KILN_MCP_TIMEOUT_MS        how long an MCP tool call waits for its answer
                             when the server's "timeout" is not set (default
                             ` + strconv.Itoa(int(mcp.DefaultCallTimeout.Milliseconds())) + `, 10 minutes)
  KILN_MAX_TOOL_RESULT_KB    KiB of text one tool result keeps (default ` + strconv.Itoa(core.DefaultMaxToolResult>>10) + `);
                             a longer one keeps its first and last half and
                             says how many bytes it left out
  KILN_LOG_LEVEL             debug, info, warn or error (default info)
  KILN_LOG_MAX_SIZE_MB       rotate the log file at this size (default ` + strconv.Itoa(logs.DefaultMaxSizeMB) + `)
  KILN_LOG_MAX_AGE_DAYS      remove rotated log files older than this (default ` + strconv.Itoa(logs.DefaultMaxAgeDays) + `)
  KILN_LOG_MAX_FILES         rotated log files to keep (default ` + strconv.Itoa(logs.DefaultMaxFiles) + `)

The log is written as JSON lines to <data>/logs/kiln.log (rotated by size
and daily, gzipped, kept by count and age; read it with 'kiln logs') and as
text to stderr. Every record is redacted and names its component. Prompts,
messages and tool arguments and results are never logged. Prometheus
metrics are served at /metrics, behind the API token when one is set.

On a loopback address (127.0.0.0/8, ::1, localhost) the token and origins are
optional. Any other address needs KILN_API_TOKEN of at least 32 characters
and KILN_ALLOWED_ORIGINS, or kiln serve refuses to start.

SIGINT or SIGTERM shuts down gracefully: event streams end, running runs stop
at a step boundary and resume on the next start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// From here on errors are about configuration or serving, not
			// about how the command was invoked.
			cmd.SilenceUsage = true
			cfg, err := loadServeConfig(cmd.Flags(), os.Getenv, os.UserHomeDir)
			if err != nil {
				return err
			}
			tuneGC(os.Getenv)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// After the first signal, a second one kills the process.
			context.AfterFunc(ctx, stop)
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: cfg.Log.Level}))
			if err := runServer(ctx, cfg, log, cmd.Root().Version); err != nil {
				// The server's own failure, never one of reaching a server.
				var le localError
				if !errors.As(err, &le) {
					err = localError{err: err}
				}
				return err
			}
			return nil
		},
	}
	cmd.Flags().String("addr", "", "listen address (env KILN_ADDR, default "+defaultAddr+")")
	cmd.Flags().String("data", "", "data directory (env KILN_DATA_ROOT, default ~/.kiln)")
	cmd.Flags().String("database", "", "a postgres:// URL to use instead of <data>/kiln.db (env KILN_DATABASE)")
	cmd.Flags().String("shared", "", "a folder replicas on one database share for plugins, skills, providers and MCP servers (env KILN_SHARED_ROOT)")
	return cmd
}

// loadServeConfig resolves the configuration from flags, then environment
// variables (through getenv), then defaults, and checks it.
func loadServeConfig(flags *pflag.FlagSet, getenv func(string) string, home func() (string, error)) (serveConfig, error) {
	cfg := serveConfig{
		Addr:       setting(flags, "addr", getenv("KILN_ADDR"), defaultAddr),
		DataRoot:   setting(flags, "data", getenv("KILN_DATA_ROOT"), ""),
		Model:      cmp.Or(strings.TrimSpace(getenv("KILN_MODEL")), defaultModel),
		Token:      strings.TrimSpace(getenv("KILN_API_TOKEN")),
		Database:   setting(flags, "database", getenv("KILN_DATABASE"), ""),
		SharedRoot: setting(flags, "shared", getenv("KILN_SHARED_ROOT"), ""),
	}
	if err := checkDatabase(cfg.Database); err != nil {
		return serveConfig{}, err
	}
	if path := strings.TrimSpace(getenv(envTokenFile)); path != "" && cfg.Token == "" {
		var err error
		if cfg.Token, cfg.TokenMade, err = tokenFromFile(path); err != nil {
			return serveConfig{}, err
		}
		cfg.TokenFile = path
	}
	if cfg.Database != "" {
		cfg.LeaseTTL = defaultSharedLeaseTTL
	}
	if raw := strings.TrimSpace(getenv("KILN_LEASE_TTL")); raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil || d < time.Second || d > time.Hour {
			return serveConfig{}, fmt.Errorf("KILN_LEASE_TTL: %q is not a duration from 1s to 1h, such as 3s", raw)
		}
		cfg.LeaseTTL = d
	}
	if cfg.DataRoot == "" {
		dir, err := home()
		if err != nil {
			return serveConfig{}, fmt.Errorf("find the home directory for the default data root (set KILN_DATA_ROOT or --data): %w", err)
		}
		cfg.DataRoot = filepath.Join(dir, ".kiln")
	}
	if cfg.SharedRoot != "" && cfg.Database == "" {
		return serveConfig{}, fmt.Errorf("KILN_SHARED_ROOT (--shared) is for replicas that share a PostgreSQL database: set KILN_DATABASE too")
	}
	origins, err := parseOrigins(getenv("KILN_ALLOWED_ORIGINS"))
	if err != nil {
		return serveConfig{}, err
	}
	cfg.AllowedOrigins = origins
	if raw := strings.TrimSpace(getenv("KILN_MAX_STREAMS")); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 {
			return serveConfig{}, fmt.Errorf("KILN_MAX_STREAMS: %q is not a number of event streams (a whole number of at least 1)", raw)
		}
		cfg.MaxStreams = n
	}
	if raw := strings.TrimSpace(getenv("KILN_MAX_ATTACHMENT_MB")); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > 1024 {
			return serveConfig{}, fmt.Errorf("KILN_MAX_ATTACHMENT_MB: %q is not a size in MiB (a whole number from 1 to 1024)", raw)
		}
		cfg.MaxAttachment = int64(n) << 20
	}
	if raw := strings.TrimSpace(getenv("KILN_MCP_TIMEOUT_MS")); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 1 || n > mcpservers.MaxTimeout {
			return serveConfig{}, fmt.Errorf("KILN_MCP_TIMEOUT_MS: %q is not a timeout in milliseconds (a whole number from 1 to %d, a day)", raw, mcpservers.MaxTimeout)
		}
		cfg.MCPTimeout = time.Duration(n) * time.Millisecond
	}
	if raw := strings.TrimSpace(getenv("KILN_MAX_TOOL_RESULT_KB")); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > 16<<10 {
			return serveConfig{}, fmt.Errorf("KILN_MAX_TOOL_RESULT_KB: %q is not a size in KiB (a whole number from 1 to 16384)", raw)
		}
		cfg.MaxToolResult = n << 10
	}
	if cfg.Log, err = loadLogConfig(getenv); err != nil {
		return serveConfig{}, err
	}
	if err := checkModelRef(cfg.Model); err != nil {
		return serveConfig{}, fmt.Errorf("KILN_MODEL: %w", err)
	}
	if cfg.Loopback, err = checkExposure(cfg.Addr, cfg.Token, cfg.AllowedOrigins); err != nil {
		return serveConfig{}, err
	}
	return cfg, nil
}

// loadLogConfig reads KILN_LOG_LEVEL and the KILN_LOG_MAX_* variables;
// unset ones take the defaults.
func loadLogConfig(getenv func(string) string) (logConfig, error) {
	c := logConfig{Level: slog.LevelInfo, MaxSizeMB: logs.DefaultMaxSizeMB, MaxAgeDays: logs.DefaultMaxAgeDays, MaxFiles: logs.DefaultMaxFiles}
	if v := strings.TrimSpace(getenv("KILN_LOG_LEVEL")); v != "" {
		lv, err := logs.ParseLevel(v)
		if err != nil {
			return c, fmt.Errorf("KILN_LOG_LEVEL must be debug, info, warn or error, not %q", v)
		}
		c.Level = lv
	}
	for _, n := range []struct {
		name string
		v    *int
		max  int
	}{
		{"KILN_LOG_MAX_SIZE_MB", &c.MaxSizeMB, 1 << 20},
		{"KILN_LOG_MAX_AGE_DAYS", &c.MaxAgeDays, 100 * 365},
		{"KILN_LOG_MAX_FILES", &c.MaxFiles, 10000},
	} {
		v := strings.TrimSpace(getenv(n.name))
		if v == "" {
			continue
		}
		i, err := strconv.Atoi(v)
		if err != nil || i < 1 || i > n.max {
			return c, fmt.Errorf("%s must be a whole number from 1 to %d, not %q", n.name, n.max, v)
		}
		*n.v = i
	}
	return c, nil
}

// setting returns the value of flag name if it was set, else env if not
// blank, else def.
func setting(flags *pflag.FlagSet, name, env, def string) string {
	if f := flags.Lookup(name); f != nil && f.Changed {
		return f.Value.String()
	}
	return cmp.Or(strings.TrimSpace(env), def)
}

// parseOrigins splits a comma-separated list of browser origins, each
// http(s)://host[:port] without a path.
func parseOrigins(list string) ([]string, error) {
	var out []string
	for _, o := range strings.Split(list, ",") {
		if o = strings.TrimSpace(o); o == "" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			strings.TrimSuffix(u.Path, "/") != "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("KILN_ALLOWED_ORIGINS: %q is not an origin; use scheme://host[:port], e.g. https://kiln.example.com", o)
		}
		out = append(out, o)
	}
	return out, nil
}

// checkExposure reports whether addr is a loopback address and refuses a
// non-loopback one unless the API is protected: a token of at least
// minTokenLen characters and at least one allowed origin. The error says
// exactly what to set.
func checkExposure(addr, token string, origins []string) (loopback bool, err error) {
	loopback, err = isLoopbackAddr(addr)
	if err != nil || loopback {
		return loopback, err
	}
	var missing []string
	switch {
	case token == "":
		missing = append(missing, fmt.Sprintf("KILN_API_TOKEN (a random secret of at least %d characters, e.g. from `openssl rand -hex 32`)", minTokenLen))
	case len(token) < minTokenLen:
		missing = append(missing, fmt.Sprintf("a longer KILN_API_TOKEN (it has %d characters; at least %d are required)", len(token), minTokenLen))
	}
	if len(origins) == 0 {
		missing = append(missing, "KILN_ALLOWED_ORIGINS (the comma-separated browser origins allowed to call the API, e.g. https://kiln.example.com)")
	}
	if len(missing) > 0 {
		return false, fmt.Errorf("refusing to listen on non-loopback address %s without protection; set %s, or listen on 127.0.0.1",
			addr, strings.Join(missing, " and "))
	}
	return false, nil
}

// isLoopbackAddr reports whether a listen address host:port binds only
// the loopback interface: localhost or an IP in 127.0.0.0/8 or ::1. An
// empty host (":8420") binds every interface.
func isLoopbackAddr(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("listen address %q: %w (want host:port, e.g. %s)", addr, err, defaultAddr)
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// serveGCPercent is the garbage collector's target for kiln serve when
// GOGC is not set. The server's Go heap is small (SQLite's page cache is
// C memory), so at Go's default of 100 the heap's 4 MB floor made the
// collector run about a hundred times a second under load, a fifth of the
// engine's CPU; at 150 the heap may grow to 2.5 times what is live
// instead of twice (specs/RATIONALE.md, "The server's garbage collector").
// core/sqlite's BenchmarkEngine runs with the same target.
const serveGCPercent = 150

// tuneGC sets the collector's target to serveGCPercent unless GOGC says
// otherwise.
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(serveGCPercent)
	}
}

// runServer serves the API until ctx ends, then shuts down gracefully:
// stop accepting, end event streams, let in-flight requests finish, stop
// the engine (runs resume on the next start) and close the store.
//
// The address is bound first, before anything is created or started: a
// busy port fails at once (listenError) and leaves the data directory, the
// database and the plugins untouched.
func runServer(ctx context.Context, cfg serveConfig, log *slog.Logger, version string) (err error) {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return listenError(cfg.Addr, err)
	}
	// serveHTTP closes ln when it serves; this closes it on the way out
	// before that.
	defer ln.Close()
	// One redactor for every output: the log, the database, events and
	// API answers. It knows the API token now and each provider's secrets
	// as the hub resolves them.
	red := core.NewRedactor()
	red.SetSecret("KILN_API_TOKEN", cfg.Token)
	scratch := filepath.Join(cfg.DataRoot, "scratch")
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	if err := os.MkdirAll(cfg.shared(), 0o700); err != nil {
		return fmt.Errorf("create the shared folder: %w", err)
	}
	unlock, err := lockDataRoot(cfg.DataRoot)
	if err != nil {
		return err
	}
	defer unlock()
	replica, err := replicaID(cfg.DataRoot)
	if err != nil {
		return err
	}
	// The log: JSON in <data>/logs and text on stderr (log's handler),
	// both redacted. It closes last, after everything that logs.
	serverLog, err := logs.Open(logs.Options{
		Dir: filepath.Join(cfg.DataRoot, "logs"), Level: cfg.Log.Level,
		MaxSizeMB: cfg.Log.MaxSizeMB, MaxAgeDays: cfg.Log.MaxAgeDays, MaxFiles: cfg.Log.MaxFiles,
		Text: log.Handler(), Redactor: red,
	})
	if err != nil {
		return err
	}
	defer serverLog.Close()
	log = serverLog.Logger().With("replica", replica)
	// Whatever logs through the default logger (a library, a stray
	// slog.Default()) is redacted and reaches the file too.
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(log)
	met := metrics.New()
	met.SetReplica(replica)
	store, err := openStore(ctx, cfg, red, met, log)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := store.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close database: %w", cerr))
		}
	}()
	// Skills: custom ones in <shared>/skills (the data root's unless
	// replicas share a folder; watched, so edits need no restart) over
	// the plugins' over the built-in ones. The task tool
	// delegates to them; the file tools show a subagent its skill's folder.
	cat, err := skills.NewCatalog(filepath.Join(cfg.shared(), "skills"), skills.Builtin())
	if err != nil {
		return err
	}
	go cat.Watch(ctx, skillsWatchInterval, func(err error) {
		log.Warn("reload skills", "component", "skills", "err", err)
	})
	skillFiles := func(name string) (fs.FS, bool) {
		e, ok := cat.Get(name)
		return e.FS(), ok
	}
	fileTools := files.ToolsWith(files.Options{SkillFiles: skillFiles})
	tools, err := delayTools(append(builtin.Tools(scratch), fileTools...), os.Getenv(envToolDelay))
	if err != nil {
		return err
	}
	models, err := openHub(cfg, log.With("component", "providers"), red)
	if err != nil {
		return err
	}
	triggerKey, err := service.LoadKey(filepath.Join(cfg.shared(), triggerKeyFile))
	if err != nil {
		return fmt.Errorf("trigger key: %w", err)
	}
	// The sandbox service opens over svc, and the sandbox_runtime setting
	// takes the runtimes it has enabled: asked only once the API serves.
	var sbx *service.Service
	svc, err := core.New(core.Config{
		SandboxRuntimes: func() []string { return sbx.Runtimes() },
		Schedules:       cron.Parse,
		TriggerKey:      triggerKey,
		Tools:           []core.Tool{&skills.Task{Catalog: cat, Always: files.ReadOnly, Sandbox: skillSandboxTools}},
		Store:           store,
		Models:          modelResolver(models),
		DefaultModel:    cfg.Model,
		Logger:          log.With("component", "core"),
		Redactor:        red,
		Observer:        met,
		DataRoot:        cfg.DataRoot,
		MaxToolResult:   cfg.MaxToolResult,
		Blobs:           core.DirBlobs{Dir: filepath.Join(cfg.DataRoot, "attachments")},
		Holder:          replica,
		LeaseTTL:        cfg.LeaseTTL,
	})
	if err != nil {
		return fmt.Errorf("create service: %w", err)
	}
	met.WatchRuns(svc.RunCounts)
	met.WatchLeases(svc.ActiveRuns)
	// Replicas on one database: each says where it is and that it runs
	// (presence), sandboxes are held by one and reached through any.
	roots := sandboxRoots{data: cfg.DataRoot, shared: cfg.shared()}
	var peers *presence
	if kv, ok := store.(core.KVStore); ok && cfg.Database != "" {
		self, err := advertiseURL(os.Getenv, ln.Addr())
		if err != nil {
			return err
		}
		peers = &presence{kv: kv, self: replica, url: self, log: log.With("component", "replicas")}
		go peers.run(ctx)
		roots.replica, roots.alive = replica, peers.alive
	}
	sbx, err = openSandboxes(store, svc, roots, log.With("component", "sandboxes"))
	if err != nil {
		return err
	}
	met.WatchPools(func() []metrics.PoolStat {
		var out []metrics.PoolStat
		for _, p := range sbx.Pools() {
			out = append(out, metrics.PoolStat{Name: p.Name, Runtime: p.Runtime, Size: p.Size, Waiting: p.Waiting, Hits: p.Hits, Misses: p.Misses})
		}
		return out
	})
	sandboxPolicy, err := sandboxInterruptOn()
	if err != nil {
		return err
	}
	// Plugins load before the engine starts, so runs resumed after a
	// restart find their tools and models; they stop after it.
	builtins, err := builtinPlugins(scratch, tools, models)
	if err != nil {
		return err
	}
	sandboxPlugins, err := sandboxBuiltins(cfg.DataRoot, sbx, sandboxPolicy, skillFiles)
	if err != nil {
		return err
	}
	builtins = append(builtins, sandboxPlugins...)
	if err := checkBuiltins(builtins); err != nil {
		return err
	}
	// MCP servers: the user's .mcp.json, and the mcp-servers bundles of
	// plugins as they are enabled. The bridge closes after the registry.
	bridge, err := openMCP(svc, cfg.shared(), cfg.MCPTimeout)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, bridge.Close()) }()
	reg, err := openPlugins(ctx, cfg, svc, store, models, cat, bridge, sbx, builtins, log, met.PluginCall)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, reg.Close()) }()
	// The sandbox runtimes of enabled plugins are in: reconcile the
	// records with them, then reap expired sandboxes until the server
	// stops.
	if err := sbx.Start(ctx); err != nil {
		return fmt.Errorf("start sandboxes: %w", err)
	}
	checkDefaultModel(models, cfg.Model, log.With("component", "providers"))
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		if serr := svc.Shutdown(sctx); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop engine: %w", serr))
		}
	}()
	if err := svc.Start(ctx); err != nil {
		return fmt.Errorf("start engine: %w", err)
	}
	// The scheduler fires cron triggers until the server stops; after a
	// restart its first tick deals with the slots missed meanwhile.
	schedCtx, stopSched := context.WithCancel(ctx)
	defer stopSched()
	go svc.NewScheduler(core.SchedulerConfig{Logger: log.With("component", "scheduler")}).Run(schedCtx)
	market, err := marketplace.Open(marketplace.Config{
		Dir: filepath.Join(cfg.shared(), "marketplaces"), Plugins: reg, KilnVersion: version,
		Protocol: pluginrpc.ProtocolVersion, Log: log.With("component", "marketplace"),
	})
	if err != nil {
		return err
	}
	userMCP := newUserMCP(bridge, cfg.shared())
	if cfg.SharedRoot != "" && cfg.SharedRoot != cfg.DataRoot {
		go watchShared(ctx, cfg.SharedRoot, reg, models, userMCP, log.With("component", "shared"))
	}
	srv := newHTTPServer(svc, reg, market, models, cat, userMCP, sandboxAPI(sbx, peers.forwarder(sbx), log.With("component", "sandboxes")), cfg, log.With("component", "web"), version, met, serverLog)
	return serveHTTP(ctx, ln, srv, log, cfg)
}

// triggerKeyFile holds the key that seals the webhook triggers' secrets
// in the store (created on first start, mode 0600).
const triggerKeyFile = "triggers.key"

// skillsWatchInterval is how often the custom skills folder is scanned
// for changes (a stat per skill; a changed SKILL.md is parsed again).
const skillsWatchInterval = 2 * time.Second

// listenError explains why kiln serve cannot listen on addr, with what
// to do: another server on the port, a privileged port, an address that
// is not this machine's.
func listenError(addr string, err error) error {
	elsewhere := "with --addr (or $KILN_ADDR)"
	if host, port, serr := net.SplitHostPort(addr); serr == nil {
		if n, perr := strconv.Atoi(port); perr == nil && n > 0 && n < 65535 {
			elsewhere += ", e.g. --addr " + net.JoinHostPort(host, strconv.Itoa(n+1))
		}
	}
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return localError{
			err:  fmt.Errorf("listen %s: address already in use — is another kiln serve running?", addr),
			hint: "Stop it, or listen on another address " + elsewhere + ".",
		}
	case errors.Is(err, syscall.EACCES):
		return localError{
			err:  fmt.Errorf("listen %s: permission denied (ports below 1024 need privileges)", addr),
			hint: "Listen on a port of 1024 or above with --addr (or $KILN_ADDR), e.g. --addr " + defaultAddr + ".",
		}
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return localError{
			err:  fmt.Errorf("listen %s: no network interface of this machine has that address", addr),
			hint: "Listen on one of its addresses " + elsewhere + ".",
		}
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		err = opErr.Err // without "listen tcp <addr>:", said below
	}
	return localError{err: fmt.Errorf("listen %s: %w", addr, err), hint: "Listen on another address " + elsewhere + "."}
}

// openPlugins opens the plugin registry in <data>/plugins with the
// built-in plugins, each runtime's cache in <data>/cache (compiled WASM
// in <data>/cache/wasm) and the plugins' kv namespaces in the store, and
// loads the enabled plugins: their tools go to svc, their model providers
// to models. onCall, when set, hears of every plugin call (metrics). Each
// part logs with its component: registry, wasm:<plugin>, process:<plugin>.
func openPlugins(ctx context.Context, cfg serveConfig, svc *core.Service, kv core.KVStore, models *hub.Hub, cat *skills.Catalog, bridge *mcp.Manager, sbx *service.Service, builtins []plugins.Builtin,
	log *slog.Logger, onCall func(plugin string, d time.Duration, err error)) (*registry.Registry, error) {
	// A nil host stays out of the map: a typed nil would pass for a host.
	hosts := map[plugins.Capability]any{toolset.Name: svc, modelprovider.Name: models}
	if cat != nil {
		hosts[skillbundle.Name] = cat
	}
	if bridge != nil {
		hosts[mcpservers.Name] = bridge
	}
	if sbx != nil {
		hosts[sandboxruntime.Name] = sbx
	}
	reg, err := registry.Open(ctx, registry.Config{
		Root:      filepath.Join(cfg.shared(), "plugins"),
		LockFile:  filepath.Join(cfg.shared(), "plugins.lock"),
		DataRoot:  filepath.Join(cfg.shared(), "plugin-data"),
		CacheRoot: filepath.Join(cfg.DataRoot, "cache"),
		Hosts:     hosts,
		KV:        kv,
		Grants:    plugins.CallGrants,
		Builtins:  builtins,
		Logger:    log,
		OnCall:    onCall,
	})
	if err != nil {
		return nil, fmt.Errorf("open plugins: %w", err)
	}
	return reg, nil
}

// The hosts of the kinds whose packages do not import them (interface
// guards; toolset, modelprovider and skillbundle keep theirs).
var (
	_ sandboxruntime.Host = (*service.Service)(nil)
	_ mcpservers.Host     = (*mcp.Manager)(nil)
)

// newHTTPServer returns the http.Server of the API. Its BaseContext is
// cancelled when Shutdown starts, which ends the event streams that would
// otherwise keep Shutdown waiting.
func newHTTPServer(svc *core.Service, reg *registry.Registry, market *marketplace.Client, models *hub.Hub, cat *skills.Catalog, bridge *userMCP, sandboxes *web.SandboxAPI, cfg serveConfig, log *slog.Logger, version string,
	met *metrics.Metrics, serverLog *logs.Log) *http.Server {
	if version == "" {
		version = "dev"
	}
	base, cancel := context.WithCancel(context.Background())
	srv := &http.Server{
		Handler: web.New(svc, web.Options{
			Token: cfg.Token, AllowedOrigins: cfg.AllowedOrigins, Loopback: cfg.Loopback,
			Version: version, DataRoot: cfg.DataRoot, DefaultModel: cfg.Model, Logger: log,
			StartedAt: time.Now(), Plugins: reg, Marketplace: market, Providers: models, MaxStreams: cfg.MaxStreams, MaxAttachment: cfg.MaxAttachment,
			Metrics: met, Logs: serverLog, Skills: cat, MCPServers: bridge, Sandboxes: sandboxes,
		}),
		BaseContext:       func(net.Listener) context.Context { return base },
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(cancel)
	return srv
}

// serveHTTP serves on ln until ctx ends or serving fails, then shuts the
// server down within shutdownTimeout.
func serveHTTP(ctx context.Context, ln net.Listener, srv *http.Server, log *slog.Logger, cfg serveConfig) error {
	log.Info(fmt.Sprintf("kiln serving on http://%s (data %s, model %s)", ln.Addr(), cfg.DataRoot, cfg.Model))
	switch {
	case cfg.TokenMade:
		log.Info("made a new API token in " + cfg.TokenFile + ": every /api request needs it (the web UI asks for it)")
	case cfg.TokenFile != "":
		log.Info("the API token is the one in " + cfg.TokenFile)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing requests, stopping runs at a step boundary")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return fmt.Errorf("shut down http server: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http: %w", err)
	}
	return nil
}

// envToolDelay names a testing knob: "tool=duration,..." makes each named
// tool wait that long after it took effect and before its result is
// returned, which widens the window in which a crash cuts a call off. The
// crash-recovery tests use it; it has no use in production.
const envToolDelay = "KILN_TEST_TOOL_DELAY"

// delayTools wraps the tools named in spec with a delay after each call.
func delayTools(tools []core.Tool, spec string) ([]core.Tool, error) {
	if strings.TrimSpace(spec) == "" {
		return tools, nil
	}
	delays := map[string]time.Duration{}
	for _, item := range strings.Split(spec, ",") {
		name, dur, ok := strings.Cut(strings.TrimSpace(item), "=")
		d, err := time.ParseDuration(dur)
		if !ok || err != nil || d < 0 {
			return nil, fmt.Errorf("%s: %q is not tool=duration", envToolDelay, item)
		}
		delays[name] = d
	}
	out := make([]core.Tool, len(tools))
	for i, t := range tools {
		out[i] = t
		if d, ok := delays[t.Spec().Name]; ok {
			out[i] = slowTool{Tool: t, delay: d}
			delete(delays, t.Spec().Name)
		}
	}
	if len(delays) > 0 {
		return nil, fmt.Errorf("%s: unknown tools %s", envToolDelay, strings.Join(slices.Sorted(maps.Keys(delays)), ", "))
	}
	return out, nil
}

// slowTool delays a tool's result; see envToolDelay.
type slowTool struct {
	core.Tool
	delay time.Duration
}

func (s slowTool) Call(ctx context.Context, args json.RawMessage) (core.ToolResult, error) {
	out, err := s.Tool.Call(ctx, args)
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
	}
	return out, err
}

// Local keeps a delayed tool's local calls local (core.LocalCaller): the
// delay must not change how the engine treats a call after a crash.
func (s slowTool) Local(args json.RawMessage) bool {
	lc, ok := s.Tool.(core.LocalCaller)
	return ok && lc.Local(args)
}
