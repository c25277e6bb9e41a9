package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/process"
	"github.com/kilnhq/kiln/plugins/sandboxruntime"
	"github.com/kilnhq/kiln/plugins/toolset"
	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/api"
	"github.com/kilnhq/kiln/sandbox/docker"
	"github.com/kilnhq/kiln/sandbox/execapi"
	"github.com/kilnhq/kiln/sandbox/js"
	"github.com/kilnhq/kiln/sandbox/sandboxplugin"
	"github.com/kilnhq/kiln/sandbox/service"
	"github.com/kilnhq/kiln/sandbox/tools"
	"github.com/kilnhq/kiln/sandbox/wasm"
	"github.com/kilnhq/kiln/sdk/plugin"
	"github.com/kilnhq/kiln/web"
)

// sandboxRuntimes are the sandbox runtimes built into kiln, by the names
// their packages give them (each the ID of its built-in plugin and the
// runtime's Capabilities.Name), in the order a sandbox create naming none
// prefers them: docker when its plugin is enabled (a Docker engine
// answers), else wasm, else js. Everything in kiln that lists or names
// them uses these.
var sandboxRuntimes = []string{docker.Name, wasm.Name, js.Name}

// envSandboxRuntime names the runtime that serves a sandbox create naming
// none (one of sandboxRuntimes); unset, the first of them whose plugin is
// enabled. An owner's sandbox_runtime setting, changed at run time, wins
// over it.
const envSandboxRuntime = "KILN_SANDBOX_RUNTIME"

// envSandboxDefaultTimeout is the lifetime of a sandbox whose create
// over the API names no timeout: a duration of whole seconds, or "none"
// for manual cleanup (OpenSandbox's server); unset, 30 minutes.
const envSandboxDefaultTimeout = "KILN_SANDBOX_DEFAULT_TIMEOUT"

// envMaxSandboxes bounds the live sandboxes of the server (pools'
// included); unset, 100.
const envMaxSandboxes = "KILN_MAX_SANDBOXES"

// sandboxKeyFile holds the key the sandboxes' access tokens derive from;
// sandboxPoolsFile the warm pools ({"pools": [...]}, sandbox/service
// PoolConfig), none when it is missing.
const (
	sandboxKeyFile   = "sandbox.key"
	sandboxPoolsFile = "sandbox-pools.json"
)

// openSandboxes returns the sandbox service over the store: sandbox
// records in it, host volumes from the owner's folder grants, the default
// runtime from the owner's sandbox_runtime setting (svc's), else
// $KILN_SANDBOX_RUNTIME, the warm pools of
// <shared>/sandbox-pools.json, the egress sockets under <data>/egress
// (none when that path is too long for a socket), the skills staged into
// thread sandboxes under <data>/sandbox-skills. Runtimes join it as
// their plugins are enabled; Start reconciles and starts the reaper once they have.
func openSandboxes(store core.Store, svc *core.Service, roots sandboxRoots, log *slog.Logger) (*service.Service, error) {
	dataRoot := roots.data
	key, err := service.LoadKey(filepath.Join(roots.shared, sandboxKeyFile))
	if err != nil {
		return nil, fmt.Errorf("sandbox key: %w", err)
	}
	pools, err := service.LoadPools(filepath.Join(roots.shared, sandboxPoolsFile))
	if err != nil {
		return nil, fmt.Errorf("sandbox pools: %w", err)
	}
	maxSandboxes := 0
	if v := os.Getenv(envMaxSandboxes); v != "" {
		if maxSandboxes, err = strconv.Atoi(v); err != nil || maxSandboxes < 1 {
			return nil, fmt.Errorf("%s=%q: want a positive number", envMaxSandboxes, v)
		}
	}
	var defaultTimeout time.Duration
	if v := os.Getenv(envSandboxDefaultTimeout); strings.EqualFold(v, "none") {
		defaultTimeout = -1
	} else if v != "" {
		if defaultTimeout, err = time.ParseDuration(v); err != nil || defaultTimeout < time.Second {
			return nil, fmt.Errorf("%s=%q: want a duration of at least 1s, such as 30m or 2h, or none", envSandboxDefaultTimeout, v)
		}
	}
	egressDir := filepath.Join(dataRoot, "egress")
	if len(egressDir) > service.MaxEgressDir {
		log.Warn("sandboxes with an egress allowlist are off: the data root is too long for their unix sockets", "folder", egressDir, "max", service.MaxEgressDir)
		egressDir = ""
	}
	var chosen func(context.Context, string) (string, error)
	if svc != nil {
		chosen = func(ctx context.Context, owner string) (string, error) {
			st, err := svc.Settings(ctx, core.Principal{ID: owner})
			if err != nil {
				return "", err
			}
			return st.SandboxRuntime, nil
		}
	}
	return service.New(service.Config{
		Store: store, Key: key, Default: os.Getenv(envSandboxRuntime), Chosen: chosen, Preferred: sandboxRuntimes, Pools: pools,
		MaxSandboxes: maxSandboxes, DefaultTimeout: defaultTimeout, EgressDir: egressDir, SkillsDir: filepath.Join(dataRoot, "sandbox-skills"),
		Grants: func(ctx context.Context, owner string) ([]*core.Grant, error) {
			return svc.ListGrants(ctx, core.Principal{ID: owner})
		},
		Replica: roots.replica, Alive: roots.alive,
		Logger: log,
	})
}

