package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokenFile: KILN_API_TOKEN_FILE makes a token when its file does not
// exist (48 hex characters, mode 0600) and reads the same one after; the
// token protects a non-loopback address as KILN_API_TOKEN does, which
// wins when both are set; an empty file is an error; the client commands
// read it and never make one.
func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "data", "api-token")
	env := map[string]string{
		"KILN_ADDR":            "0.0.0.0:8420",
		"KILN_ALLOWED_ORIGINS": "http://127.0.0.1:8420",
		"KILN_DATA_ROOT":       dir,
		envTokenFile:           path,
	}
	load := func() serveConfig {
		t.Helper()
		cfg, err := loadServeConfig(newServeCmd().Flags(), func(k string) string { return env[k] }, os.UserHomeDir)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	first := load()
	if !first.TokenMade || first.TokenFile != path || len(first.Token) != 48 || strings.Trim(first.Token, "0123456789abcdef") != "" {
		t.Fatalf("first start: made %t, file %q, token of %d characters %q", first.TokenMade, first.TokenFile, len(first.Token), first.Token)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", st.Mode().Perm())
	}
	if again := load(); again.TokenMade || again.Token != first.Token {
		t.Fatalf("second start: made %t, same token %t", again.TokenMade, again.Token == first.Token)
	}

	env["KILN_API_TOKEN"] = strings.Repeat("k", 32)
	if cfg := load(); cfg.Token != env["KILN_API_TOKEN"] || cfg.TokenFile != "" {
		t.Fatalf("KILN_API_TOKEN set: token from %q", cfg.TokenFile)
	}
	delete(env, "KILN_API_TOKEN")

	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()
	t.Setenv(envServer, srv.URL)
	t.Setenv(envTokenFile, path)
	t.Setenv(envToken, "")
	a := &app{}
	newRootCmd(a)
	c, err := a.client()
	if err != nil {
		t.Fatalf("client with the token file: %v", err)
	}
	if err := c.Health(t.Context()); err != nil || auth != "Bearer "+first.Token {
		t.Fatalf("client with the token file sent %q (%v)", auth, err)
	}

	if err := os.WriteFile(path, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadServeConfig(newServeCmd().Flags(), func(k string) string { return env[k] }, os.UserHomeDir); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("empty token file: %v", err)
	}
	if _, err := a.client(); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("client with an empty token file: %v", err)
	}
	missing := filepath.Join(dir, "nothing")
	t.Setenv(envTokenFile, missing)
	if _, err := a.client(); err == nil {
		t.Fatal("client with a missing token file: no error")
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("the client made a token file")
	}
}
