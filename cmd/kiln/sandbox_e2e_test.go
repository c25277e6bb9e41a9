package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

const sandboxTestImage = "kiln-test/busybox:latest"

// needDocker skips without a Docker engine and its test image (.ci/docker-up
// makes both), or fails under KILN_REQUIRE_DOCKER=1 (make test).
func needDocker(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve with Docker sandboxes")
	}
	if err := exec.Command("docker", "image", "inspect", sandboxTestImage).Run(); err != nil {
		if os.Getenv("KILN_REQUIRE_DOCKER") == "1" {
			t.Fatalf("no Docker engine with %s (KILN_REQUIRE_DOCKER=1: run .ci/docker-up): %v", sandboxTestImage, err)
		}
		t.Skipf("no Docker engine with %s (run .ci/docker-up): %v", sandboxTestImage, err)
	}
}

// sbxCall calls the sandbox API of a kiln serve process.
func sbxCall(t *testing.T, srv *procServer, method, path string, body any, hdr ...string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+srv.addr+path, rd)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	if out == nil {
		out = map[string]any{"raw": string(raw)}
	}
	return resp.StatusCode, out
}

// endpoint returns a sandbox's execution API base URL and token.
func endpoint(t *testing.T, srv *procServer, id string) (string, string) {
	t.Helper()
	code, ep := sbxCall(t, srv, "GET", "/v1/sandboxes/"+id+"/endpoints/44772", nil)
	if code != 200 {
		t.Fatalf("endpoint: %d %v", code, ep)
	}
	return "http://" + ep["endpoint"].(string), ep["headers"].(map[string]any)["X-EXECD-ACCESS-TOKEN"].(string)
}

// runIn runs a command through a sandbox's execution API and returns the
// stdout it streamed, each line (an event, as execd frames them) with a
// "\n" ending.
func runIn(t *testing.T, base, token, command string) (int, string) {
	t.Helper()
	code, out, _ := runFor(t, base, token, command, 0)
	return code, out
}

// runFor is runIn with a timeout in milliseconds (0: none), also
// returning the type of the stream's last event and its error's evalue.
func runFor(t *testing.T, base, token, command string, timeoutMs int) (int, string, string) {
	t.Helper()
	req := map[string]any{"command": command}
	if timeoutMs > 0 {
		req["timeout"] = timeoutMs
	}
	b, _ := json.Marshal(req)
	hr, _ := http.NewRequest("POST", base+"/command", bytes.NewReader(b))
	hr.Header.Set("X-EXECD-ACCESS-TOKEN", token)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Logf("POST %s/command: %d %s", base, resp.StatusCode, raw)
	}
	var stdout strings.Builder
	last := ""
	for _, chunk := range strings.Split(string(raw), "\n\n") {
		var ev struct {
			Type, Text string
			Error      struct{ Ename, Evalue string }
		}
		if json.Unmarshal([]byte(strings.TrimPrefix(chunk, "data: ")), &ev) != nil {
			continue
		}
		if ev.Type == "stdout" {
			stdout.WriteString(ev.Text)
			if ev.Text != "\n" {
				stdout.WriteString("\n")
			}
		}
		if ev.Type != "ping" {
			last = ev.Type + ":" + ev.Error.Ename + ":" + ev.Error.Evalue
		}
	}
	return resp.StatusCode, stdout.String(), last
}

// TestSandboxJSRunaways: on the js runtime, through the execution API, an
// endless loop is stopped by the command's timeout and a memory bomb at
// the sandbox's memory cap, and the server stays healthy and serves the
// next command.
func TestSandboxJSRunaways(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	srv := startProc(t, procAddr(t), t.TempDir(), "DOCKER_HOST=unix:///nonexistent.sock")
	code, sb := sbxCall(t, srv, "POST", "/v1/sandboxes", map[string]any{"image": map[string]string{"uri": "js"},
		"resourceLimits": map[string]string{"memory": "64Mi"}, "extensions": map[string]string{"kiln.runtime": "js"}})
	if code != 202 {
		t.Fatalf("create: %d %v", code, sb)
	}
	base, token := endpoint(t, srv, sb["id"].(string))
	// The first script waits for the engine's compile (cold cache).
	if code, out, _ := runFor(t, base, token, `js -e 'console.log(6*7)'`, 120_000); code != 200 || out != "42\n" {
		t.Fatalf("a script: %d %q", code, out)
	}
	start := time.Now()
	code, _, last := runFor(t, base, token, `js -e 'while(true){}'`, 1000)
	if took := time.Since(start); code != 200 || !strings.HasPrefix(last, "error:") || took > 10*time.Second {
		t.Errorf("an endless loop with a 1 s timeout: %d, last event %q after %s", code, last, took)
	}
	code, _, last = runFor(t, base, token, `js -e 'const k=[]; for(;;) k.push(new Uint8Array(1<<20))'`, 120_000)
	if code != 200 || last != "error:CommandExecError:137" {
		t.Errorf("a memory bomb at 64 MiB: %d, last event %q", code, last)
	}
	if code, _ := sbxCall(t, srv, "GET", "/health", nil); code != 200 {
		t.Errorf("health after the runaways: %d", code)
	}
	if code, out, _ := runFor(t, base, token, `js -e 'console.log("still here")'`, 30_000); code != 200 || out != "still here\n" {
		t.Errorf("the next script: %d %q", code, out)
	}
}

