//go:build unix

package process_test

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/process"
	"github.com/kilnhq/kiln/plugins/sandboxruntime"
	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/docker"
	"github.com/kilnhq/kiln/sandbox/sandboxplugin"
	"github.com/kilnhq/kiln/sandbox/sandboxtest"
	"github.com/kilnhq/kiln/sandbox/wasm"
	"github.com/kilnhq/kiln/sdk/plugin"
)

// sandboxPluginEnv makes the test binary, re-executed by LoadSelf, a
// sandbox-runtime plugin: "wasm:<dir>" serves the wasm runtime over dir,
// "docker" the docker runtime with the test image as its default.
const sandboxPluginEnv = "KILN_TEST_SANDBOX_PLUGIN"

// dockerTestImage is the image .ci/docker-up builds: busybox alone.
const dockerTestImage = "kiln-test/busybox:latest"

// serveSandboxRuntime serves the runtime backend names and exits.
func serveSandboxRuntime(backend string) {
	plugin.Serve(sandboxplugin.Runtime{Open: func(context.Context) (sandbox.Runtime, error) {
		if dir, ok := strings.CutPrefix(backend, "wasm:"); ok {
			return wasm.New(wasm.Options{Dir: dir})
		}
		return docker.New(docker.Options{DefaultImage: dockerTestImage, Instance: "process-test"})
	}})
	os.Exit(0)
}

