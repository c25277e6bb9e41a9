package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSandboxCLIEndToEnd drives kiln sandbox against a real kiln serve on
// the wasm runtime (no Docker): create, ls, exec with its output and exit
// status, a 3 MiB copy in and back out, pause refused clearly, renew,
// rm, and what a deleted sandbox answers.
func TestSandboxCLIEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	srv := startProc(t, procAddr(t), t.TempDir(), "DOCKER_HOST=unix:///nonexistent.sock", "KILN_SANDBOX_RUNTIME=wasm")
	useServer(t, "http://"+srv.addr)
	run := func(args ...string) result {
		t.Helper()
		r := kiln(t, append([]string{"sandbox"}, args...)...)
		t.Logf("kiln sandbox %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, truncate(r.stdout, 300), r.stderr)
		return r
	}

	r := run("create", "--timeout", "10m", "--meta", "team=cli", "--env", "GREETING=hi")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" || strings.Contains(id, "\n") || r.stderr != "" {
		t.Fatalf("create: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}

	r = run("ls")
	mustContain(t, "ls", r.stdout, "ID", "STATE", "RUNTIME", "IMAGE", "EXPIRES", "THREAD", id, "Running", "wasm")
	if !strings.Contains(r.stdout, " in 10m00s ") && !strings.Contains(r.stdout, " in 9m5") {
		t.Errorf("ls does not say it expires in 10 minutes:\n%s", r.stdout)
	}
	if r = run("ls", "--meta", "team=other"); r.code != 0 || strings.Contains(r.stdout, id) {
		t.Errorf("ls --meta team=other shows it: %q", r.stdout)
	}
	r = run("-o", "json", "ls", "--meta", "team=cli", "--state", "Running")
	var listed struct {
		Sandboxes []struct {
			ID        string
			ExpiresAt time.Time
			Metadata  map[string]string
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || len(listed.Sandboxes) != 1 || listed.Sandboxes[0].ID != id || listed.Sandboxes[0].Metadata["team"] != "cli" {
		t.Fatalf("ls -o json: %v %q", err, r.stdout)
	}
	expires := listed.Sandboxes[0].ExpiresAt
	r = kiln(t, "__complete", "sandbox", "exec", "")
	mustContain(t, "ID completion", r.stdout, id+"\tRunning wasm\n", ":4\n")

	if r = run("exec", id, "--", "echo", "hello", "world"); r.code != 0 || r.stdout != "hello world\n" {
		t.Errorf("exec echo: exit %d, stdout %q", r.code, r.stdout)
	}
	if r = run("exec", id, "--", "echo $GREETING >&2"); r.code != 0 || r.stderr != "hi\n" || r.stdout != "" {
		t.Errorf("exec to stderr with the sandbox's env: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r = run("exec", id, "--", "false"); r.code != 1 || r.stderr != "" {
		t.Errorf("exec false: exit %d, stderr %q", r.code, r.stderr)
	}
	r = run("-o", "json", "exec", id, "--", "echo", "json")
	mustContain(t, "exec -o json", r.stdout, `"type":"init"`, `{"type":"stdout","text":"json",`, `"type":"execution_complete"`)
	if r = run("exec", id, "--timeout", "1s", "--", "sleep", "10"); r.code != exitFailure || !strings.Contains(r.stderr, "did not finish within --timeout 1s") {
		t.Errorf("exec past its timeout: exit %d, stderr %q", r.code, r.stderr)
	}

	// A 3 MiB random file in and back out, byte-identical; progress is
	// drawn as on a terminal.
	old := stderrIsTerminal
	stderrIsTerminal = func(io.Writer) bool { return true }
	t.Cleanup(func() { stderrIsTerminal = old })
	dir := t.TempDir()
	data := make([]byte, 3<<20)
	rand.Read(data)
	src := filepath.Join(dir, "blob.bin")
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if r = run("exec", id, "--", "mkdir /data"); r.code != 0 {
		t.Fatalf("mkdir: %d", r.code)
	}
	r = run("cp", src, id+":/data/")
	if r.code != 0 || r.stdout != "Copied 3 MiB to "+id+":/data/blob.bin.\n" {
		t.Fatalf("cp in: exit %d, %q", r.code, r.stdout)
	}
	mustContain(t, "upload progress", r.stderr, "Uploading blob.bin: ", "of 3 MiB (100%)", "/s\x1b[K\n")
	if r = run("exec", id, "--", "ls /data"); !strings.Contains(r.stdout, "blob.bin") {
		t.Errorf("ls /data: %q", r.stdout)
	}
	// exec prints output byte for byte: a line longer than the 64 KiB
	// pieces it comes in, and a last line without an ending.
	text := strings.Repeat("x", 150<<10) + "\n\nend"
	if err := os.WriteFile(filepath.Join(dir, "long.txt"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if r = run("cp", filepath.Join(dir, "long.txt"), id+":/data/"); r.code != 0 {
		t.Fatalf("cp long.txt: exit %d", r.code)
	}
	if r = run("exec", id, "--", "cat /data/long.txt"); r.code != 0 || r.stdout != text {
		t.Errorf("exec cat of a long line: exit %d, %d bytes, %d newlines; want %d bytes, 2 newlines", r.code, len(r.stdout), strings.Count(r.stdout, "\n"), len(text))
	}
	r = run("cp", id+":/data/blob.bin", dir+"/back.bin")
	if r.code != 0 {
		t.Fatalf("cp out: exit %d", r.code)
	}
	mustContain(t, "download progress", r.stderr, "Downloading blob.bin: ", "(100%)")
	back, err := os.ReadFile(filepath.Join(dir, "back.bin"))
	if err != nil || !bytes.Equal(back, data) {
		t.Fatalf("the copy back differs: %v, %d bytes of %d", err, len(back), len(data))
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.part")); len(left) > 0 {
		t.Errorf("partial files left: %v", left)
	}
	if r = run("cp", id+":/data/nope", dir); r.code != exitFailure || !strings.Contains(r.stderr, id+":/data/nope: no such file in the sandbox") {
		t.Errorf("cp of a missing file: exit %d, %q", r.code, r.stderr)
	}
	stderrIsTerminal = old

	// Pause on wasm: a clear refusal.
	r = run("pause", id)
	if r.code != exitFailure {
		t.Errorf("pause on wasm: exit %d", r.code)
	}
	mustContain(t, "pause on wasm", r.stderr, `error: sandbox runtime "wasm" does not support pause`, "Only docker sandboxes can pause")

	r = run("renew", id, "--timeout", "2h")
	if !strings.HasPrefix(r.stdout, "Sandbox "+id+" now expires in 2h00m") && !strings.HasPrefix(r.stdout, "Sandbox "+id+" now expires in 1h59m") {
		t.Errorf("renew: %q", r.stdout)
	}
	r = run("-o", "json", "ls")
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || len(listed.Sandboxes) != 1 || listed.Sandboxes[0].ExpiresAt.Sub(expires) < 100*time.Minute {
		t.Errorf("after renew: %v, expiry %v (was %v)", err, listed.Sandboxes, expires)
	}

	if r = run("rm", id); r.code != exitFailure || !strings.Contains(r.stderr, "rerun with --yes") {
		t.Errorf("rm without --yes off a terminal: exit %d, %q", r.code, r.stderr)
	}
	if r = run("rm", "--yes", id); r.code != 0 || r.stdout != "Deleted sandbox "+id+".\n" {
		t.Errorf("rm: exit %d, %q", r.code, r.stdout)
	}
	for _, args := range [][]string{{"exec", id, "--", "true"}, {"rm", "-y", id}, {"cp", src, id + ":/x"}} {
		r = run(args...)
		if r.code != exitFailure || !strings.HasPrefix(r.stderr, "error: sandbox "+id+" not found\n") {
			t.Errorf("%v after rm: exit %d, %q", args, r.code, r.stderr)
		}
	}
	if r = run("ls"); !strings.HasPrefix(r.stdout, "No sandboxes.") {
		t.Errorf("ls after rm: %q", r.stdout)
	}
}
