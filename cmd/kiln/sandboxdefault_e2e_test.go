package main

import (
	"strings"
	"testing"
)

// TestSandboxRuntimeSettingEndToEnd: against a real kiln serve whose
// default runtime is wasm ($KILN_SANDBOX_RUNTIME; no Docker), kiln
// settings set sandbox_runtime=js makes a create over the OpenSandbox API
// that names no runtime land on js, with no restart, while a create
// naming wasm keeps it; an unknown runtime is refused with the enabled
// ones listed, and changes nothing; the setting and kiln sandbox create
// --runtime complete the enabled runtimes; the setting holds across a
// restart; with the js plugin disabled, creates go to wasm again, the
// log says why (once) and kiln settings marks it, and js can no longer
// be chosen.
func TestSandboxRuntimeSettingEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	data := t.TempDir()
	env := []string{"DOCKER_HOST=unix:///nonexistent.sock", "KILN_SANDBOX_RUNTIME=wasm"}
	srv := startProc(t, procAddr(t), data, env...)
	useServer(t, "http://"+srv.addr)
	create := func(ext map[string]string) string {
		t.Helper()
		body := map[string]any{"timeout": 600}
		if ext != nil {
			body["extensions"] = ext
		}
		code, sb := sbxCall(t, srv, "POST", "/v1/sandboxes", body)
		if code != 202 {
			t.Fatalf("create: %d %v\nserver:\n%s", code, sb, srv.logs.String())
		}
		return sb["runtime"].(string)
	}
	if got := create(nil); got != "wasm" {
		t.Fatalf("before any setting: on %q, want the server's default wasm", got)
	}
	settings := func() string { t.Helper(); return kilnOK(t, "", "settings").stdout }

	r := kiln(t, "settings", "set", "sandbox_runtime=nope")
	if r.code == 0 || !strings.Contains(r.stderr, `sandbox_runtime "nope"`) || !strings.Contains(r.stderr, "js, wasm") {
		t.Errorf("an unknown runtime: exit %d, stderr %q; want a refusal listing js, wasm", r.code, r.stderr)
	}
	mustContain(t, "settings after the refusal", settings(), "Sandbox runtime: server default\n")

	r = kilnOK(t, "", "__complete", "settings", "set", "sandbox_runtime=")
	mustContain(t, "sandbox_runtime completion", r.stdout, "sandbox_runtime=js\nsandbox_runtime=wasm\n:4\n")
	r = kilnOK(t, "", "__complete", "sandbox", "create", "--runtime", "")
	mustContain(t, "--runtime completion", r.stdout, "js\nwasm\n:4\n")
	r = kilnOK(t, "", "settings", "set", "sandbox_runtime=js")
	mustContain(t, "settings set sandbox_runtime=js", r.stdout, "Sandbox runtime: js\n")
	if got := create(nil); got != "js" {
		t.Errorf("with sandbox_runtime=js: a create naming none is on %q", got)
	}
	if got := create(map[string]string{"kiln.runtime": "wasm"}); got != "wasm" {
		t.Errorf("a create naming wasm is on %q", got)
	}

	srv.kill()
	srv = startProc(t, procAddr(t), data, env...)
	useServer(t, "http://"+srv.addr)
	mustContain(t, "settings after a restart", settings(), "Sandbox runtime: js\n")
	if got := create(nil); got != "js" {
		t.Errorf("after a restart: a create naming none is on %q, want js", got)
	}

	kilnOK(t, "", "plugin", "disable", "js")
	for range 2 {
		if got := create(nil); got != "wasm" {
			t.Errorf("js disabled: a create naming none is on %q, want the server's default wasm", got)
		}
	}
	mustContain(t, "settings with js disabled", settings(), "Sandbox runtime: js (not enabled: sandboxes created without a runtime get the server's default)\n")
	r = kiln(t, "settings", "set", "sandbox_runtime=js")
	if r.code == 0 || !strings.Contains(r.stderr, "the enabled ones are wasm") {
		t.Errorf("choosing a disabled runtime: exit %d, stderr %q", r.code, r.stderr)
	}
	r = kilnOK(t, "", "settings", "set", "sandbox_runtime=")
	mustContain(t, "settings set sandbox_runtime=", r.stdout, "Sandbox runtime: server default\n")

	// The log is whole once the server is gone.
	srv.kill()
	if n := strings.Count(srv.logs.String(), "the sandbox runtime chosen in the settings is not enabled"); n != 1 {
		t.Errorf("the server's log says %d times that js was passed over, want once", n)
	}
	mustContain(t, "the server's log", srv.logs.String(), "chosen=js", "runtime=wasm")
}
