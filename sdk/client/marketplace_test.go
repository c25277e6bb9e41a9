package client

import (
	"context"
	"net/http"
	"testing"
)

// TestInstallLocked: the results of a locked install, and of one that
// failed part way, which come with the error.
func TestInstallLocked(t *testing.T) {
	ctx := context.Background()
	lock := []byte(`{"version":1,"plugins":[]}`)
	c, reqs := fakeAPI(t, http.StatusOK, `{"plugins":[{"id":"weather","version":"1.0.0","marketplace":"acme","status":"installed"}]}`)
	done, err := c.InstallLocked(ctx, lock, true, false)
	if err != nil || len(done) != 1 || done[0].ID != "weather" || done[0].Status != "installed" {
		t.Fatalf("install-locked: %+v %v", done, err)
	}
	r := (*reqs)[0]
	if r.method != "POST" || r.path != "/api/v1/marketplace/install-locked" || r.body != `{"lock":{"version":1,"plugins":[]},"consent":true}` || r.header.Get("Authorization") != "Bearer s3cret" {
		t.Fatalf("request: %+v", r)
	}
	c, _ = fakeAPI(t, http.StatusConflict, `{"error":{"code":"conflict","message":"marketplace acme now publishes flood 1.0.0 with other bytes: refused"},"plugins":[{"id":"calc","version":"1.0.0","marketplace":"acme","status":"installed"}]}`)
	done, err = c.InstallLocked(ctx, lock, true, false)
	if !IsConflict(err) || err.Error() != "marketplace acme now publishes flood 1.0.0 with other bytes: refused" || len(done) != 1 || done[0].ID != "calc" {
		t.Fatalf("a failure after calc was installed: %+v %v", done, err)
	}
	c, _ = fakeAPI(t, http.StatusBadRequest, `{"error":{"code":"invalid","message":"lock file: version 9"}}`)
	if done, err := c.InstallLocked(ctx, lock, true, false); !IsInvalid(err) || len(done) != 0 {
		t.Fatalf("a bad lock: %+v %v", done, err)
	}
}