// sdkResult is what sandbox/testdata/npm/sdk-check.mjs prints.
type sdkResult struct {
	ID, State, PausedState, ResumedState, PauseError, AfterKill string
	Stdout, Stderr, Lines, ErrLines, AfterResume, JSStdout      []string // message texts
	ExitCode, FailedExitCode, FileBytes, JSExitCode             int
	FileSame, Renewed                                           bool
	CreateMs, RoundTripMs                                       float64
}

// TestSandboxSDKEndToEnd points OpenSandbox's own JavaScript SDK
// (@alibaba-group/opensandbox from npm, unmodified) at a kiln serve, on the
// docker runtime, the wasm one and the js one: create and wait until
// ready, a command's output and a failing one's exit code, a 1 MiB file
// written and read back byte for byte (on js, by a script too), info,
// pause and resume (501 on wasm and js, which cannot pause), renew, kill
// and a 404 afterwards.
func TestSandboxSDKEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	sdk := filepath.Join("..", "..", "sandbox", "testdata", "npm")
	if _, err := os.Stat(filepath.Join(sdk, "node_modules", "@alibaba-group", "opensandbox")); err != nil {
		t.Fatalf("OpenSandbox's SDK is not installed (make deps): %v", err)
	}
	for _, c := range []struct{ runtime, image string }{{"docker", sandboxTestImage}, {"wasm", "wasm"}, {"js", "js"}} {
		t.Run(c.runtime, func(t *testing.T) {
			if c.runtime == "docker" {
				needDocker(t)
			}
			srv := startProc(t, procAddr(t), t.TempDir(), "KILN_SANDBOX_IMAGE="+sandboxTestImage)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", "sdk-check.mjs", srv.addr, c.image, c.runtime)
			cmd.Dir = sdk
			out, err := cmd.Output()
			if err != nil {
				var stderr []byte
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = ee.Stderr
				}
				t.Fatalf("the SDK failed: %v\n%s\n%s\nserver:\n%s", err, out, stderr, srv.logs.String())
			}
			var got sdkResult
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			t.Logf("create %.0f ms, command round trip %.0f ms", got.CreateMs, got.RoundTripMs)
			if !slices.Equal(got.Stdout, []string{"hi", "hello from env"}) || !slices.Equal(got.Stderr, []string{"oops"}) || got.ExitCode != 0 || got.FailedExitCode != 3 {
				t.Errorf("commands: %+v", got)
			}
			// One message per line without its ending, as execd sends
			// them; an empty line is "\n".
			if !slices.Equal(got.Lines, []string{"one", "two", "\n", "three"}) || !slices.Equal(got.ErrLines, []string{"e1", "e2"}) {
				t.Errorf("lines: stdout %q, stderr %q", got.Lines, got.ErrLines)
			}
			if got.FileBytes != 1<<20 || !got.FileSame {
				t.Errorf("the 1 MiB file came back as %d bytes, same %v", got.FileBytes, got.FileSame)
			}
			if c.runtime == "js" && (!slices.Equal(got.JSStdout, []string{"hello from env 1048576"}) || got.JSExitCode != 5) {
				t.Errorf("a js command: exit code %d, stdout %q", got.JSExitCode, got.JSStdout)
			}
			pause := got.PausedState == "Paused" && got.ResumedState == "Running"
			if c.runtime != "docker" { // wasm and js cannot pause
				pause = got.PauseError == "501"
			}
			if got.State != "Running" || !pause || !slices.Equal(got.AfterResume, []string{"after resume"}) {
				t.Errorf("states: %+v", got)
			}
			if !got.Renewed || got.AfterKill != "404" {
				t.Errorf("renew %v, after kill %q", got.Renewed, got.AfterKill)
			}
			if c.runtime == "docker" {
				containerEnds(t, got.ID)
			}
		})
	}
}