// loadSandbox starts this test binary as the sandbox-runtime plugin id
// serving backend (sandboxPluginEnv), closed when t ends.
func loadSandbox(t *testing.T, id, backend string) plugins.Instance {
	t.Helper()
	m, err := plugins.ParseBuiltinManifest([]byte(`{"apiVersion":"kiln.dev/v1","id":"` + id + `","version":"1.0.0",
		"description":"Sandboxes from a process.","provides":["sandbox-runtime"],"runtime":"builtin",
		"permissions":{"env":["DOCKER_HOST"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := process.LoadSelf(context.Background(), plugins.LoadRequest{ID: id, Manifest: m, DataDir: t.TempDir()}, nil,
		process.Options{Logger: testLogger(t), Env: []string{sandboxPluginEnv + "=" + backend}, MinBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatalf("LoadSelf: %v", err)
	}
	t.Cleanup(func() { inst.Close() })
	return inst
}

func dispense(t *testing.T, inst plugins.Instance) sandbox.Runtime {
	t.Helper()
	c, err := inst.Dispense(context.Background(), sandboxruntime.Name)
	if err != nil {
		t.Fatal(err)
	}
	return c.(sandbox.Runtime)
}

// TestSandboxRuntimeConformance runs the conformance suite over a plugin
// process, a new one for each runtime the suite asks for: the wasm
// runtime, which needs nothing installed, and the docker one where a
// Docker engine answers (required with KILN_REQUIRE_DOCKER=1).
func TestSandboxRuntimeConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a plugin process per subtest")
	}
	t.Run("wasm", func(t *testing.T) {
		dir := t.TempDir()
		sandboxtest.Run(t, func(t *testing.T) sandbox.Runtime { return dispense(t, loadSandbox(t, "wasm", "wasm:"+dir)) })
	})
	t.Run("docker", func(t *testing.T) {
		r, err := docker.New(docker.Options{DefaultImage: dockerTestImage})
		if err != nil {
			if os.Getenv("KILN_REQUIRE_DOCKER") == "1" {
				t.Fatalf("%v (KILN_REQUIRE_DOCKER=1: run .ci/docker-up)", err)
			}
			t.Skip(err)
		}
		r.Close()
		rt := dispense(t, loadSandbox(t, "docker", "docker"))
		if _, ok := rt.(sandbox.Lister); !ok {
			t.Error("the docker runtime is a Lister; its remote is not")
		}
		if _, ok := rt.(sandbox.ExecDialer); !ok {
			t.Error("the docker runtime is an ExecDialer; its remote is not")
		}
		sandboxtest.Run(t, func(t *testing.T) sandbox.Runtime { return dispense(t, loadSandbox(t, "docker", "docker")) })
	})
}

// TestSandboxRuntimeRestart: a command running when the plugin process
// dies fails with ErrTransport; the next call waits for the restarted
// process, which recovers the sandbox first, so it is usable as before.
func TestSandboxRuntimeRestart(t *testing.T) {
	inst := loadSandbox(t, "wasm", "wasm:"+t.TempDir())
	rt := dispense(t, inst)
	if _, ok := rt.(sandbox.ExecDialer); ok {
		t.Error("the wasm runtime has no agent; its remote is an ExecDialer")
	}
	if err := sandbox.Pause(context.Background(), rt, sandbox.Handle{Version: 1}); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Errorf("pause on wasm: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := rt.Start(ctx, sandbox.Spec{ID: "restart-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.WriteFile(ctx, h, "/tmp/a", strings.NewReader("before"), 0); err != nil {
		t.Fatal(err)
	}

	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := rt.Exec(ctx, h, sandbox.ExecRequest{Command: []string{"sh", "-c", "echo started; sleep 30"}}, func(sandbox.ExecEvent) {
			select {
			case <-started:
			default:
				close(started)
			}
		})
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the long command ended before the process was killed: %v", err)
	case <-ctx.Done():
		t.Fatal("the long command wrote nothing")
	}
	pid := inst.(plugins.HealthReporter).Health().PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, plugins.ErrTransport) {
			t.Errorf("the command cut off by the process's death: %v, want ErrTransport", err)
		}
	case <-ctx.Done():
		t.Fatal("the command outlived the process that ran it")
	}

	var out strings.Builder
	st, err := rt.Exec(ctx, h, sandbox.ExecRequest{Command: []string{"cat", "/tmp/a"}}, func(e sandbox.ExecEvent) { out.Write(e.Data) })
	if err != nil || st.Code != 0 || out.String() != "before" {
		t.Fatalf("after the restart: %v, code %d, %q", err, st.Code, out.String())
	}
	health := inst.(plugins.HealthReporter).Health()
	if health.Restarts != 1 || health.PID == pid || health.PID == 0 {
		t.Errorf("health after the restart: %+v (pid before %d)", health, pid)
	}
	if s, err := rt.Recover(ctx, h); err != nil || s.Status != sandbox.StatusRunning {
		t.Errorf("Recover: %+v, %v", s, err)
	}
	rc, err := rt.ReadFile(ctx, h, "/tmp/a")
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(data) != "before" {
		t.Errorf("ReadFile: %q, %v", data, err)
	}

	// An operation safe to repeat, cut off by a death, runs again.
	syscall.Kill(health.PID, syscall.SIGKILL)
	if _, err := rt.Stat(ctx, h, "/tmp/a"); err != nil {
		t.Errorf("Stat across a death: %v", err)
	}
	if err := rt.Destroy(ctx, h); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Stat(ctx, h, "/tmp/a"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Stat after Destroy: %v, want ErrNotFound", err)
	}
	if err := rt.Destroy(ctx, h); err != nil {
		t.Errorf("Destroy again: %v", err)
	}
}

// TestSandboxRuntimeOpenFails: a runtime that cannot be made fails the
// plugin's load with its reason.
func TestSandboxRuntimeOpenFails(t *testing.T) {
	m, err := plugins.ParseBuiltinManifest([]byte(`{"apiVersion":"kiln.dev/v1","id":"docker","version":"1.0.0",
		"description":"Sandboxes from a process.","provides":["sandbox-runtime"],"runtime":"builtin"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = process.LoadSelf(context.Background(), plugins.LoadRequest{ID: "docker", Manifest: m, DataDir: t.TempDir()}, nil,
		process.Options{Logger: testLogger(t), Env: []string{sandboxPluginEnv + "=docker", "DOCKER_HOST=unix:///nonexistent/docker.sock"}})
	if err == nil || !strings.Contains(err.Error(), "no Docker engine answers") {
		t.Errorf("LoadSelf without an engine: %v", err)
	}
}

// BenchmarkSandboxRuntimeStat is the cost of the process boundary on one
// cheap operation: Stat on the wasm runtime in-process ("direct") and
// through a plugin process ("process").
func BenchmarkSandboxRuntimeStat(b *testing.B) {
	dir := b.TempDir()
	direct, err := wasm.New(wasm.Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close(context.Background())
	ctx := context.Background()
	h, err := direct.Start(ctx, sandbox.Spec{ID: "bench-stat"})
	if err != nil {
		b.Fatal(err)
	}
	m, err := plugins.ParseBuiltinManifest([]byte(`{"apiVersion":"kiln.dev/v1","id":"wasm","version":"1.0.0",
		"description":"Sandboxes from a process.","provides":["sandbox-runtime"],"runtime":"builtin"}`))
	if err != nil {
		b.Fatal(err)
	}
	inst, err := process.LoadSelf(ctx, plugins.LoadRequest{ID: "wasm", Manifest: m, DataDir: b.TempDir()}, nil,
		process.Options{Logger: testLogger(b), Env: []string{sandboxPluginEnv + "=wasm:" + dir}})
	if err != nil {
		b.Fatal(err)
	}
	defer inst.Close()
	c, err := inst.Dispense(ctx, sandboxruntime.Name)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range []struct {
		name string
		rt   sandbox.Runtime
	}{{"direct", direct}, {"process", c.(sandbox.Runtime)}} {
		b.Run(r.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := r.rt.Stat(ctx, h, "/"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