// sandboxRoots is where the sandbox service keeps its files, and who this
// server is among replicas.
type sandboxRoots struct {
	// data is the data root (egress sockets, staged skills, the
	// runtimes' folders); shared the folder of what replicas share (the
	// key of the sandboxes' tokens, so that any replica checks them, and
	// the warm pools).
	data, shared string
	// replica and alive are service.Config's Replica and Alive: set
	// on PostgreSQL, where replicas may share the database.
	replica string
	alive   func(string) bool
}

// Environment of the docker sandbox runtime.
const (
	// envSandboxImage is the image of a sandbox created without one.
	envSandboxImage = "KILN_SANDBOX_IMAGE"
	// envSandboxDisk is the disk size of a docker sandbox whose create
	// names none (resourceLimits disk or ephemeral-storage), such as 2Gi;
	// unset, docker.DefaultDiskMiB.
	envSandboxDisk = "KILN_SANDBOX_DISK"
	// envExecd is the static kiln-execd binary bind-mounted into docker
	// sandboxes; unset, the kiln-execd beside the kiln executable, when
	// there is one. Without it Kiln serves their execution API itself,
	// over the Docker exec API.
	envExecd = "KILN_EXECD"
)

// sandboxBuiltins are the built-in plugins of the sandbox runtimes (in
// the order of sandboxRuntimes) and of the sandbox tools, over sbx; the
// tools' interruptOn is policy's entry of their plugin
// (sandboxInterruptOn).
func sandboxBuiltins(dataRoot string, sbx *service.Service, policy map[string]core.Policy, skillFiles tools.SkillFiles) ([]plugins.Builtin, error) {
	var out []plugins.Builtin
	for _, b := range []func() (plugins.Builtin, error){
		func() (plugins.Builtin, error) { return dockerBuiltin(dataRoot) },
		func() (plugins.Builtin, error) { return wasmBuiltin(dataRoot) },
		func() (plugins.Builtin, error) { return jsBuiltin(dataRoot, sbx, policy[js.Name]) },
		func() (plugins.Builtin, error) { return sandboxToolsBuiltin(sbx, policy[tools.PluginID], skillFiles) },
	} {
		p, err := b()
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// dockerBuiltin is the built-in docker sandbox-runtime plugin, a process
// plugin that is this executable re-run ("kiln __plugin docker", with the
// options below as flags), so that the Docker socket is held by a
// process of its own, which gets from the server's environment the
// variables its manifest declares (those the Docker client reads). Its
// Load starts it, and fails, saying how to start one, when no Docker
// engine answers (DOCKER_HOST, else the local socket); the plugin is then
// failed and creates fall to the next runtime.
func dockerBuiltin(dataRoot string) (plugins.Builtin, error) {
	m, err := plugins.BuiltinManifest(docker.Name, nil)
	if err != nil {
		return plugins.Builtin{}, err
	}
	var disk sandbox.Resources
	if v := os.Getenv(envSandboxDisk); v != "" {
		if disk, err = service.CheckResources(map[string]string{"disk": v}); err != nil {
			return plugins.Builtin{}, fmt.Errorf("%s=%q: want a size such as 1Gi or 512Mi, from 1 MiB to 1 TiB", envSandboxDisk, v)
		}
	}
	load := func(ctx context.Context, req plugins.LoadRequest) (plugins.Instance, error) {
		// The data root names this server's containers on a shared engine.
		sum := sha256.Sum256([]byte(dataRoot))
		args := []string{selfPluginCmd, docker.Name, "--image", cmp.Or(os.Getenv(envSandboxImage), "busybox:latest"), "--instance", hex.EncodeToString(sum[:8])}
		if disk.DiskMiB > 0 {
			args = append(args, "--disk-mib", strconv.Itoa(disk.DiskMiB))
		}
		if execd := execdPath(); execd != "" {
			args = append(args, "--execd", execd, "--state-dir", filepath.Join(dataRoot, "sandboxes"))
		}
		return process.LoadSelf(ctx, req, args, process.Options{})
	}
	return plugins.Builtin{Manifest: m, Load: load}, nil
}

// selfPluginCmd is the hidden command of the built-in process plugins
// (process.LoadSelf).
const selfPluginCmd = "__plugin"

// newSelfPluginCmd is "kiln __plugin docker": the built-in docker plugin,
// serving sandbox/docker to the kiln server that started it.
func newSelfPluginCmd() *cobra.Command {
	cmd := &cobra.Command{Use: selfPluginCmd, Hidden: true, Short: "Serve a built-in plugin to the kiln server that started this process"}
	var opts docker.Options
	dockerCmd := &cobra.Command{
		Use:   docker.Name,
		Short: "Serve the docker sandbox runtime",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			opts.Log = plugin.Log // to the server's log, through the host
			plugin.Serve(sandboxplugin.Runtime{Open: func(context.Context) (sandbox.Runtime, error) { return docker.New(opts) }})
			return nil
		},
	}
	f := dockerCmd.Flags()
	f.StringVar(&opts.DefaultImage, "image", "", "the image of a sandbox created without one")
	f.StringVar(&opts.Instance, "instance", "", "the name of this server's containers on a shared engine")
	f.StringVar(&opts.ExecdPath, "execd", "", "the kiln-execd binary the sandboxes serve their execution API with")
	f.StringVar(&opts.StateDir, "state-dir", "", "the folder of the sandboxes' run folders (with --execd)")
	f.IntVar(&opts.Defaults.DiskMiB, "disk-mib", 0, "the disk size of a sandbox created without one, in MiB (0: the runtime's default)")
	cmd.AddCommand(dockerCmd)
	return cmd
}

// wasmBuiltin is the built-in wasm sandbox-runtime plugin: sandboxes as
// folders under <data>/sandboxes-wasm whose commands are WASI modules
// run in-process (a built-in sh, or the sandbox's own .wasm files), with
// no network and nothing to install. Its Load fails only when the
// folder cannot be created.
func wasmBuiltin(dataRoot string) (plugins.Builtin, error) {
	m, err := plugins.BuiltinManifest(wasm.Name, nil)
	if err != nil {
		return plugins.Builtin{}, err
	}
	load := func(context.Context, plugins.LoadRequest) (plugins.Instance, error) {
		rt, err := wasm.New(wasm.Options{Dir: filepath.Join(dataRoot, "sandboxes-wasm")})
		if err != nil {
			return nil, err
		}
		return plugins.Clients{
			ByKind:  map[plugins.Capability]any{sandboxruntime.Name: rt},
			OnClose: func() error { return rt.Close(context.Background()) },
		}, nil
	}
	return plugins.Builtin{Manifest: m, Load: load}, nil
}

// jsBuiltin is the built-in js sandbox-runtime plugin: the wasm
// runtime's sandboxes (folders under <data>/sandboxes-js, a built-in sh)
// whose js and node commands run JavaScript (goja in a WASI guest) with
// a memory cap and a deadline, and no network. It also provides the
// js.eval tool, over each thread's js sandbox, held for approval as
// policy says (its manifest's interruptOn). The guest compiles in the background into <data>/cache/js,
// so Load does not wait for it; it fails only when the folder cannot be
// created.
func jsBuiltin(dataRoot string, sbx *service.Service, policy core.Policy) (plugins.Builtin, error) {
	m, err := plugins.BuiltinManifest(js.Name, withInterruptOn(policy))
	if err != nil {
		return plugins.Builtin{}, err
	}
	load := func(context.Context, plugins.LoadRequest) (plugins.Instance, error) {
		rt, err := js.New(js.Options{Dir: filepath.Join(dataRoot, "sandboxes-js"), CacheDir: filepath.Join(dataRoot, "cache", "js")})
		if err != nil {
			return nil, err
		}
		return plugins.Clients{
			ByKind:  map[plugins.Capability]any{sandboxruntime.Name: rt, toolset.Name: toolset.Of(tools.JS(sbx)...)},
			OnClose: func() error { return rt.Close(context.Background()) },
		}, nil
	}
	return plugins.Builtin{Manifest: m, Load: load}, nil
}

// envSandboxInterruptOn lists the sandbox tools whose calls wait for
// approval unless a run's interrupt_on says otherwise (sandbox.exec,
// sandbox.read_file, sandbox.write_file, js.eval, comma-separated;
// "sandbox.*" and "*" as globs); unset or "none", none do: the sandboxes
// have no network and no host folder, so their tools are the agent's to
// use unattended.
const envSandboxInterruptOn = "KILN_SANDBOX_INTERRUPT_ON"

// sandboxToolNames are the tools envSandboxInterruptOn may name.
var sandboxToolNames = slices.Concat(skillSandboxTools, []string{"js.eval"})

// skillSandboxTools are the sandbox tools a skill that names no tools
// gives its subagent, to run the scripts beside its SKILL.md.
var skillSandboxTools = []string{"sandbox.exec", "sandbox.read_file", "sandbox.write_file"}

// sandboxInterruptOn reads $KILN_SANDBOX_INTERRUPT_ON into the default
// interruptOn of each plugin of sandbox tools, by plugin ID and keyed by
// the tools' own names ("sandbox": {"exec": true}).
func sandboxInterruptOn() (map[string]core.Policy, error) {
	v := strings.TrimSpace(os.Getenv(envSandboxInterruptOn))
	out := map[string]core.Policy{}
	if v == "" || v == "none" {
		return out, nil
	}
	for _, pat := range strings.Split(v, ",") {
		pat = strings.TrimSpace(pat)
		matched := false
		for _, name := range sandboxToolNames {
			if ok, err := path.Match(pat, name); err != nil || !ok {
				continue
			}
			matched = true
			plugin, own, _ := strings.Cut(name, ".")
			if out[plugin] == nil {
				out[plugin] = core.Policy{}
			}
			out[plugin][own] = core.Rule{Interrupt: true}
		}
		if !matched {
			return nil, fmt.Errorf("%s: %q names none of the sandbox tools (%s)", envSandboxInterruptOn, pat, strings.Join(sandboxToolNames, ", "))
		}
	}
	return out, nil
}

// sandboxToolsBuiltin is the built-in plugin "sandbox" of the tools
// sandbox.exec, sandbox.read_file and sandbox.write_file, over each
// thread's own sandbox on the owner's default runtime, held for
// approval as policy says (its manifest's interruptOn); a skill's subagent finds its skill's folder
// (skillFiles) at /skills/<name>/ in it.
func sandboxToolsBuiltin(sbx *service.Service, policy core.Policy, skillFiles tools.SkillFiles) (plugins.Builtin, error) {
	m, err := plugins.BuiltinManifest(tools.PluginID, withInterruptOn(policy))
	if err != nil {
		return plugins.Builtin{}, err
	}
	return plugins.Builtin{Manifest: m, Load: clients(map[plugins.Capability]any{toolset.Name: toolset.Of(tools.Sandbox(sbx, skillFiles)...)})}, nil
}

// withInterruptOn is the edit of a built-in sandbox tools plugin's
// manifest (plugins.BuiltinManifest) that sets its interruptOn to policy,
// from $KILN_SANDBOX_INTERRUPT_ON (sandboxInterruptOn): the one part of
// those manifests that follows the server's settings.
func withInterruptOn(policy core.Policy) func(*plugins.Manifest) {
	return func(m *plugins.Manifest) { m.InterruptOn = policy }
}

// execdPath is $KILN_EXECD, else the kiln-execd beside this executable,
// else "".
func execdPath() string {
	if p := os.Getenv(envExecd); p != "" {
		abs, _ := filepath.Abs(p)
		return abs
	}
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	p := filepath.Join(filepath.Dir(self), "kiln-execd")
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
		return p
	}
	return ""
}

// sandboxAPI is the sandbox service as the web server mounts it.
func sandboxAPI(sbx *service.Service, forward func(*http.Request, string) (*url.URL, error), log *slog.Logger) *web.SandboxAPI {
	return &web.SandboxAPI{
		Handler: api.Handler(api.Options{Service: sbx, Owner: core.LocalOwner.ID, Logger: log, Forward: forward,
			Exec: func(r sandbox.Runtime, h sandbox.Handle, token string) (http.Handler, error) {
				return execapi.Handler(execapi.RuntimeBackend{Runtime: r, Handle: h}, token)
			}}),
		IsAPIPath:   api.IsAPIPath,
		IsProxyPath: api.IsProxyPath,
		WriteError:  api.WriteError,
	}
}
