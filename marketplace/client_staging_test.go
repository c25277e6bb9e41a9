package marketplace

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/pluginapi"
	"github.com/kilnhq/kiln/plugins/registry"
)

// TestClientMarketplaceNamedStaging: a marketplace may be named
// "staging"; its kept index survives a restart and a download.
func TestClientMarketplaceNamedStaging(t *testing.T) {
	m := newNamedMarket(t, "staging")
	now := t0.Add(time.Hour)
	tc := newTestClient(t, m, &now)
	ctx := context.Background()
	if _, err := tc.Add(ctx, pluginapi.AddMarketplaceRequest{Name: "staging", URL: tc.url, Keys: []string{m.verifier}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "review"}, nil); err != nil {
		t.Fatal(err)
	}
	c2, err := Open(Config{Dir: tc.dir, Plugins: tc.inst, Protocol: 3, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if mp, err := c2.Get("staging"); err != nil || mp.Error != "" || mp.Plugins != 2 {
		t.Fatalf("after a restart: %+v %v", mp, err)
	}
	if _, err := c2.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "review"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c2.Remove(ctx, "staging"); err != nil {
		t.Fatal(err)
	}
	if left := tc.staging(t); len(left) != 1 {
		t.Fatalf("removing the marketplace staging touched the staged downloads: %v", left)
	}
}

// TestClientReusedStagingIsChecked: a folder staged by an earlier
// preview is installed only if its manifest asks for what the index now
// shows, as a download is.
func TestClientReusedStagingIsChecked(t *testing.T) {
	m := newMarket(t)
	now := t0.Add(time.Hour)
	tc := newTestClient(t, m, &now)
	ctx := context.Background()
	tc.add(t, m, "")
	pv, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "review"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if left := tc.staging(t); !slices.Equal(left, []string{pv.Digest}) {
		t.Fatalf("staged: %v", left)
	}
	// The next index shows review 1.0.0, same bytes, asking for less.
	editIndex(t, m, func(ix *Index) {
		for i := range ix.Plugins {
			if ix.Plugins[i].Name == "review" {
				ix.Plugins[i].Versions[0].Manifest.Permissions.Env = []string{"OTHER_TOKEN"}
			}
		}
	})
	if _, err := tc.Refresh(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	_, err = tc.Install(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Consent: true, Digest: pv.Digest})
	wantRefusal(t, err, ReasonArchive, "marketplace acme: plugin review 1.0.0: the archive's manifest has permissions", "nothing was installed")
	if len(tc.inst.requests) != 0 {
		t.Fatal("installed")
	}
	if left := tc.staging(t); len(left) != 0 {
		t.Fatalf("staging keeps %v", left)
	}
}

// TestClientEvictsStagedPreviews: previews keep at most maxStaged
// downloads, none older than stagedFor.
func TestClientEvictsStagedPreviews(t *testing.T) {
	m := newMarket(t)
	for i, v := range []string{"1.1.0", "1.2.0", "1.3.0"} {
		m.add(t, PublishPlugin{Path: bundle(t, m.dir, "src/review-"+v, "review", v, "Look for bugs "+v+".")}, t0.Add(time.Duration(i+1)*time.Minute))
	}
	now := t0.Add(time.Hour)
	tc := newTestClient(t, m, &now)
	ctx := context.Background()
	tc.add(t, m, "")
	var digests []string
	for _, v := range []string{"1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.0.0"} {
		now = now.Add(time.Minute)
		pv, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Version: v}, nil)
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, pv.Digest)
	}
	// 1.0.0 was previewed last, again: 1.1.0 is the oldest and went.
	want := slices.Clone(digests[2:])
	slices.Sort(want)
	if left := tc.staging(t); !slices.Equal(left, want) {
		t.Fatalf("staged after 5 previews: %v, want %v", left, want)
	}
	now = now.Add(stagedFor)
	if _, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "calc"}, nil); err != nil {
		t.Fatal(err)
	}
	if left := tc.staging(t); len(left) != 1 || slices.Contains(digests, left[0]) {
		t.Fatalf("staged an hour later: %v", left)
	}
}

// blockingMarket serves m, holding every archive download until release
// is closed; started receives each archive request.
func blockingMarket(t *testing.T, m *market) (url string, started chan string, release chan struct{}) {
	t.Helper()
	started, release = make(chan string, 10), make(chan struct{})
	h := Handler(m.dir)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".tar.gz") {
			started <- r.URL.Path
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	return srv.URL, started, release
}

