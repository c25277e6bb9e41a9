package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The sandbox workload's image (.ci/docker-up builds it) and the warm
// pool the server keeps of it for the warm figures.
const (
	sandboxImage    = "kiln-test/busybox:latest"
	sandboxPoolSize = 50
)

// sandboxFigures is what sandbox/testdata/npm/bench.mjs prints.
type sandboxFigures struct {
	CreateP50     float64 `json:"createP50"`
	SerialOK      int     `json:"serialOK"`
	CreateP99at10 float64 `json:"createP99at10"`
	CreateP50at10 float64 `json:"createP50at10"`
	OK20          int     `json:"ok20"`
	OK50          int     `json:"ok50"`
	CommandP50    float64 `json:"commandP50"`
	UploadP50     float64 `json:"uploadP50"`
}

// sandboxRows measures each sandbox runtime through OpenSandbox's own
// JavaScript SDK against the built server: with a warm pool (create
// latency serial and at 10 at once, successes at 20 and 50 at once, the
// command round trip, a 1 MiB upload) and without one (cold creates).
// The targets are the issue's, set for docker; wasm and js are measured
// against the same.
func sandboxRows(bin string, add func(figure string, v float64, unit, target string, ok bool), note func(figure, why string)) {
	sdk := filepath.Join("sandbox", "testdata", "npm")
	if _, err := os.Stat(filepath.Join(sdk, "node_modules", "@alibaba-group", "opensandbox")); err != nil {
		note("sandboxes", "OpenSandbox's SDK is not installed (make deps)")
		return
	}
	for _, rt := range []struct{ name, image string }{{"docker", sandboxImage}, {"wasm", "wasm"}, {"js", "js"}} {
		if rt.name == "docker" && exec.Command("docker", "image", "inspect", sandboxImage).Run() != nil {
			note("sandboxes, docker", "no Docker engine with "+sandboxImage+" (make docker)")
			continue
		}
		pools := fmt.Sprintf(`{"pools": [{"name": "bench", "runtime": %q, "image": %q, "entrypoint": ["tail", "-f", "/dev/null"],
 "resourceLimits": {"cpu": "1", "memory": "256Mi"}, "size": %d}]}`, rt.name, rt.image, sandboxPoolSize)
		warm, err := sandboxRun(bin, sdk, rt.name, rt.image, "warm", pools)
		if err != nil {
			note("sandboxes, "+rt.name+", warm pool", err.Error())
		} else {
			add(fmt.Sprintf("sandbox create, %s, warm pool, serial (P50 of 100; %d ok)", rt.name, warm.SerialOK), warm.CreateP50, "ms", "< 20 ms", warm.CreateP50 < 20)
			add(fmt.Sprintf("sandbox create, %s, warm pool, 10 at once (P50 of 50; OpenSandbox publishes 102.7 ms)", rt.name), warm.CreateP50at10, "ms", "", true)
			add(fmt.Sprintf("sandbox create, %s, warm pool, 10 at once (P99 of 50)", rt.name), warm.CreateP99at10, "ms", "< 60 ms", warm.CreateP99at10 < 60)
			add(fmt.Sprintf("sandbox creates that succeeded, %s, 100 at 20 at once", rt.name), float64(warm.OK20), "of 100", "100", warm.OK20 == 100)
			add(fmt.Sprintf("sandbox creates that succeeded, %s, 100 at 50 at once", rt.name), float64(warm.OK50), "of 100", "100", warm.OK50 == 100)
			add(fmt.Sprintf("sandbox command round trip, %s, commands.run (P50 of 100)", rt.name), warm.CommandP50, "ms", "< 10 ms", warm.CommandP50 < 10)
			add(fmt.Sprintf("sandbox 1 MiB upload, %s, files.writeFiles (P50 of 10)", rt.name), warm.UploadP50, "ms", "", true)
		}
		cold, err := sandboxRun(bin, sdk, rt.name, rt.image, "cold", "")
		if err != nil {
			note("sandboxes, "+rt.name+", cold", err.Error())
			continue
		}
		add(fmt.Sprintf("sandbox create, %s, no pool, serial (P50 of 20)", rt.name), cold.CreateP50, "ms", "< 450 ms", cold.CreateP50 < 450)
	}
}

// instanceFilter selects the docker containers of the server on a data
// root, as kiln serve labels them (the first 8 bytes of the data root's
// sha256), and no other server's on a shared engine.
func instanceFilter(data string) string {
	sum := sha256.Sum256([]byte(data))
	return "label=io.kiln.instance=" + hex.EncodeToString(sum[:8])
}

// pooled counts the waiting sandboxes of a runtime in a data root: the
// server's containers for docker, the sandbox folders for the others.
func pooled(runtime, data string) int {
	if runtime == "docker" {
		out, _ := exec.Command("docker", "ps", "-q", "--filter", instanceFilter(data)).Output()
		return len(strings.Fields(string(out)))
	}
	ents, _ := os.ReadDir(filepath.Join(data, "sandboxes-"+runtime))
	n := 0
	for _, e := range ents {
		if e.IsDir() && e.Name() != "cache" && !strings.Contains(e.Name(), ".") {
			n++
		}
	}
	return n
}

// sandboxRun starts the server (with the pools file when pools is set,
// waiting until the pool is full) and runs bench.mjs on a runtime in
// mode.
func sandboxRun(bin, sdk, runtime, image, mode, pools string) (*sandboxFigures, error) {
	data, err := os.MkdirTemp("", "kb-sbx")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(data)
	if pools != "" {
		if err := os.WriteFile(filepath.Join(data, "sandbox-pools.json"), []byte(pools), 0o600); err != nil {
			return nil, err
		}
	}
	// Room for the pool, a burst of 50 and the pool refilling behind it.
	env := []string{"KILN_SANDBOX_IMAGE=" + sandboxImage, "KILN_MAX_SANDBOXES=300"}
	if runtime != "docker" {
		env = append(env, "DOCKER_HOST=unix:///nonexistent.sock") // no containers for the others' figures
	}
	addr, stop, err := startServerIn(bin, data, env...)
	if err != nil {
		return nil, err
	}
	defer func() {
		stop()
		// The server's sandboxes go with it: the pool's, and any a failed
		// step left.
		if ids, err := exec.Command("docker", "ps", "-aq", "--filter", instanceFilter(data)).Output(); err == nil && len(strings.Fields(string(ids))) > 0 {
			exec.Command("docker", append([]string{"rm", "-f"}, strings.Fields(string(ids))...)...).Run()
		}
	}()
	if pools != "" {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			if pooled(runtime, data) >= sandboxPoolSize {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("the warm pool did not fill in 2 minutes")
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	fmt.Fprintf(os.Stderr, "node bench.mjs %s %s %s %s\n", addr, image, runtime, mode)
	cmd := exec.Command("node", "bench.mjs", addr, image, runtime, mode)
	cmd.Dir = sdk
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("bench.mjs: %w", err)
	}
	var f sandboxFigures
	if err := json.Unmarshal(out, &f); err != nil {
		return nil, fmt.Errorf("bench.mjs printed %q: %w", out, err)
	}
	return &f, nil
}
