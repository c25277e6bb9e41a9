package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// echoingUpstream is an OpenAI-compatible server that refuses every key
// and echoes it back in its error, as OpenAI's own 401 does ("Incorrect
// API key provided: <key>"), on chat and on the model list.
func echoingUpstream() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s. You can find your API key at https://platform.openai.com/account/api-keys. (request had Authorization: Bearer %s)","type":"invalid_request_error","code":"invalid_api_key"}}`, key, key)
	}))
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestSecretsNeverLeave: a provider key that the upstream echoes in its
// error text, and the API token, reach neither the database, nor an event,
// nor an API answer, nor a log line (on stderr, in <data>/logs or from
// the log API).
func TestSecretsNeverLeave(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	up := echoingUpstream()
	defer up.Close()
	key := "kiln-test-key-" + randomHex(t, 12) // no vendor format: only the registered value can catch it
	token := randomHex(t, 24)
	addr, data := procAddr(t), t.TempDir()
	srv := startProc(t, addr, data,
		"OPENAI_API_KEY="+key, "OPENAI_BASE_URL="+up.URL+"/v1", "KILN_MODEL=openai:gpt-4o", "KILN_API_TOKEN="+token)

	get := func(path string) string {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/v1"+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	post := func(path, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+addr+"/api/v1"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return out
	}
	th := post("/threads", `{"title":"leak"}`)
	run := post(fmt.Sprintf("/threads/%s/runs", th["id"]), `{"input":{"text":"hello"}}`)
	runID, _ := run["id"].(string)
	var runBody string
	waitFor(t, "the run to fail", func() bool {
		runBody = get("/runs/" + runID)
		return strings.Contains(runBody, `"status":"failed"`)
	})
	if !strings.Contains(runBody, "Incorrect API key provided: [REDACTED]") {
		t.Errorf("the run's error should say the key was refused, with the key redacted: %s", runBody)
	}
	answers := map[string]string{
		"GET /runs/{id}":       runBody,
		"GET /threads/{id}":    get(fmt.Sprintf("/threads/%s", th["id"])),
		"GET /inbox (unread)":  get("/inbox?queue=unread"),
		"GET /models":          get("/models"),
		"GET /providers":       get("/providers"),
		"GET /status":          get("/status"),
		"GET /logs":            get("/logs?limit=1000"),
		"GET /events (replay)": readStream(t, "http://"+addr+"/api/v1/threads/"+th["id"].(string)+"/events", token, "run.finished"),
	}
	if !strings.Contains(answers["GET /models"], "[REDACTED]") {
		t.Errorf("GET /models should carry the provider's (redacted) error: %s", answers["GET /models"])
	}
	for what, body := range answers {
		if strings.Contains(body, key) || strings.Contains(body, token) {
			t.Errorf("%s leaks a secret: %s", what, body)
		}
	}
	// Stop the server: the database is checkpointed and the logs flushed.
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-srv.done
	if logs := srv.logs.String(); strings.Contains(logs, key) || strings.Contains(logs, token) {
		t.Errorf("the server's log leaks a secret:\n%s", logs)
	}
	filepath.Walk(data, func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || filepath.Base(path) == "providers.json" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), key) || strings.Contains(string(b), token) {
			t.Errorf("%s holds a secret", path)
		}
		return nil
	})
}

// readStream reads an SSE stream until an event of type last arrives (or
// 20 s pass) and returns what it read.
func readStream(t *testing.T, url, token, last string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
		if sc.Text() == "event: "+last {
			sc.Scan()
			b.WriteString(sc.Text() + "\n")
			break
		}
	}
	return b.String()
}
