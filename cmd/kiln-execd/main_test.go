package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBinaryOverUnixSocket(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "kiln-execd")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
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
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	get := func(method, path, body string) (*http.Response, string, error) {
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
	var err error
	for range 100 {
		var resp *http.Response
		if resp, _, err = get("GET", "/ping", ""); err == nil && resp.StatusCode == 200 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("ping: %v; %s", err, stderr.String())
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket %v %v", fi.Mode(), err)
	}
	resp, body, err := get("POST", "/command", `{"command":"echo hi"}`)
	if err != nil || resp.StatusCode != 200 || !strings.Contains(body, `"type":"stdout","text":"hi\n"`) || !strings.Contains(body, "execution_complete") {
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
