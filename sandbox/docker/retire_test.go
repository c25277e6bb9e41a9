package docker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRetiredAdopted: a retired container that an earlier runtime left
// (its process ended before its janitor got to it) is not listed, and
// the next runtime over the same state folder removes it with its run
// folder; a live sandbox's container is left alone.
func TestRetiredAdopted(t *testing.T) {
	if exec.Command("docker", "image", "inspect", "kiln-test/busybox:latest").Run() != nil {
		if os.Getenv("KILN_REQUIRE_DOCKER") == "1" {
			t.Fatal("no Docker engine with kiln-test/busybox:latest (KILN_REQUIRE_DOCKER=1: run .ci/docker-up)")
		}
		t.Skip("no Docker engine with kiln-test/busybox:latest")
	}
	state := t.TempDir()
	instance := fmt.Sprintf("adopt-%d", time.Now().UnixNano())
	probe := &Runtime{opts: Options{StateDir: state}}
	run := func(id string) string {
		name := "kiln-" + id
		out, err := exec.Command("docker", "run", "-d", "--network", "none", "--name", name,
			"--label", LabelSandbox+"="+id, "--label", LabelInstance+"="+instance, "kiln-test/busybox:latest", "tail", "-f", "/dev/null").CombinedOutput()
		if err != nil {
			t.Fatalf("docker run: %v %s", err, out)
		}
		t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
		if err := os.MkdirAll(probe.runDir(name), 0o700); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	retired, live := run(instance+"-retired"), run(instance+"-live")
	if err := os.WriteFile(probe.retiredMark("kiln-"+instance+"-retired"), []byte(retired), 0o600); err != nil {
		t.Fatal(err)
	}
	// A mark naming another container (an earlier sandbox of the ID) is
	// no mark of this one.
	if err := os.WriteFile(probe.retiredMark("kiln-"+instance+"-live"), []byte("0123abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{DefaultImage: "kiln-test/busybox:latest", ExecdPath: "/bin/sh", StateDir: state, Instance: instance})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if ids, err := r.List(context.Background()); err != nil || len(ids) != 1 || ids[0] != instance+"-live" {
		t.Errorf("List = %q, %v; want the live sandbox alone", ids, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := exec.Command("docker", "ps", "-aq", "--no-trunc", "--filter", "label="+LabelInstance+"="+instance).Output()
		_, serr := os.Stat(filepath.Dir(probe.runDir("kiln-" + instance + "-retired")))
		if got := string(bytes.TrimSpace(out)); got == live && os.IsNotExist(serr) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("containers of the instance: %q (want %s alone), the retired one's run folder: %v", out, live, serr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
