package web

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/coretest"
	"github.com/kilnhq/kiln/core/sqlite"
	"github.com/kilnhq/kiln/plugins/builtin"
	"github.com/kilnhq/kiln/plugins/builtin/cron"
)

// benchServer is a Kiln API on a SQLite file, served over real HTTP.
func benchServer(b *testing.B) (*core.Service, *sqlite.Store, *httptest.Server) {
	b.Helper()
	dir := b.TempDir()
	store, err := sqlite.Open(filepath.Join(dir, "kiln.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	models := builtin.Models()
	svc, err := core.New(core.Config{
		Store: store, Tools: builtin.Tools(dir), DefaultModel: "scripted",
		Models:    func(ref string) (core.Model, error) { return models[ref], nil },
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Schedules: cron.Parse, TriggerKey: []byte("bench-trigger-key-of-32-bytes!!!"),
	})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(New(svc, Options{Loopback: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	b.Cleanup(func() {
		srv.Close()
		svc.Shutdown(context.Background())
		store.Close()
	})
	return svc, store, srv
}

func percentile(d []time.Duration, p float64) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds()) / 1000
}

// BenchmarkSSELatency measures the time from the start of a commit (a new
// thread) to its event arriving at a client of GET /api/v1/events over
// HTTP, and reports p50 and p99 in milliseconds.
func BenchmarkSSELatency(b *testing.B) {
	svc, _, srv := benchServer(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	arrived := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev core.Event
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == core.EventThreadCreated {
				arrived <- ev.ThreadID
			}
		}
	}()
	const samples = 2000
	lat := make([]time.Duration, 0, samples)
	b.ResetTimer()
	for range b.N {
		lat = lat[:0]
		for range samples {
			t0 := time.Now()
			th, err := svc.CreateThread(ctx, core.LocalOwner, core.ThreadInput{Title: "latency"})
			if err != nil {
				b.Fatal(err)
			}
			select {
			case id := <-arrived:
				if id != th.ID {
					b.Fatalf("event for %s, want %s", id, th.ID)
				}
			case <-time.After(5 * time.Second):
				b.Fatal("event did not arrive")
			}
			lat = append(lat, time.Since(t0))
		}
	}
	b.ReportMetric(percentile(lat, 0.50), "p50-ms")
	b.ReportMetric(percentile(lat, 0.99), "p99-ms")
}

// BenchmarkList100k measures the thread list, both inbox queues and
// search over HTTP with 100,000 threads stored (each with two messages;
// coretest.Seed), reporting p50 and p99 in milliseconds. The searches: a
// word in about 1,700 threads ("matching"), two of them (in a handful),
// a three-letter prefix in about one thread in ten ("broad"), a word in
// none ("none"), and a word in each queue.
func BenchmarkList100k(b *testing.B) {
	_, store, srv := benchServer(b)
	coretest.Seed(b, store, 100_000)
	w := coretest.SeedWords
	for _, c := range []struct{ name, path string }{
		{"threads", "/api/v1/threads?limit=50"},
		{"inbox-unread", "/api/v1/inbox?queue=unread&limit=50"},
		{"inbox-action", "/api/v1/inbox?queue=action&limit=50"},
		{"search-matching", "/api/v1/threads?limit=50&q=" + w[7]},
		{"search-two-words", "/api/v1/threads?limit=50&q=" + w[7] + "+" + w[900]},
		{"search-broad", "/api/v1/threads?limit=50&q=" + w[7][:3]},
		{"search-none", "/api/v1/threads?limit=50&q=zzzz"},
		{"search-unread", "/api/v1/inbox?queue=unread&limit=50&q=" + w[7]},
		{"search-action", "/api/v1/inbox?queue=action&limit=50&q=" + w[7]},
	} {
		b.Run(c.name, func(b *testing.B) {
			const samples = 300
			lat := make([]time.Duration, 0, samples)
			for range b.N {
				lat = lat[:0]
				for range samples {
					t0 := time.Now()
					resp, err := http.Get(srv.URL + c.path)
					if err != nil {
						b.Fatal(err)
					}
					n, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK || n < 10 {
						b.Fatalf("%s: %d, %d bytes", c.path, resp.StatusCode, n)
					}
					lat = append(lat, time.Since(t0))
				}
			}
			b.ReportMetric(percentile(lat, 0.50), "p50-ms")
			b.ReportMetric(percentile(lat, 0.99), "p99-ms")
		})
	}
}

// BenchmarkWebhookLatency: the time from sending a signed webhook
// delivery (X-Kiln-Signature over a 1 KiB JSON body) to its 202, which
// comes after the occurrence, its thread and its run are committed.
func BenchmarkWebhookLatency(b *testing.B) {
	svc, _, srv := benchServer(b)
	v, err := svc.CreateTrigger(context.Background(), core.LocalOwner, core.TriggerInput{
		Kind: core.TriggerWebhook, Prompt: "text {{.msg}}", Overlap: core.OverlapAllowAll, RateLimit: 100000})
	if err != nil {
		b.Fatal(err)
	}
	body := `{"msg":"` + strings.Repeat("x", 1000) + `"}`
	mac := hmac.New(sha256.New, []byte(v.Secret))
	mac.Write([]byte(body))
	sig := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	const samples = 1000
	lat := make([]time.Duration, 0, samples)
	for range b.N {
		lat = lat[:0]
		for range samples {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks/"+v.ID, strings.NewReader(body))
			req.Header.Set("X-Kiln-Signature", sig)
			t0 := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			lat = append(lat, time.Since(t0))
			if resp.StatusCode != http.StatusAccepted {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	}
	b.ReportMetric(percentile(lat, 0.50), "p50-ms")
	b.ReportMetric(percentile(lat, 0.99), "p99-ms")
}