// removeContainers removes the containers of the docker sandbox id,
// retired or not, one at a time (many at once can hang Docker 20.10:
// sandbox/docker's remove).
func removeContainers(id string) {
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=io.kiln.sandbox="+id).Output()
	for _, c := range strings.Fields(string(out)) {
		exec.Command("docker", "rm", "-f", c).Run()
	}
}

// containerEnds checks the container of the docker sandbox id after its
// delete: none of the sandbox's processes runs (its container is gone,
// or retired with its init and kiln-execd alone), and the container is
// removed within 20 seconds.
func containerEnds(t *testing.T, id string) {
	t.Helper()
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=io.kiln.sandbox="+id).Output()
	for _, c := range strings.Fields(string(out)) {
		top, err := exec.Command("docker", "top", c, "-o", "pid,comm").Output()
		if err != nil {
			continue // it stopped meanwhile
		}
		for _, line := range strings.Split(strings.TrimSpace(string(top)), "\n")[1:] {
			if comm := strings.Fields(line)[1]; comm != "docker-init" && comm != "kiln-execd" {
				t.Errorf("%s still runs in the container of the deleted sandbox %s", comm, id)
			}
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=io.kiln.sandbox="+id).Output()
		if len(bytes.TrimSpace(out)) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the container of the deleted sandbox %s is still there after 20 s: %s", id, out)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSandboxSecurityAndRestart: a sandbox's execution API refuses a
// request without its token and with another sandbox's; a host path
// outside the grants is refused; no network inside; after a SIGKILL of
// Kiln a sandbox created before is usable again, and one whose timeout
// passed while Kiln was down is destroyed once it is back.
func TestSandboxSecurityAndRestart(t *testing.T) {
	needDocker(t)
	data := t.TempDir()
	env := "KILN_SANDBOX_IMAGE=" + sandboxTestImage
	srv := startProc(t, procAddr(t), data, env)
	create := func(body map[string]any) string {
		code, sb := sbxCall(t, srv, "POST", "/v1/sandboxes", body)
		if code != 202 {
			t.Fatalf("create: %d %v", code, sb)
		}
		id := sb["id"].(string)
		t.Cleanup(func() { removeContainers(id) })
		return id
	}
	keep := create(map[string]any{"image": map[string]string{"uri": sandboxTestImage}, "entrypoint": []string{"tail", "-f", "/dev/null"}})
	short := create(map[string]any{"image": map[string]string{"uri": sandboxTestImage}, "entrypoint": []string{"tail", "-f", "/dev/null"}, "timeout": 3})
	base, token := endpoint(t, srv, keep)
	_, otherToken := endpoint(t, srv, short)
	if code, out := runIn(t, base, token, "echo inside; cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '"); code != 200 || out != "inside\nlo\n" {
		t.Errorf("a command with the token: %d %q (want only lo for network)", code, out)
	}
	for _, tok := range []string{"", otherToken} {
		if code, _ := runIn(t, base, tok, "echo nope"); code != 401 {
			t.Errorf("the execution API with token %q: %d, want 401", tok[:min(len(tok), 6)], code)
		}
	}
	code, body := sbxCall(t, srv, "POST", "/v1/sandboxes", map[string]any{"image": map[string]string{"uri": sandboxTestImage},
		"entrypoint": []string{"tail", "-f", "/dev/null"}, "volumes": []map[string]any{{"name": "etc", "mountPath": "/host", "readOnly": true, "host": map[string]string{"path": "/etc"}}}})
	if code != 403 || !strings.Contains(body["message"].(string), "not in a folder granted") {
		t.Errorf("a host path outside the grants: %d %v", code, body)
	}
	code, body = sbxCall(t, srv, "POST", "/v1/sandboxes", map[string]any{"image": map[string]string{"uri": "kiln-test/no-such-image:1"}, "entrypoint": []string{"true"}})
	if code < 400 || code >= 600 || body["message"] == "" {
		t.Errorf("an unknown image: %d %v", code, body)
	}

	srv.kill()
	time.Sleep(4 * time.Second) // the short one's timeout passes while Kiln is down
	srv = startProc(t, srv.addr, data, env)
	base, token = endpoint(t, srv, keep)
	if code, out := runIn(t, base, token, "echo still here"); code != 200 || out != "still here\n" {
		t.Errorf("after the restart: %d %q", code, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, sb := sbxCall(t, srv, "GET", "/v1/sandboxes/"+short, nil)
		st, _ := sb["status"].(map[string]any)
		if code == 200 && st["state"] == "Terminated" && st["reason"] == "ttl_expiry" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the expired sandbox: %d %v", code, sb)
		}
		time.Sleep(100 * time.Millisecond)
	}
	containerEnds(t, short)
	if code, _ := sbxCall(t, srv, "DELETE", "/v1/sandboxes/"+keep, nil); code != 204 {
		t.Errorf("delete: %d", code)
	}
}

// TestSandboxEgress: a docker sandbox whose networkPolicy allows one
// loopback port of the host reaches it through the proxy in the sandbox
// (and still does after Kiln restarts) and is refused another, which a
// deny rule takes out of the allowlist; a default
// sandbox reaches neither; a malformed target is refused at create.
func TestSandboxEgress(t *testing.T) {
	needDocker(t)
	var servers [2]*httptest.Server
	for i := range servers {
		body := fmt.Sprintf("host server %d\n", i)
		servers[i] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
		defer servers[i].Close()
	}
	allowed, refused := strings.TrimPrefix(servers[0].URL, "http://"), strings.TrimPrefix(servers[1].URL, "http://")
	data := t.TempDir()
	env := "KILN_SANDBOX_IMAGE=" + sandboxTestImage
	srv := startProc(t, procAddr(t), data, env)
	create := func(policy any) string {
		body := map[string]any{"image": map[string]string{"uri": sandboxTestImage}, "entrypoint": []string{"tail", "-f", "/dev/null"}}
		if policy != nil {
			body["networkPolicy"] = policy
		}
		code, sb := sbxCall(t, srv, "POST", "/v1/sandboxes", body)
		if code != 202 {
			t.Fatalf("create: %d %v", code, sb)
		}
		id := sb["id"].(string)
		t.Cleanup(func() { removeContainers(id) })
		return id
	}
	// The second server is allowed too, but a deny rule takes it back.
	egress := create(map[string]any{"defaultAction": "deny", "egress": []map[string]string{
		{"action": "allow", "target": allowed}, {"action": "allow", "target": refused}, {"action": "deny", "target": refused}}})
	plain := create(nil)
	// The image's busybox wget crashes (SIGSEGV) whenever http_proxy is
	// set, proxy or not, so the request goes to $http_proxy with nc.
	fetch := `p=${http_proxy#http://}; printf 'GET http://%[1]s/ HTTP/1.1\r\nHost: %[1]s\r\n\r\n' | nc -w 5 ${p%%:*} ${p#*:} 2>&1; echo exit=$?`
	check := func(when string) {
		base, token := endpoint(t, srv, egress)
		if code, out := runIn(t, base, token, fmt.Sprintf(fetch, allowed)); code != 200 || !strings.HasPrefix(out, "HTTP/1.1 200 OK") || !strings.Contains(out, "\n\nhost server 0\n") {
			t.Errorf("%s: the allowed host: %d %q", when, code, out)
		}
		if code, out := runIn(t, base, token, fmt.Sprintf(fetch, refused)); code != 200 || !strings.HasPrefix(out, "HTTP/1.1 403 Forbidden") || !strings.Contains(out, "not allowed by the sandbox's networkPolicy") {
			t.Errorf("%s: another port: %d %q, want a 403", when, code, out)
		}
	}
	check("at create")
	base, token := endpoint(t, srv, plain)
	for _, target := range []string{allowed, refused} {
		if code, out := runIn(t, base, token, "env | grep -ci _proxy; wget -qO- -T 5 http://"+target+"/ 2>&1; echo exit=$?"); code != 200 || strings.Contains(out, "host server") || !strings.HasPrefix(out, "0\n") || strings.HasSuffix(out, "exit=0\n") {
			t.Errorf("a default sandbox, %s: %d %q (want no proxy and no network)", target, code, out)
		}
	}
	code, body := sbxCall(t, srv, "POST", "/v1/sandboxes", map[string]any{"image": map[string]string{"uri": sandboxTestImage},
		"networkPolicy": map[string]any{"egress": []map[string]string{{"action": "allow", "target": "http://" + allowed}}}})
	if code != 400 || !strings.Contains(fmt.Sprint(body["message"]), "without a scheme") {
		t.Errorf("a malformed target: %d %v", code, body)
	}

	srv.kill()
	srv = startProc(t, srv.addr, data, env)
	check("after a restart")
	if code, _ := sbxCall(t, srv, "DELETE", "/v1/sandboxes/"+egress, nil); code != 204 {
		t.Errorf("delete: %d", code)
	}
	if left, _ := filepath.Glob(filepath.Join(data, "egress", "*")); len(left) != 0 {
		t.Errorf("the deleted sandbox's egress folder is left: %v", left)
	}
}

// TestSandboxToolsEndToEnd drives kiln serve (wasm as the default
// runtime, sandbox.write_file held by $KILN_SANDBOX_INTERRUPT_ON) with the
// scripted model: sandbox.exec makes the thread's sandbox and its files
// stay for the next calls; the write waits in Action until approved;
// js.eval runs in a js sandbox of the same thread; deleting the thread
// destroys both.
func TestSandboxToolsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	srv := startProc(t, procAddr(t), t.TempDir(), "DOCKER_HOST=unix:///nonexistent.sock",
		"KILN_SANDBOX_RUNTIME=wasm", "KILN_SANDBOX_INTERRUPT_ON=sandbox.write_file")
	c := srv.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	th, err := c.CreateThread(ctx, core.ThreadInput{Title: "sandbox tools"})
	if err != nil {
		t.Fatal(err)
	}
	script := strings.Join([]string{
		`tool sandbox.exec {"command": "echo made > /note.txt; cat /note.txt; echo warn >&2"}`,
		`tool sandbox.write_file {"path": "/w/approved.txt", "content": "approved"}`,
		`tool sandbox.read_file {"path": "/w/approved.txt"}`,
		`tool sandbox.exec {"command": "cat /note.txt; false"}`,
		`tool js.eval {"code": "[1, 2, 3].map(x => x * 2)"}`,
		"text done",
	}, "\n")
	run, err := c.StartRun(ctx, th.ID, core.RunRequest{Input: core.RunInput{Text: script}, Model: "scripted"})
	if err != nil {
		t.Fatal(err)
	}
	item := firstAction(ctx, t, c, "the held write")
	if item.Tool != "sandbox.write_file" {
		t.Fatalf("action item %+v, want the held sandbox.write_file", item)
	}
	if _, err := c.Decide(ctx, item.InterruptID, core.Decision{Decision: core.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	if r := waitStatus(ctx, t, c, run.ID, core.RunSucceeded, core.RunFailed); r.Status != core.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	msgs, err := c.Messages(ctx, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	var results []string
	for _, m := range msgs {
		if m.Role == core.RoleTool {
			results = append(results, m.Name+": "+core.PartsText(m.Content()))
		}
	}
	want := []string{
		"sandbox.exec: made\nwarn\n[exit code 0]",
		"sandbox.write_file: wrote 8 bytes to /w/approved.txt",
		"sandbox.read_file: approved",
		"sandbox.exec: made\n[exit code 1]",
		"js.eval: [ 2, 4, 6 ]\n[exit code 0]",
	}
	if !slices.Equal(results, want) {
		t.Fatalf("tool results:\n%q\nwant\n%q", results, want)
	}

	// The thread has one sandbox per runtime, kept out of the API's reach
	// to reassign; deleting the thread destroys them.
	code, page := sbxCall(t, srv, "GET", "/v1/sandboxes?metadata="+url.QueryEscape("kiln.io/thread="+th.ID), nil)
	items, _ := page["items"].([]any)
	if code != 200 || len(items) != 2 {
		t.Fatalf("the thread's sandboxes: %d %v", code, page)
	}
	if err := c.DeleteThread(ctx, th.ID); err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		id := it.(map[string]any)["id"].(string)
		waitFor(t, "the deleted thread's sandbox to end", func() bool {
			_, sb := sbxCall(t, srv, "GET", "/v1/sandboxes/"+id, nil)
			status, _ := sb["status"].(map[string]any)
			return status["state"] == "Terminated" && status["reason"] == "thread_deleted"
		})
	}
}