// TestClientDownloadHoldsNoGlobalLock: while an archive downloads, the
// marketplace can be refreshed, listed, searched and another one added
// or removed; a second download of the same version waits for the first
// and reuses it.
func TestClientDownloadHoldsNoGlobalLock(t *testing.T) {
	m := newMarket(t)
	other := newNamedMarket(t, "other")
	now := t0.Add(time.Hour)
	tc := newTestClient(t, other, &now)
	url, started, release := blockingMarket(t, m)
	ctx := context.Background()
	if _, err := tc.Add(ctx, pluginapi.AddMarketplaceRequest{URL: url, Keys: []string{m.verifier}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	previews := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "review", Marketplace: "acme"}, nil)
			previews <- err
		}()
	}
	<-started
	done := make(chan error, 1)
	go func() {
		_, err := tc.Refresh(ctx, "acme")
		if err == nil {
			_, err = tc.Add(ctx, pluginapi.AddMarketplaceRequest{URL: tc.url, Keys: []string{other.verifier}})
		}
		if err == nil {
			err = tc.Remove(ctx, "other")
		}
		if err == nil && (len(tc.List()) != 1 || len(tc.Search(ctx, "review")) != 1) {
			err = errors.New("list or search")
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("refresh, add, remove and search waited for a download")
	}
	close(release)
	wg.Wait()
	for range 2 {
		if err := <-previews; err != nil {
			t.Fatal(err)
		}
	}
	if n := len(started); n != 0 {
		t.Fatalf("the second preview downloaded the archive again (%d more requests)", n)
	}
}

// TestClientConcurrentUse: refreshes that are refused, downloads and
// reads at the same time (run with -race).
func TestClientConcurrentUse(t *testing.T) {
	m := newMarket(t)
	now := t0.Add(time.Hour)
	tc := newTestClient(t, m, &now)
	ctx := context.Background()
	tc.add(t, m, "")
	p := filepath.Join(m.dir, IndexFile)
	good := readFile(t, m.dir, IndexFile)
	if err := os.WriteFile(p, []byte(strings.Replace(string(good), "Acme Plugins", "Acme Plugin$", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				switch i {
				case 0:
					if _, err := tc.Refresh(ctx, "acme"); err == nil {
						t.Error("a tampered index was accepted")
					}
				case 1:
					if _, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "review"}, nil); err != nil {
						t.Error(err)
					}
				case 2:
					for _, mp := range tc.List() {
						_ = mp.Error
					}
					tc.Get("acme")
				case 3:
					tc.Search(ctx, "")
					if _, err := tc.Plugin(ctx, "calc", ""); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if mp, _ := tc.Get("acme"); !strings.Contains(mp.Error, "refused (tampered index)") {
		t.Fatalf("the refusal is not recorded: %+v", mp)
	}
}

// The registry previews a staged download without hashing it again.
var _ StagedPreviewer = (*registry.Registry)(nil)

// stagedInstaller is a fakeInstaller that previews staged downloads with
// the listing it is given.
type stagedInstaller struct {
	*fakeInstaller
	listings [][]byte
}

func (s *stagedInstaller) PreviewStaged(ctx context.Context, path string, src *pluginapi.Source, listing []byte) (pluginapi.Preview, error) {
	if sha256hex(listing) != src.Digest {
		return pluginapi.Preview{}, core.Errorf(core.EINVALID, "not the listing of %s", src.Digest)
	}
	s.listings = append(s.listings, listing)
	return s.Preview(ctx, path)
}

// TestClientPreviewsWithTheListing: a preview hands the registry the
// listing the download was hashed into, staged or reused, so that it
// does not hash the folder again.
func TestClientPreviewsWithTheListing(t *testing.T) {
	m := newMarket(t)
	now := t0.Add(time.Hour)
	inst := &stagedInstaller{fakeInstaller: newFakeInstaller()}
	c, err := Open(Config{Dir: t.TempDir(), Plugins: inst, Protocol: 3, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Add(ctx, pluginapi.AddMarketplaceRequest{URL: serve(t, m), Keys: []string{m.verifier}}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		pv, err := c.Preview(ctx, pluginapi.MarketplaceInstallRequest{Name: "review"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(inst.listings); n == 0 || sha256hex(inst.listings[n-1]) != pv.Digest {
			t.Fatalf("the preview did not pass the listing of %s", pv.Digest)
		}
	}
	if len(inst.listings) != 2 {
		t.Fatalf("%d staged previews", len(inst.listings))
	}
}
