package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

func sign(secret, msg string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(msg))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

type triggerResp struct {
	ID     string      `json:"id"`
	Secret string      `json:"secret"`
	Next   []time.Time `json:"next"`
}

func (e *env) occurrenceCount(id string) int {
	var page core.OccurrencePage
	e.call("GET", "/api/v1/triggers/"+id+"/occurrences", "", 200, &page)
	return len(page.Occurrences)
}

// TestTriggersAPI: create, list, get, preview, patch, delete; bad input
// is 400 with the reason and creates nothing.
func TestTriggersAPI(t *testing.T) {
	e := newEnv(t, Options{})
	for _, c := range []struct{ body, want string }{
		{`{"kind":"cron","cron":"61 * * * *","prompt":"x"}`, "cron:"},
		{`{"kind":"cron","cron":"0 * * * *","timezone":"Mars/Base","prompt":"x"}`, "unknown IANA time zone"},
		{`{"kind":"cron","cron":"@hourly","prompt":"x","overlap":"maybe"}`, "overlap"},
		{`{"kind":"webhook","prompt":"x","secret":"short"}`, "at least 32"},
		{`{"kind":"cron","cron":"@hourly","prompt":"x","bogus":1}`, "bogus"},
	} {
		r := e.raw("POST", "/api/v1/triggers", c.body, map[string]string{"Content-Type": "application/json"})
		if r.status != 400 || !strings.Contains(string(r.body), c.want) {
			t.Errorf("POST %s: %d %s; want 400 mentioning %q", c.body, r.status, r.body, c.want)
		}
	}
	var list struct{ Triggers []triggerResp }
	e.call("GET", "/api/v1/triggers", "", 200, &list)
	if len(list.Triggers) != 0 {
		t.Fatalf("bad requests created %d triggers", len(list.Triggers))
	}
	var tr triggerResp
	e.call("POST", "/api/v1/triggers", `{"name":"nightly","kind":"cron","cron":"30 2 * * *","timezone":"Europe/Berlin","prompt":"go"}`, 201, &tr)
	if len(tr.Next) != 5 || tr.Secret != "" {
		t.Fatalf("created %+v", tr)
	}
	var prev struct{ Next []time.Time }
	e.call("GET", "/api/v1/triggers/"+tr.ID+"/preview?n=3", "", 200, &prev)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	if len(prev.Next) != 3 || prev.Next[0].In(berlin).Format("15:04") != "02:30" {
		t.Fatalf("preview %v", prev.Next)
	}
	e.call("GET", "/api/v1/triggers/preview?cron=@every+15m&n=2", "", 200, &prev)
	if len(prev.Next) != 2 || prev.Next[1].Sub(prev.Next[0]) != 15*time.Minute {
		t.Fatalf("preview of an expression %v", prev.Next)
	}
	e.call("GET", "/api/v1/triggers/preview?cron=nope", "", 400, nil)
	var got core.Trigger
	e.call("PATCH", "/api/v1/triggers/"+tr.ID, `{"enabled":false,"catchup":"all","catchup_window":"2h"}`, 200, &got)
	if got.Enabled || got.Catchup != "all" || got.CatchupWindow != 2*time.Hour {
		t.Fatalf("patched %+v", got)
	}
	e.call("PATCH", "/api/v1/triggers/"+tr.ID, `{"kind":"webhook"}`, 400, nil)
	e.call("PATCH", "/api/v1/triggers/"+tr.ID, `{"cron":"bad"}`, 400, nil)
	e.call("GET", "/api/v1/triggers/"+tr.ID, "", 200, &got)
	if got.Cron != "30 2 * * *" {
		t.Fatalf("a refused patch changed the cron to %q", got.Cron)
	}
	var occ core.Occurrence
	e.call("POST", "/api/v1/triggers/"+tr.ID+"/run", "", 202, &occ)
	if occ.Status != core.OccurrenceStarted || occ.Cause != core.CauseManual {
		t.Fatalf("manual fire %+v", occ)
	}
	if n := e.occurrenceCount(tr.ID); n != 1 {
		t.Fatalf("%d occurrences", n)
	}
	e.call("DELETE", "/api/v1/triggers/"+tr.ID, "", 204, nil)
	e.call("GET", "/api/v1/triggers/"+tr.ID, "", 404, nil)
}

