package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/api"
	"github.com/kilnhq/kiln/sandbox/execapi"
	"github.com/kilnhq/kiln/sandbox/service"
	"github.com/kilnhq/kiln/web"
)

// envSandboxRuntime names the runtime that serves a sandbox create naming
// none (docker, wasm or js); unset, docker when its plugin is enabled
// (a Docker engine answers), else wasm, else js.
const envSandboxRuntime = "KILN_SANDBOX_RUNTIME"

// sandboxKeyFile holds the key the sandboxes' access tokens derive from.
const sandboxKeyFile = "sandbox.key"

// openSandboxes returns the sandbox service over the store: sandbox
// records in it, host volumes from the owner's folder grants, the default
// runtime from $KILN_SANDBOX_RUNTIME. Runtimes join it as their plugins
// are enabled; Start reconciles and starts the reaper once they have.
func openSandboxes(store core.Store, svc *core.Service, dataRoot string, log *slog.Logger) (*service.Service, error) {
	key, err := service.LoadKey(filepath.Join(dataRoot, sandboxKeyFile))
	if err != nil {
		return nil, fmt.Errorf("sandbox key: %w", err)
	}
	return service.New(service.Config{
		Store: store, Key: key, Default: os.Getenv(envSandboxRuntime), Preferred: []string{"docker", "wasm", "js"},
		Grants: func(ctx context.Context, owner string) ([]*core.Grant, error) {
			return svc.ListGrants(ctx, core.Principal{ID: owner})
		},
		Logger: log,
	})
}

// sandboxAPI is the sandbox service as the web server mounts it.
func sandboxAPI(sbx *service.Service, log *slog.Logger) *web.SandboxAPI {
	return &web.SandboxAPI{
		Handler: api.Handler(api.Options{Service: sbx, Owner: core.LocalOwner.ID, Logger: log,
			Exec: func(r sandbox.Runtime, h sandbox.Handle, token string) (http.Handler, error) {
				return execapi.Handler(execapi.RuntimeBackend{Runtime: r, Handle: h}, token)
			}}),
		IsAPIPath:   api.IsAPIPath,
		IsProxyPath: api.IsProxyPath,
		WriteError:  api.WriteError,
	}
}
