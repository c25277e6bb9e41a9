package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/sandbox/execapi"
)

// build builds kiln-execd, static, into dir.
func build(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "kiln-execd")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// client returns a function that calls the API on the socket sock with
// the token s3cret.
func client(sock string) func(method, path, body string) (*http.Response, string, error) {
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	return func(method, path, body string) (*http.Response, string, error) {
		req, _ := http.NewRequest(method, "http://execd"+path, strings.NewReader(body))
		req.Header.Set("X-EXECD-ACCESS-TOKEN", "s3cret")
		resp, err := c.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, string(b), err
	}
}

// waitPing waits until the API answers /ping.
func waitPing(t *testing.T, get func(method, path, body string) (*http.Response, string, error), stderr fmt.Stringer) {
	t.Helper()
	var err error
	for range 100 {
		var resp *http.Response
		if resp, _, err = get("GET", "/ping", ""); err == nil && resp.StatusCode == 200 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("ping: %v; %s", err, stderr)
}

func TestBinaryOverUnixSocket(t *testing.T) {
	dir := t.TempDir()
	bin := build(t, dir)
	sock := filepath.Join(dir, "execd.sock")
	os.WriteFile(sock, nil, 0o600) // not a socket: must be refused, not removed
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600)
	stop := filepath.Join(dir, "stop")

	if out, err := exec.Command(bin, "--listen", "unix:"+sock, "--token-file", tokenFile).CombinedOutput(); err == nil {
		t.Fatalf("served over a regular file: %s", out)
	}
	os.Remove(sock)
	if out, err := exec.Command(bin, "--listen", "unix:"+sock).CombinedOutput(); err == nil || !strings.Contains(string(out), "no access token") {
		t.Fatalf("started without a token: %v %s", err, out)
	}

	cmd := exec.Command(bin, "--listen", "unix:"+sock, "--token-file", tokenFile, "--",
		"sh", "-c", "while [ ! -e "+stop+" ]; do sleep 0.05; done; exit 7")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	get := client(sock)
	waitPing(t, get, &stderr)
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket %v %v", fi.Mode(), err)
	}
	resp, body, err := get("POST", "/command", `{"command":"echo hi"}`)
	if err != nil || resp.StatusCode != 200 || !strings.Contains(body, `"type":"stdout","text":"hi",`) || !strings.Contains(body, "execution_complete") {
		t.Fatalf("command: %v %s", err, body)
	}
	os.WriteFile(stop, nil, 0o644)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("kiln-execd did not exit with its child")
	}
	if strings.Contains(stderr.String(), "s3cret") {
		t.Fatalf("the token was logged: %s", stderr.String())
	}
}

// TestPID1 runs kiln-execd as PID 1 of a new PID namespace (unshare, as
// root): orphans are reaped, and a SIGTERM to PID 1 reaches the main
// command, whose exit code kiln-execd exits with.
func TestPID1(t *testing.T) {
	if exec.Command("unshare", "-p", "-f", "--mount-proc", "true").Run() != nil {
		t.Skip("cannot make a PID namespace here (unshare -p needs root)")
	}
	dir := t.TempDir()
	bin := build(t, dir)
	sock := filepath.Join(dir, "execd.sock")
	cmd := exec.Command("unshare", "-p", "-f", "--mount-proc", bin, "--listen", "unix:"+sock, "--",
		"sh", "-c", "trap 'exit 5' TERM; while :; do sleep 0.05; done")
	cmd.Env = append(os.Environ(), "KILN_EXECD_TOKEN=s3cret")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	get := client(sock)
	waitPing(t, get, &stderr)
	// An orphan of a command reparents to PID 1 and ends there. (grep -s:
	// the loop's sleeps come and go between the glob and the read.)
	if _, body, err := get("POST", "/command", `{"command":"(sleep 0.1 &) ; sleep 0.5; grep -ls '^[0-9]* ([^)]*) Z' /proc/[0-9]*/stat; echo checked"}`); err != nil || !strings.Contains(body, `"text":"checked",`) || strings.Contains(body, "/proc/") {
		t.Fatalf("zombies left: %v %s", err, body)
	}
	if _, body, err := get("POST", "/command", `{"command":"echo $KILN_EXECD_TOKEN; kill -TERM 1"}`); err != nil || strings.Contains(body, "s3cret") {
		t.Fatalf("kill: %v %s", err, body)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 5 {
			t.Fatalf("exit: %v; %s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("kiln-execd did not exit with its child")
	}
}

// nsProcesses lists the host PIDs and commands of the processes in the
// PID namespace of the host process pid.
func nsProcesses(t *testing.T, pid int) map[int]string {
	t.Helper()
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var p int
		if _, err := fmt.Sscan(e.Name(), &p); err != nil {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p)); err != nil || l != ns {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil || strings.Contains(string(stat), ") Z ") {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p))
		out[p] = strings.TrimSpace(string(comm))
	}
	return out
}