// TestWebhooks: each way a delivery can be right or wrong, with its
// status, and nothing started unless 202.
func TestWebhooks(t *testing.T) {
	e := newEnv(t, Options{})
	var tr triggerResp
	e.call("POST", "/api/v1/triggers", `{"kind":"webhook","prompt":"text {{.msg}}","rate_limit":12,"overlap":"allow_all"}`, 201, &tr)
	if len(tr.Secret) < 32 {
		t.Fatalf("secret %q", tr.Secret)
	}
	var hidden map[string]any
	e.call("GET", "/api/v1/triggers/"+tr.ID, "", 200, &hidden)
	if _, ok := hidden["secret"]; ok {
		t.Fatal("GET shows the secret")
	}
	body := `{"msg":"hello"}`
	notUTF8 := "{\"msg\":\"caf\xe9\"}" // Latin-1, which encoding/json would turn into U+FFFD
	now := strconv.FormatInt(time.Now().Unix(), 10)
	stale := strconv.FormatInt(time.Now().Add(-6*time.Minute).Unix(), 10)
	path := "/hooks/" + tr.ID
	started := 0
	for _, c := range []struct {
		name   string
		path   string
		body   string
		header map[string]string
		want   int
	}{
		{"right secret as bearer", path, body, map[string]string{"Authorization": "Bearer " + tr.Secret}, 202},
		{"right secret as header", path, body, map[string]string{"X-Kiln-Token": tr.Secret}, 202},
		{"wrong secret", path, body, map[string]string{"Authorization": "Bearer " + strings.Repeat("x", 64)}, 401},
		{"no credentials", path, body, nil, 401},
		{"valid signature", path, body, map[string]string{"X-Kiln-Signature": sign(tr.Secret, body)}, 202},
		{"GitHub's signature and delivery", path, body, map[string]string{"X-Hub-Signature-256": sign(tr.Secret, body), "X-GitHub-Delivery": "gh-1"}, 202},
		{"GitHub delivery replayed", path, body, map[string]string{"X-Hub-Signature-256": sign(tr.Secret, body), "X-GitHub-Delivery": "gh-1"}, 409},
		{"invalid signature", path, body, map[string]string{"X-Kiln-Signature": sign("another secret of thirty-two chars", body)}, 401},
		{"signature of another body", path, `{"msg":"tampered"}`, map[string]string{"X-Kiln-Signature": sign(tr.Secret, body)}, 401},
		{"malformed signature", path, body, map[string]string{"X-Kiln-Signature": "md5=abc"}, 401},
		{"timestamped signature", path, body, map[string]string{"X-Kiln-Signature": sign(tr.Secret, now+"."+body), "X-Kiln-Timestamp": now, "X-Kiln-Delivery": "d-1"}, 202},
		{"replayed delivery", path, body, map[string]string{"X-Kiln-Signature": sign(tr.Secret, now+"."+body), "X-Kiln-Timestamp": now, "X-Kiln-Delivery": "d-1"}, 409},
		{"stale timestamp", path, body, map[string]string{"X-Kiln-Signature": sign(tr.Secret, stale+"."+body), "X-Kiln-Timestamp": stale}, 401},
		{"timestamp not signed", path, body, map[string]string{"X-Kiln-Signature": sign(tr.Secret, body), "X-Kiln-Timestamp": now}, 401},
		{"oversized body", path, `{"msg":"` + strings.Repeat("a", core.MaxPayloadLen) + `"}`, map[string]string{"Authorization": "Bearer " + tr.Secret}, 413},
		{"not JSON", path, `{"msg":`, map[string]string{"Authorization": "Bearer " + tr.Secret}, 400},
		{"signed, not UTF-8", path, notUTF8, map[string]string{"X-Kiln-Signature": sign(tr.Secret, notUTF8)}, 400},
		{"secret, not UTF-8", path, notUTF8, map[string]string{"X-Kiln-Token": tr.Secret}, 400},
		{"right Kiln signature, wrong GitHub one", path, body, map[string]string{"X-Kiln-Signature": sign(tr.Secret, body), "X-Hub-Signature-256": sign("another secret of thirty-two chars", body)}, 401},
		{"wrong Kiln signature, right GitHub one", path, body, map[string]string{"X-Kiln-Signature": sign("another secret of thirty-two chars", body), "X-Hub-Signature-256": sign(tr.Secret, body)}, 401},
		{"right secret, wrong signature", path, body, map[string]string{"X-Kiln-Token": tr.Secret, "X-Kiln-Signature": sign("another secret of thirty-two chars", body)}, 401},
		{"right secret, empty GitHub signature", path, body, map[string]string{"X-Kiln-Token": tr.Secret, "X-Hub-Signature-256": "sha256="}, 401},
		{"right bearer, wrong X-Kiln-Token", path, body, map[string]string{"Authorization": "Bearer " + tr.Secret, "X-Kiln-Token": strings.Repeat("x", 64)}, 401},
		{"unknown trigger", "/hooks/trg_nope", body, map[string]string{"Authorization": "Bearer " + tr.Secret}, 404},
	} {
		r := e.raw("POST", c.path, c.body, c.header)
		if r.status != c.want {
			t.Errorf("%s: status %d, want %d (%s)", c.name, r.status, c.want, r.body)
		}
		if r.status == 202 {
			started++
			if !strings.Contains(string(r.body), `"run_id":"run_`) || !strings.Contains(string(r.body), `"thread_id":"thr_`) {
				t.Errorf("%s: body %s", c.name, r.body)
			}
		}
		if n := e.occurrenceCount(tr.ID); n != started {
			t.Fatalf("%s: %d occurrences after %d accepted deliveries", c.name, n, started)
		}
	}
	var page core.OccurrencePage
	e.call("GET", "/api/v1/triggers/"+tr.ID+"/occurrences", "", 200, &page)
	if in := page.Occurrences[0].Input; in != "text hello" {
		t.Errorf("the prompt was filled as %q", in)
	}
	// The rate limit: 12 a minute, 7 used (the 5 accepted and the 2
	// replays, refused after the limiter counted them).
	codes := map[int]int{}
	for range 10 {
		r := e.raw("POST", path, body, map[string]string{"Authorization": "Bearer " + tr.Secret})
		codes[r.status]++
		if r.status == 429 && r.header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
	}
	if codes[202] != 5 || codes[429] != 5 {
		t.Errorf("rate limit: %v", codes)
	}
	// The limiter's state is kept with the trigger, not shown with it.
	if r := e.raw("GET", "/api/v1/triggers/"+tr.ID, "", nil); r.status != 200 || strings.Contains(string(r.body), "rate_bucket") || strings.Contains(string(r.body), "tokens") {
		t.Errorf("the trigger shows its rate limiter: %d %s", r.status, r.body)
	}
	started += 5
	// Rotation: the old secret stops working; the new one is shown once.
	var rot triggerResp
	e.call("POST", "/api/v1/triggers/"+tr.ID+"/rotate-secret", "", 200, &rot)
	if rot.Secret == "" || rot.Secret == tr.Secret {
		t.Fatalf("rotated secret %q", rot.Secret)
	}
	// Disabled: 409 with a right secret, 401 with a wrong one.
	e.call("PATCH", "/api/v1/triggers/"+tr.ID, `{"enabled":false,"rate_limit":1000}`, 200, nil)
	if r := e.raw("POST", path, body, map[string]string{"X-Kiln-Signature": sign(rot.Secret, body)}); r.status != 409 {
		t.Errorf("disabled: %d %s", r.status, r.body)
	}
	if r := e.raw("POST", path, body, map[string]string{"Authorization": "Bearer " + tr.Secret}); r.status != 401 {
		t.Errorf("old secret after rotation: %d", r.status)
	}
	if n := e.occurrenceCount(tr.ID); n != started {
		t.Fatalf("%d occurrences, want %d", n, started)
	}
}
