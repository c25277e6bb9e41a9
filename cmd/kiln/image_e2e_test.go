package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// imageMaxBytes is the size target of the image.
const imageMaxBytes = 60_000_000

// TestImage builds the container image with cmd/kiln/image/build (as make
// image does) and runs it as a user would, with a named volume at /data
// and nothing else: it is under 60 MB, runs as kiln (10001), reports
// healthy through its health check (kiln ready), serves the API behind
// the token it made in /data/api-token (a wrong token is refused), runs
// the demo model, and after a restart keeps its threads and its token,
// which no log line holds. No network: --network none, and the checks run
// inside the container with docker exec.
func TestImage(t *testing.T) {
	needDocker(t)
	const image = "kiln-test/kiln:e2e"
	name := "kiln-image-e2e-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	volume := name + "-data"
	build := exec.Command("image/build", image, "e2e")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("image/build: %v\n%s", err, out)
	} else {
		t.Logf("%s", bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		exec.Command("docker", "rm", "-f", name).Run()
		exec.Command("docker", "volume", "rm", "-f", volume).Run()
		exec.Command("docker", "image", "rm", "-f", image).Run()
	})

	var inspect []struct {
		Size   int64
		Config struct {
			User        string
			Volumes     map[string]any
			Entrypoint  []string
			Healthcheck struct{ Test []string }
		}
	}
	if err := json.Unmarshal(dockerCLI(t, "image", "inspect", image), &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("image inspect: %v", err)
	}
	img := inspect[0]
	if img.Size >= imageMaxBytes {
		t.Errorf("image is %d bytes, over %d", img.Size, imageMaxBytes)
	}
	if img.Config.User != "10001:10001" || img.Config.Volumes["/data"] == nil ||
		strings.Join(img.Config.Healthcheck.Test, " ") != "CMD /kiln ready" || strings.Join(img.Config.Entrypoint, " ") != "/kiln" {
		t.Errorf("image config: %+v", img.Config)
	}

	dockerCLI(t, "run", "-d", "--name", name, "--network", "none", "--health-interval", "1s", "-v", volume+":/data", image)
	waitHealthy(t, name)
	var status struct {
		Version  string
		DataRoot string `json:"data_root"`
	}
	if err := json.Unmarshal(dockerCLI(t, "exec", name, "/kiln", "status", "-o", "json"), &status); err != nil || status.DataRoot != "/data" || status.Version != "e2e" {
		t.Fatalf("status in the container: %+v (%v)", status, err)
	}
	if out, err := exec.Command("docker", "exec", name, "/kiln", "status", "--token", strings.Repeat("x", 48)).CombinedOutput(); err == nil || !strings.Contains(strings.ToLower(string(out)), "token") {
		t.Fatalf("a wrong token: %v\n%s", err, out)
	}
	dockerCLI(t, "exec", name, "/kiln", "run", "say hello from the image")
	threads := func() int {
		var list struct{ Threads []json.RawMessage }
		if err := json.Unmarshal(dockerCLI(t, "exec", name, "/kiln", "threads", "list", "-o", "json"), &list); err != nil {
			t.Fatal(err)
		}
		return len(list.Threads)
	}
	if n := threads(); n != 1 {
		t.Fatalf("%d threads after a run, want 1", n)
	}
	token := tokenIn(t, name)

	dockerCLI(t, "restart", name)
	waitHealthy(t, name)
	if n := threads(); n != 1 {
		t.Fatalf("%d threads after a restart, want 1", n)
	}
	if again := tokenIn(t, name); again != token {
		t.Fatal("the token changed across a restart")
	}
	logs, _ := exec.Command("docker", "logs", name).CombinedOutput()
	if !strings.Contains(string(logs), "made a new API token in /data/api-token") || !strings.Contains(string(logs), "the API token is the one in /data/api-token") {
		t.Errorf("the logs do not say where the token is:\n%s", logs)
	}
	if strings.Contains(string(logs), token) {
		t.Error("a log line holds the API token")
	}
}

// dockerCLI runs the docker command and returns its standard output, failing
// the test when it fails.
func dockerCLI(t *testing.T, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command("docker", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// waitHealthy waits up to 30 s for the container's health check to pass.
func waitHealthy(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		state := strings.TrimSpace(string(dockerCLI(t, "inspect", "--format", "{{.State.Status}} {{.State.Health.Status}}", name)))
		if state == "running healthy" {
			return
		}
		if time.Now().After(deadline) || strings.HasPrefix(state, "exited") {
			logs, _ := exec.Command("docker", "logs", name).CombinedOutput()
			t.Fatalf("container %s: %s\n%s", name, state, logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// tokenIn reads /data/api-token out of the container (docker cp writes a
// tar stream: there is no cat in an image from scratch).
func tokenIn(t *testing.T, name string) string {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(dockerCLI(t, "cp", name+":/data/api-token", "-")))
	if _, err := tr.Next(); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(tr)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) != 48 {
		t.Fatalf("token of %d characters", len(token))
	}
	return token
}
