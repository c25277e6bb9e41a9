package main

import (
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

// sandboxRows measures the docker runtime through OpenSandbox's own
// JavaScript SDK against the built server: with a warm pool (create
// latency serial and at 10 at once, successes at 20 and 50 at once, the
// command round trip, a 1 MiB upload) and without one (cold creates).
func sandboxRows(bin string, add func(figure string, v float64, unit, target string, ok bool), note func(figure, why string)) {
	const figure = "sandboxes, docker"
	sdk := filepath.Join("sandbox", "testdata", "npm")
	if _, err := os.Stat(filepath.Join(sdk, "node_modules", "@alibaba-group", "opensandbox")); err != nil {
		note(figure, "OpenSandbox's SDK is not installed (make deps)")
		return
	}
	if err := exec.Command("docker", "image", "inspect", sandboxImage).Run(); err != nil {
		note(figure, "no Docker engine with "+sandboxImage+" (make docker)")
		return
	}
	pools := fmt.Sprintf(`{"pools": [{"name": "bench", "runtime": "docker", "image": %q, "entrypoint": ["tail", "-f", "/dev/null"],
 "resourceLimits": {"cpu": "1", "memory": "256Mi"}, "size": %d}]}`, sandboxImage, sandboxPoolSize)
	warm, err := sandboxRun(bin, sdk, "warm", pools)
	if err != nil {
		note(figure+", warm pool", err.Error())
	} else {
		add(fmt.Sprintf("sandbox create, docker, warm pool, serial (P50 of 100; %d ok)", warm.SerialOK), warm.CreateP50, "ms", "< 20 ms", warm.CreateP50 < 20)
		add("sandbox create, docker, warm pool, 10 at once (P50 of 50; OpenSandbox publishes 102.7 ms)", warm.CreateP50at10, "ms", "", true)
		add("sandbox create, docker, warm pool, 10 at once (P99 of 50)", warm.CreateP99at10, "ms", "< 60 ms", warm.CreateP99at10 < 60)
		add("sandbox creates that succeeded, 100 at 20 at once", float64(warm.OK20), "of 100", "100", warm.OK20 == 100)
		add("sandbox creates that succeeded, 100 at 50 at once", float64(warm.OK50), "of 100", "100", warm.OK50 == 100)
		add("sandbox command round trip, commands.run (P50 of 100)", warm.CommandP50, "ms", "< 10 ms", warm.CommandP50 < 10)
		add("sandbox 1 MiB upload, files.writeFiles (P50 of 10)", warm.UploadP50, "ms", "", true)
	}
	cold, err := sandboxRun(bin, sdk, "cold", "")
	if err != nil {
		note(figure+", cold", err.Error())
		return
	}
	add("sandbox create, docker, no pool, serial (P50 of 20)", cold.CreateP50, "ms", "< 450 ms", cold.CreateP50 < 450)
}

// sandboxRun starts the server (with the pools file when pools is set,
// waiting until the pool is full) and runs bench.mjs in mode.
func sandboxRun(bin, sdk, mode, pools string) (*sandboxFigures, error) {
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
	addr, stop, err := startServerIn(bin, data, "KILN_SANDBOX_IMAGE="+sandboxImage)
	if err != nil {
		return nil, err
	}
	defer func() {
		stop()
		// The server's sandboxes go with it: the pool's, and any a failed
		// step left.
		if ids, err := exec.Command("docker", "ps", "-aq", "--filter", "label=io.kiln.sandbox").Output(); err == nil && len(strings.Fields(string(ids))) > 0 {
			exec.Command("docker", append([]string{"rm", "-f"}, strings.Fields(string(ids))...)...).Run()
		}
	}()
	if pools != "" {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			out, _ := exec.Command("docker", "ps", "-q", "--filter", "label=io.kiln.sandbox").Output()
			if len(strings.Fields(string(out))) >= sandboxPoolSize {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("the warm pool did not fill in 2 minutes")
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	fmt.Fprintf(os.Stderr, "node bench.mjs %s %s docker %s\n", addr, sandboxImage, mode)
	cmd := exec.Command("node", "bench.mjs", addr, sandboxImage, "docker", mode)
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