// TestRetire runs kiln-execd --retire as PID 1 of a new PID namespace
// (unshare, as root): POST /kiln/retire needs the token, ends every
// other process of the namespace (the main command, a command's
// detached children) before it answers, and leaves kiln-execd serving
// 410s rather than exiting with its main command. Without --retire the
// route does not exist.
func TestRetire(t *testing.T) {
	if exec.Command("unshare", "-p", "-f", "--mount-proc", "true").Run() != nil {
		t.Skip("cannot make a PID namespace here (unshare -p needs root)")
	}
	dir := t.TempDir()
	bin := build(t, dir)
	start := func(sock string, flags ...string) (*exec.Cmd, *strings.Builder) {
		args := append([]string{"-p", "-f", "--mount-proc", "--kill-child", bin, "--listen", "unix:" + sock}, flags...)
		cmd := exec.Command("unshare", append(args, "--", "sleep", "1000")...)
		cmd.Env = append(os.Environ(), "KILN_EXECD_TOKEN=s3cret")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		waitPing(t, client(sock), &stderr)
		return cmd, &stderr
	}

	plain := filepath.Join(dir, "plain.sock")
	start(plain)
	if resp, _, err := client(plain)("POST", execapi.RetirePath, ""); err != nil || resp.StatusCode != 404 {
		t.Fatalf("retire without --retire: %v %v", resp, err)
	}

	sock := filepath.Join(dir, "execd.sock")
	cmd, stderr := start(sock, "--retire")
	get := client(sock)
	if _, body, err := get("POST", "/command", `{"command":"setsid sleep 1000 >/dev/null 2>&1 & echo started"}`); err != nil || !strings.Contains(body, `"text":"started",`) {
		t.Fatalf("command: %v %s", err, body)
	}
	// unshare forks the namespace's PID 1 (kiln-execd, which runs itself
	// again as PID 2 to serve).
	deadline := time.Now().Add(10 * time.Second)
	var init int
	for init == 0 && time.Now().Before(deadline) {
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		fmt.Sscan(string(kids), &init)
		time.Sleep(10 * time.Millisecond)
	}
	// The detached sleep may still be setsid, not yet exec'd, when the
	// command has answered: wait for both sleeps.
	var before map[int]string
	for {
		before = nsProcesses(t, init)
		sleeps := 0
		for _, c := range before {
			if c == "sleep" {
				sleeps++
			}
		}
		if sleeps == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes before the retire: %v; want the main sleep and the detached one", before)
		}
		time.Sleep(10 * time.Millisecond)
	}

	req, _ := http.NewRequest("POST", "http://execd"+execapi.RetirePath, nil)
	req.Header.Set("X-EXECD-ACCESS-TOKEN", "wrong")
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	if resp, err := hc.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("retire with a wrong token: %v %v", resp, err)
	}
	if resp, _, err := get("GET", execapi.RetirePath, ""); err != nil || resp.StatusCode != 405 {
		t.Fatalf("GET retire: %v %v", resp, err)
	}
	if len(nsProcesses(t, init)) != len(before) {
		t.Fatalf("a refused retire ended processes: %v", nsProcesses(t, init))
	}
	if resp, body, err := get("POST", execapi.RetirePath, ""); err != nil || resp.StatusCode != 204 {
		t.Fatalf("retire: %v %v %s", resp, err, body)
	}
	after := nsProcesses(t, init)
	if len(after) != 2 || after[init] != "kiln-execd" {
		t.Fatalf("processes after the retire: %v; want PID 1 and the serving kiln-execd alone", after)
	}
	if resp, body, err := get("POST", "/command", `{"command":"echo hi"}`); err != nil || resp.StatusCode != 410 || !strings.Contains(body, "RETIRED") {
		t.Fatalf("a command after the retire: %v %v %s", resp, err, body)
	}
	// It does not end with its main command, which the retire killed.
	time.Sleep(200 * time.Millisecond)
	if got := nsProcesses(t, init); len(got) != 2 {
		t.Fatalf("kiln-execd ended after the retire: %v; %s", got, stderr)
	}
}
