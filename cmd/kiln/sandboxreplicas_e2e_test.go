package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core/postgres/pgtest"
)

// TestSandboxReplicasEndToEnd runs two kiln serve processes, A and B, on
// one PostgreSQL database and one shared folder, with the wasm runtime
// (which holds its sandboxes in its own process). A sandbox created
// through A is A's: B's start leaves it alone, and its commands, run
// through B, are sent on to A (command output and exit status as from
// A). A is then killed: once its presence lapses, B marks the sandbox
// Failed, reason lost, naming A, and answers about it itself.
func TestSandboxReplicasEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	env := []string{"KILN_DATABASE=" + pgtest.DSN(t), "KILN_SHARED_ROOT=" + t.TempDir(),
		"DOCKER_HOST=unix:///nonexistent.sock", "KILN_SANDBOX_RUNTIME=wasm"}
	a := startProc(t, procAddr(t), t.TempDir(), env...)
	useServer(t, "http://"+a.addr)
	r := kiln(t, "sandbox", "create", "--timeout", "10m")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("create through A: %+v\n%s", r, a.logs.String())
	}
	b := startProc(t, procAddr(t), t.TempDir(), env...)

	useServer(t, "http://"+b.addr)
	if r := kiln(t, "sandbox", "exec", id, "--", "echo from A; exit 3"); r.code != 3 || r.stdout != "from A\n" {
		t.Fatalf("exec through B of A's sandbox: %+v\nA:\n%s\nB:\n%s", r, a.logs.String(), b.logs.String())
	}
	state := func() (string, string, string) {
		r := kiln(t, "-o", "json", "sandbox", "ls")
		var out struct {
			Sandboxes []struct {
				ID     string `json:"id"`
				Status struct {
					State   string `json:"state"`
					Reason  string `json:"reason"`
					Message string `json:"message"`
				} `json:"status"`
			} `json:"sandboxes"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("sandbox ls -o json: %v %q", err, r.stdout)
		}
		for _, s := range out.Sandboxes {
			if s.ID == id {
				return s.Status.State, s.Status.Reason, s.Status.Message
			}
		}
		t.Fatalf("sandbox ls on B does not list %s: %s", id, r.stdout)
		return "", "", ""
	}
	if st, _, _ := state(); st != "Running" {
		t.Fatalf("A's sandbox on B's list: %s", st)
	}

	a.kill()
	killed := time.Now()
	for {
		st, reason, msg := state()
		if st == "Failed" {
			if reason != "lost" || !strings.Contains(msg, "is gone") {
				t.Fatalf("A's sandbox after A died: %s %s %q", st, reason, msg)
			}
			t.Logf("marked lost %v after the kill", time.Since(killed).Round(100*time.Millisecond))
			break
		}
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("A's sandbox is %s 30 s after A died\nB:\n%s", st, b.logs.String())
		}
		time.Sleep(250 * time.Millisecond)
	}
	if r := kiln(t, "sandbox", "exec", id, "--", "echo again"); r.code == 0 {
		t.Fatalf("exec of a lost sandbox: %+v", r)
	}
}
