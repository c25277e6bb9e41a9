package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/mcp/mcpservers"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// everythingServer returns node and the entry script of the npm
// server-everything (plugins/mcp/testdata/npm), skipping the test
// without node.
func everythingServer(t *testing.T) (node, entry string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	entry, err = filepath.Abs(filepath.Join("..", "..", "plugins", "mcp", "testdata", "npm", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(entry); err != nil {
		t.Fatalf("server-everything is not installed; run make deps (%v)", err)
	}
	return node, entry
}

// apiCall sends body (raw JSON, or nothing when "") to the test server and
// returns the status and the response body.
func apiCall(t *testing.T, s *testServer, method, path, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// mcpEntries reads <data>/.mcp.json's entries, compacted.
func mcpEntries(t *testing.T, data string) map[string]string {
	t.Helper()
	entries, err := readMCPFile(filepath.Join(data, mcpConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range entries {
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			t.Fatal(err)
		}
		out[k] = b.String()
	}
	return out
}

// TestMCPServersAddRemove: POST /mcp-servers connects a server and writes
// it into .mcp.json beside the entries there (as written, ${NAME} kept,
// mode 0600); a taken ID (the user's or a plugin's) is a 409 and bad input
// a 400 with the reason, neither changing the file; DELETE disconnects a
// user's server and withdraws its tools, refuses a plugin's naming the
// plugin, and a file left without servers still opens.
func TestMCPServersAddRemove(t *testing.T) {
	node, entry := everythingServer(t)
	data := t.TempDir()
	keep := `{"command":"keep-cmd","env":{"TOKEN":"${KEEP_TOKEN}"},"disabled":true}`
	if err := os.WriteFile(filepath.Join(data, mcpConfigFile), []byte(`{"mcpServers": {"keep": `+keep+`}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, data, "")
	c := sdk(t, s)
	ctx := context.Background()

	t.Setenv("KILN_TEST_GREETING", "hi") // expanded at connect time
	body, _ := json.Marshal(map[string]any{"id": "everything", "command": node, "args": []string{entry, "stdio"}, "env": map[string]string{"GREETING": "${KILN_TEST_GREETING}"}})
	code, out := apiCall(t, s, "POST", "/api/v1/mcp-servers", string(body))
	if code != http.StatusCreated || !strings.Contains(out, `"id":"everything"`) {
		t.Fatalf("add: %d %s", code, out)
	}
	waitFor(t, "the added server to connect", func() bool {
		st, err := s.mcp.Status("everything")
		return err == nil && st.State == "connected"
	})
	tools, err := c.Tools(ctx)
	if err != nil || !slices.ContainsFunc(tools, func(tl core.ToolSpec) bool { return tl.Name == "mcp.everything.echo" }) {
		t.Fatalf("tools after add: %v %v", err, tools)
	}
	entries := mcpEntries(t, data)
	if entries["keep"] != keep || !strings.Contains(entries["everything"], `"env":{"GREETING":"${KILN_TEST_GREETING}"}`) || len(entries) != 2 {
		t.Fatalf("file after add: %v", entries)
	}
	if fi, err := os.Stat(filepath.Join(data, mcpConfigFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode: %v %v", fi.Mode(), err)
	}

	// A plugin's server: its ID is taken, and it goes with its plugin.
	if err := s.mcp.AddServers("acme", []mcpservers.Server{{Name: "bundled", Command: "true"}}); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.mcp.Status("bundled"); st.Plugin != "acme" {
		t.Fatalf("a plugin's server: %+v", st)
	}
	mustContain(t, "ls", kiln(t, "mcp-servers", "ls").stdout, "plugin acme", ".mcp.json")
	before, _ := os.ReadFile(filepath.Join(data, mcpConfigFile))
	for _, tc := range []struct {
		body string
		code int
		want string
	}{
		{`{"id":"everything","command":"x"}`, 409, `"everything\" exists`},
		{`{"id":"keep","command":"x"}`, 409, "keep"},
		{`{"id":"bundled","command":"x"}`, 409, `plugin \"acme\"`},
		{`{"id":"Bad ID","command":"x"}`, 400, "a name is"},
		{`{"id":"","command":"x"}`, 400, "a name is"},
		{`{"id":"x","command":"a","url":"http://h/mcp"}`, 400, "both a command and a url"},
		{`{"id":"x","type":"ftp","url":"http://h/mcp"}`, 400, `type \"ftp\"`},
		{`{"id":"x","type":"http","command":"a"}`, 400, "is for a url"},
		{`{"id":"x"}`, 400, "needs a command"},
		{`{"id":"x","command":"a","trust":"some"}`, 400, "trust"},
		{`{"id":"x","command":"a","timeout":0}`, 400, "timeout 0: want milliseconds from 1 to 86400000"},
		{`{"id":"x","command":"a","headers":{"A":"b"}}`, 400, "headers are for a url"},
		{`{"id":"x","comand":"a"}`, 400, "unknown field"},
		{`{"id":"x","command":"a"`, 400, "malformed JSON"},
		{`{"id":"x","command":"a"} {}`, 400, "after the JSON object"},
		{"{\"id\":\"x\",\"command\":\"a\xff\"}", 400, "UTF-8"},
		{`[]`, 400, "JSON object"},
		{``, 400, "empty"},
	} {
		code, out := apiCall(t, s, "POST", "/api/v1/mcp-servers", tc.body)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("POST %s: %d %s, want %d with %q", tc.body, code, out, tc.code, tc.want)
		}
	}
	if code, out := apiCall(t, s, "DELETE", "/api/v1/mcp-servers/bundled", ""); code != 409 || !strings.Contains(out, "acme") {
		t.Errorf("DELETE a plugin's server: %d %s", code, out)
	}
	if code, out := apiCall(t, s, "DELETE", "/api/v1/mcp-servers/nope", ""); code != 404 {
		t.Errorf("DELETE an unknown server: %d %s", code, out)
	}
	if after, _ := os.ReadFile(filepath.Join(data, mcpConfigFile)); !bytes.Equal(before, after) {
		t.Fatalf("refused requests changed the file:\n%s\n%s", before, after)
	}
	if _, err := s.mcp.Status("x"); core.ErrorCode(err) != core.ENOTFOUND {
		t.Fatalf("a refused server was added: %v", err)
	}

	// Concurrent adds keep each other's entries.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.AddMCPServer(ctx, pluginapi.MCPServerConfig{ID: fmt.Sprintf("c%d", i), Command: "true", Disabled: true})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if entries := mcpEntries(t, data); len(entries) != 10 {
		t.Fatalf("after concurrent adds: %v", entries)
	}

	if err := c.RemoveMCPServer(ctx, "everything"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.mcp.Status("everything"); core.ErrorCode(err) != core.ENOTFOUND {
		t.Fatalf("status after remove: %v", err)
	}
	tools, _ = c.Tools(ctx)
	if slices.ContainsFunc(tools, func(tl core.ToolSpec) bool { return strings.HasPrefix(tl.Name, "mcp.everything.") }) {
		t.Fatal("the removed server's tools are still offered")
	}
	for _, id := range []string{"keep", "c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"} {
		if err := c.RemoveMCPServer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if entries := mcpEntries(t, data); len(entries) != 0 {
		t.Fatalf("after removing all: %v", entries)
	}
	m, err := openMCP(s.svc, data, 0)
	if err != nil {
		t.Fatalf("a file without servers does not open: %v", err)
	}
	m.Close()
}

// TestMCPServersSecrets: the values of a server's variables and headers
// appear in no API answer (add, list, get, the CLI's), no event and no log
// line, even when the server prints them on stderr.
func TestMCPServersSecrets(t *testing.T) {
	data := t.TempDir()
	s := startServer(t, data, "")
	const envSecret, headerSecret = "s3cret-env-value-4711", "s3cret-header-value-0815"

	// Events, from before the adds.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var events lockedBuffer
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/api/v1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			events.Write(append(sc.Bytes(), '\n'))
		}
	}()

	var answers []string
	post := func(v any) {
		b, _ := json.Marshal(v)
		code, out := apiCall(t, s, "POST", "/api/v1/mcp-servers", string(b))
		if code != http.StatusCreated {
			t.Fatalf("add: %d %s", code, out)
		}
		answers = append(answers, out)
	}
	post(map[string]any{"id": "leaky", "command": "sh", "args": []string{"-c", "echo token=$API_TOKEN >&2; exit 3"}, "env": map[string]string{"API_TOKEN": envSecret}})
	post(map[string]any{"id": "remote", "url": "http://127.0.0.1:1/mcp", "headers": map[string]string{"Authorization": headerSecret}})
	waitFor(t, "both servers to fail", func() bool {
		a, _ := s.mcp.Status("leaky")
		b, _ := s.mcp.Status("remote")
		return a.State == "error" && b.State == "error" && strings.Contains(a.Error, "token=")
	})
	if st, _ := s.mcp.Status("leaky"); !strings.Contains(st.Error, "token=[redacted]") {
		t.Errorf("the stderr tail is not redacted: %q", st.Error)
	}
	for _, p := range []string{"/api/v1/mcp-servers", "/api/v1/mcp-servers/leaky", "/api/v1/mcp-servers/remote"} {
		_, out := apiCall(t, s, "GET", p, "")
		answers = append(answers, out)
	}
	r := kiln(t, "mcp-servers", "ls")
	answers = append(answers, r.stdout, r.stderr)
	r = kiln(t, "mcp-servers", "ls", "-o", "json")
	answers = append(answers, r.stdout, r.stderr)
	// The file holds them (for the next start), for the owner only.
	if b, _ := os.ReadFile(filepath.Join(data, mcpConfigFile)); !strings.Contains(string(b), envSecret) {
		t.Fatalf("the file lacks the server's variable: %s", b)
	}
	for _, id := range []string{"leaky", "remote"} {
		code, out := apiCall(t, s, "DELETE", "/api/v1/mcp-servers/"+id, "")
		if code != http.StatusNoContent {
			t.Fatalf("remove %s: %d %s", id, code, out)
		}
		answers = append(answers, out)
	}
	cancel()
	<-streamDone
	logs := s.logs.String()
	if !strings.Contains(logs, "/api/v1/mcp-servers") {
		t.Fatalf("the request log was not captured: %q", logs)
	}
	for what, text := range map[string]string{"answers": strings.Join(answers, "\n"), "events": events.String(), "logs": logs} {
		for _, secret := range []string{envSecret, headerSecret} {
			if strings.Contains(text, secret) {
				t.Errorf("%s show a secret:\n%s", what, text)
			}
		}
	}
}

// TestMCPServersCLI: kiln mcp-servers add (a command after --, or --url
// with --type and --header; --env, --cwd, --trust, --disabled) writes the
// entry through the server, ls lists it, rm removes it, and the server's
// refusals are the command's errors.
func TestMCPServersCLI(t *testing.T) {
	data := t.TempDir()
	startServer(t, data, "")
	r := kiln(t, "mcp-servers", "add", "tool", "--env", "TOKEN=${MY_TOKEN}", "--env", "MODE=a=b", "--cwd", "work", "--trust", "all", "--disabled", "--timeout", "90s", "--", "my-server", "--flag", "arg")
	if r.code != 0 {
		t.Fatalf("add stdio: %d %s", r.code, r.stderr)
	}
	mustContain(t, "add", r.stdout, "Added the MCP server tool (disabled)")
	r = kiln(t, "mcp-servers", "add", "docs", "--url", "https://docs.example.com/mcp", "--type", "sse", "--header", "Authorization: Bearer ${DOCS_TOKEN}", "--disabled", "-o", "json")
	if r.code != 0 {
		t.Fatalf("add http: %d %s", r.code, r.stderr)
	}
	var st pluginapi.MCPServerStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.ID != "docs" || st.Transport != "sse" || st.State != "disabled" {
		t.Fatalf("add -o json: %v %s", err, r.stdout)
	}
	entries := mcpEntries(t, data)
	if entries["tool"] != `{"command":"my-server","args":["--flag","arg"],"env":{"MODE":"a=b","TOKEN":"${MY_TOKEN}"},"cwd":"work","trust":"all","disabled":true,"timeout":90000}` {
		t.Errorf("tool: %s", entries["tool"])
	}
	if entries["docs"] != `{"type":"sse","url":"https://docs.example.com/mcp","headers":{"Authorization":"Bearer ${DOCS_TOKEN}"},"disabled":true}` {
		t.Errorf("docs: %s", entries["docs"])
	}
	r = kiln(t, "mcp-servers", "ls")
	mustContain(t, "ls", r.stdout, "tool", "docs", "disabled", "sse", "FROM", ".mcp.json")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"add", "tool", "--", "x"}, "exists"},
		{[]string{"add", "both", "--url", "http://h/mcp", "--", "x"}, "both a command and a url"},
		{[]string{"add", "none"}, "give the server's command after --"},
		{[]string{"add", "extra", "x"}, "after --"},
		{[]string{"add", "bad", "--env", "NOVALUE", "--", "x"}, "want KEY=VALUE"},
		{[]string{"add", "slow", "--timeout", "1us", "--", "x"}, "at least 1ms"},
		{[]string{"add", "slow", "--timeout", "48h", "--", "x"}, "timeout 172800000: want milliseconds from 1 to 86400000"},
		{[]string{"rm", "nope", "--yes"}, "not found"},
		{[]string{"rm", "tool"}, "--yes"},
	} {
		r := kiln(t, append([]string{"mcp-servers"}, tc.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: %d %q, want an error with %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	r = kiln(t, "mcp-servers", "rm", "tool", "--yes")
	mustContain(t, "rm", r.stdout, "Removed the MCP server tool.")
	if entries := mcpEntries(t, data); len(entries) != 1 || entries["docs"] == "" {
		t.Fatalf("after rm: %v", entries)
	}
}
