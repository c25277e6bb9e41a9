package web

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// fakeMarketplace is a Marketplace in memory: one marketplace "acme"
// offering "weather" 1.0.0; previews of "flood" report progress without
// end until their context is cancelled.
type fakeMarketplace struct {
	mu        sync.Mutex
	installs  []pluginapi.MarketplaceInstallRequest
	locked    []*pluginapi.Lock
	cancelled chan struct{}
}

var _ Marketplace = (*fakeMarketplace)(nil)

func (f *fakeMarketplace) List() []pluginapi.Marketplace {
	return []pluginapi.Marketplace{{Name: "acme", URL: "https://plugins.acme.example", Kind: "kiln", Keys: []string{"acme+1234abcd+key"}, Quarantine: "0s", Plugins: 1}}
}

func (f *fakeMarketplace) Get(name string) (pluginapi.Marketplace, error) {
	if name != "acme" {
		return pluginapi.Marketplace{}, core.Errorf(core.ENOTFOUND, "marketplace %s is not added", name)
	}
	return f.List()[0], nil
}

func (f *fakeMarketplace) Add(_ context.Context, req pluginapi.AddMarketplaceRequest) (pluginapi.Marketplace, error) {
	if len(req.Keys) == 0 {
		return pluginapi.Marketplace{}, core.Errorf(core.EINVALID, "give the key to trust")
	}
	return pluginapi.Marketplace{Name: req.Name, URL: req.URL, Kind: "kiln", Keys: req.Keys}, nil
}

func (f *fakeMarketplace) Refresh(_ context.Context, name string) (pluginapi.Marketplace, error) {
	return pluginapi.Marketplace{}, core.Errorf(core.ECONFLICT, "marketplace %s: index version 3 is older than version 5: refused (rollback)", name)
}

func (f *fakeMarketplace) Remove(_ context.Context, name string) error {
	_, err := f.Get(name)
	return err
}

func (f *fakeMarketplace) Search(_ context.Context, q string) []pluginapi.MarketplacePlugin {
	if !strings.Contains("weather", q) {
		return []pluginapi.MarketplacePlugin{}
	}
	return []pluginapi.MarketplacePlugin{{Name: "weather", Marketplace: "acme", Tags: []string{}, Kinds: []string{"toolset"}, Latest: "1.0.0", Score: 100}}
}

func (f *fakeMarketplace) Plugin(_ context.Context, name, _ string) (pluginapi.MarketplacePlugin, error) {
	if name != "weather" {
		return pluginapi.MarketplacePlugin{}, core.Errorf(core.ENOTFOUND, "no marketplace offers a plugin %s", name)
	}
	return f.Search(context.Background(), "")[0], nil
}

func (f *fakeMarketplace) Preview(ctx context.Context, req pluginapi.MarketplaceInstallRequest, progress func(done, total int64)) (pluginapi.MarketplacePreview, error) {
	switch req.Name {
	case "weather":
		for _, done := range []int64{0, 50, 100} {
			if progress != nil {
				progress(done, 100)
			}
		}
		return pluginapi.MarketplacePreview{Marketplace: "acme", Preview: pluginapi.Preview{ID: "weather", Version: "1.0.0", NeedsConsent: true},
			Digest: fakeSHA, Verified: []string{"archive sha256"}}, nil
	case "flood":
		for ctx.Err() == nil {
			progress(1<<20, 1<<20)
		}
		close(f.cancelled)
		return pluginapi.MarketplacePreview{}, ctx.Err()
	}
	return pluginapi.MarketplacePreview{}, core.Errorf(core.EINVALID, "marketplace acme: the archive's sha256 is x, not y: refused (tampered archive)")
}

func (f *fakeMarketplace) Install(_ context.Context, req pluginapi.MarketplaceInstallRequest) (pluginapi.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.installs = append(f.installs, req)
	return pluginapi.Info{ID: req.Name, Version: "1.0.0", Status: pluginapi.StatusEnabled}, nil
}

func (f *fakeMarketplace) Outdated(context.Context) []pluginapi.Outdated {
	return []pluginapi.Outdated{}
}

func (f *fakeMarketplace) UpgradeRequest(_ context.Context, id string) (pluginapi.MarketplaceInstallRequest, error) {
	return pluginapi.MarketplaceInstallRequest{}, core.Errorf(core.ECONFLICT, "plugin %s is pinned to 1.0.0", id)
}

// InstallLocked installs "weather" and fails on "flood", which the
// marketplace now publishes with other bytes.
func (f *fakeMarketplace) InstallLocked(_ context.Context, lock *pluginapi.Lock, _, _ bool) ([]pluginapi.LockedResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.locked = append(f.locked, lock)
	var out []pluginapi.LockedResult
	for _, p := range lock.Plugins {
		if p.ID == "flood" {
			return out, core.Errorf(core.ECONFLICT, "marketplace acme now publishes flood 1.0.0 with other bytes: refused")
		}
		out = append(out, pluginapi.LockedResult{ID: p.ID, Version: p.Version, Marketplace: "acme", Status: pluginapi.LockedInstalled})
	}
	return out, nil
}

func TestMarketplaceRoutes(t *testing.T) {
	f := &fakeMarketplace{}
	e := newEnv(t, Options{Marketplace: f})

	var list struct {
		Marketplaces []pluginapi.Marketplace `json:"marketplaces"`
	}
	e.call("GET", "/api/v1/marketplaces", "", http.StatusOK, &list)
	if len(list.Marketplaces) != 1 || list.Marketplaces[0].Name != "acme" {
		t.Fatalf("list: %+v", list)
	}
	e.call("GET", "/api/v1/marketplaces/acme", "", http.StatusOK, nil)
	e.wantError("GET", "/api/v1/marketplaces/nope", "", nil, http.StatusNotFound, core.ENOTFOUND)
	e.call("POST", "/api/v1/marketplaces", `{"name":"acme","url":"https://x.example","keys":["acme+1+k"]}`, http.StatusCreated, nil)
	e.wantError("POST", "/api/v1/marketplaces", `{"name":"acme","url":"https://x.example"}`, nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("POST", "/api/v1/marketplaces", `{"name":"acme"}`, nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("POST", "/api/v1/marketplaces", `{"name":"acme","url":"u","key":"k"}`, nil, http.StatusBadRequest, codeInvalidJSON)
	e.wantError("POST", "/api/v1/marketplaces/acme/refresh", "", nil, http.StatusConflict, core.ECONFLICT)
	e.call("DELETE", "/api/v1/marketplaces/acme", "", http.StatusNoContent, nil)

	var found struct {
		Plugins []pluginapi.MarketplacePlugin `json:"plugins"`
	}
	e.call("GET", "/api/v1/marketplace/plugins?q=weath", "", http.StatusOK, &found)
	if len(found.Plugins) != 1 || found.Plugins[0].Name != "weather" {
		t.Fatalf("search: %+v", found)
	}
	e.call("GET", "/api/v1/marketplace/plugins/weather", "", http.StatusOK, nil)
	e.wantError("GET", "/api/v1/marketplace/plugins/nope", "", nil, http.StatusNotFound, core.ENOTFOUND)
	e.call("GET", "/api/v1/marketplace/outdated", "", http.StatusOK, nil)
	e.wantError("GET", "/api/v1/plugins/weather/upgrade", "", nil, http.StatusConflict, core.ECONFLICT)

	var pv pluginapi.MarketplacePreview
	e.call("POST", "/api/v1/marketplace/preview", `{"name":"weather"}`, http.StatusOK, &pv)
	if pv.ID != "weather" || pv.Digest != fakeSHA {
		t.Fatalf("preview: %+v", pv)
	}
	e.wantError("POST", "/api/v1/marketplace/preview", `{"name":"tampered"}`, nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("POST", "/api/v1/marketplace/preview", `{"version":"1.0.0"}`, nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("POST", "/api/v1/marketplace/install", `{"name":"weather","digest":"nothex"}`, nil, http.StatusBadRequest, core.EINVALID)
	e.call("POST", "/api/v1/marketplace/install", `{"name":"weather","consent":true,"digest":"`+fakeSHA+`"}`, http.StatusCreated, nil)
	if len(f.installs) != 1 || !f.installs[0].Consent || f.installs[0].Digest != fakeSHA {
		t.Fatalf("install reached the client as %+v", f.installs)
	}

	e.wantError("POST", "/api/v1/marketplace/install-locked", `{"lock":{"version":9,"plugins":[]}}`, nil, http.StatusBadRequest, core.EINVALID)
	e.wantError("POST", "/api/v1/marketplace/install-locked", `{}`, nil, http.StatusBadRequest, core.EINVALID)
	e.call("POST", "/api/v1/marketplace/install-locked", `{"lock":{"version":1,"plugins":[]},"dry_run":true}`, http.StatusOK, nil)
	if len(f.locked) != 1 {
		t.Fatalf("locked installs: %d", len(f.locked))
	}
}

func TestMarketplaceRoutesWithoutClient(t *testing.T) {
	e := newEnv(t, Options{})
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/api/v1/marketplaces", ""},
		{"GET", "/api/v1/marketplace/plugins", ""},
		{"POST", "/api/v1/marketplace/preview", `{"name":"weather"}`},
		{"POST", "/api/v1/marketplace/install", `{"name":"weather"}`},
	} {
		resp := e.wantError(r.method, r.path, r.body, nil, http.StatusNotFound, core.ENOTFOUND)
		if !strings.Contains(string(resp.body), noMarketplaceMessage) {
			t.Errorf("%s %s: %s", r.method, r.path, resp.body)
		}
	}
}

// TestMarketplacePreviewStream: with Accept: application/x-ndjson the
// preview streams its progress, then the preview or the error, one JSON
// object per line.
func TestMarketplacePreviewStream(t *testing.T) {
	e := newEnv(t, Options{Marketplace: &fakeMarketplace{}})
	lines := func(body string) []map[string]json.RawMessage {
		r := e.raw("POST", "/api/v1/marketplace/preview", body, map[string]string{"Accept": ndjson})
		if r.status != http.StatusOK || r.header.Get("Content-Type") != ndjson {
			t.Fatalf("status %d, type %q: %s", r.status, r.header.Get("Content-Type"), r.body)
		}
		var out []map[string]json.RawMessage
		sc := bufio.NewScanner(strings.NewReader(string(r.body)))
		for sc.Scan() {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			out = append(out, m)
		}
		return out
	}
	got := lines(`{"name":"weather"}`)
	if len(got) < 2 || got[0]["progress"] == nil || got[len(got)-1]["preview"] == nil {
		t.Fatalf("stream: %v", got)
	}
	var last pluginapi.Progress
	json.Unmarshal(got[len(got)-2]["progress"], &last)
	if last.Done != 100 || last.Total != 100 {
		t.Fatalf("the last progress line: %+v", last)
	}
	got = lines(`{"name":"tampered"}`)
	var e1 struct{ Code, Message string }
	if len(got) != 1 || json.Unmarshal(got[0]["error"], &e1) != nil || e1.Code != core.EINVALID || !strings.Contains(e1.Message, "tampered archive") {
		t.Fatalf("error stream: %v", got)
	}
}

// TestMarketplacePreviewStalledClient: a client that stops reading the
// progress stream ends the preview (its context is cancelled) within the
// stream write timeout, rather than holding the download up.
func TestMarketplacePreviewStalledClient(t *testing.T) {
	f := &fakeMarketplace{cancelled: make(chan struct{})}
	e := newEnv(t, Options{Marketplace: f, StreamWriteTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"name":"flood"}`
	req := "POST /api/v1/marketplace/preview HTTP/1.1\r\nHost: " + e.srv.Listener.Addr().String() +
		"\r\nContent-Type: application/json\r\nAccept: application/x-ndjson\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	// Never read: the server's writes block once the socket buffers fill.
	select {
	case <-f.cancelled:
	case <-time.After(30 * time.Second):
		t.Fatal("the preview went on for 30 s with a client that does not read")
	}
}

// TestMarketplaceInstallLockedFailure: a locked install that fails part
// way answers the error with the status of its code and, with it, the
// plugins installed before the failure.
func TestMarketplaceInstallLockedFailure(t *testing.T) {
	e := newEnv(t, Options{Marketplace: &fakeMarketplace{}})
	locked := func(ids ...string) string {
		var ps []string
		for _, id := range ids {
			ps = append(ps, `{"id":"`+id+`","version":"1.0.0","runtime":"data","sha256":"`+fakeSHA+`","digest":"`+fakeSHA+`","pinned":false,"source":{"marketplace":"acme","archive_sha256":"`+fakeSHA+`","index_version":1}}`)
		}
		return `{"lock":{"version":1,"plugins":[` + strings.Join(ps, ",") + `]},"consent":true}`
	}
	var ok struct {
		Plugins []pluginapi.LockedResult `json:"plugins"`
	}
	e.call("POST", "/api/v1/marketplace/install-locked", locked("weather"), http.StatusOK, &ok)
	if len(ok.Plugins) != 1 || ok.Plugins[0].Status != pluginapi.LockedInstalled {
		t.Fatalf("install-locked: %+v", ok)
	}
	r := e.wantError("POST", "/api/v1/marketplace/install-locked", locked("flood", "weather"), nil, http.StatusConflict, core.ECONFLICT)
	var failed struct {
		Error   struct{ Code, Message string } `json:"error"`
		Plugins []pluginapi.LockedResult       `json:"plugins"`
	}
	if err := json.Unmarshal(r.body, &failed); err != nil || failed.Plugins == nil || len(failed.Plugins) != 0 || !strings.Contains(failed.Error.Message, "other bytes") {
		t.Fatalf("a failure before any plugin: %s", r.body)
	}
	r = e.wantError("POST", "/api/v1/marketplace/install-locked", locked("calc", "flood"), nil, http.StatusConflict, core.ECONFLICT)
	if err := json.Unmarshal(r.body, &failed); err != nil || len(failed.Plugins) != 1 || failed.Plugins[0].ID != "calc" || failed.Plugins[0].Status != pluginapi.LockedInstalled {
		t.Fatalf("a failure after calc was installed: %s", r.body)
	}
	e = newEnv(t, Options{})
	e.wantError("POST", "/api/v1/marketplace/install-locked", locked("weather"), nil, http.StatusNotFound, core.ENOTFOUND)
}
