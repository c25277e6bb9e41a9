package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sandbox/service"
)

// Replicas on one database say where they are and that they run: each
// writes its entry, its URL and the time, under its replica-id in the
// key/value namespace presenceNS every presenceEvery. A replica whose
// entry is older than presenceTTL is gone: the others send it no more
// requests and take over its sandboxes (service.Config.Alive). The times
// are the replicas' clocks, which must agree within a few seconds.
const (
	presenceNS    = "kiln.replicas"
	presenceEvery = 2 * time.Second
	presenceTTL   = 10 * time.Second
)

// presenceEntry is a replica's entry.
type presenceEntry struct {
	URL  string    `json:"url"`
	Seen time.Time `json:"seen"`
}

// presence is this replica's view of the others.
type presence struct {
	kv   core.KVStore
	self string
	url  string
	log  *slog.Logger

	mu      sync.Mutex
	entries map[string]presenceEntry
	read    time.Time // when entries were read
}

// advertiseURL is the URL other replicas reach this one at:
// KILN_ADVERTISE_URL, else http:// and the listen address, with the
// host's name in place of an address that is not one (0.0.0.0, ::).
func advertiseURL(getenv func(string) string, ln net.Addr) (string, error) {
	if v := getenv("KILN_ADVERTISE_URL"); v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "", fmt.Errorf("KILN_ADVERTISE_URL: %q is not an http(s) URL such as http://kiln-1:8420", v)
		}
		return u.Scheme + "://" + u.Host, nil
	}
	host, port, err := net.SplitHostPort(ln.String())
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if host, err = os.Hostname(); err != nil {
			return "", err
		}
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// run writes this replica's entry until ctx ends.
func (p *presence) run(ctx context.Context) {
	t := time.NewTicker(presenceEvery)
	defer t.Stop()
	for {
		b, _ := json.Marshal(presenceEntry{URL: p.url, Seen: time.Now()})
		if err := p.kv.KVPut(ctx, presenceNS, p.self, b); err != nil && ctx.Err() == nil {
			p.log.Warn("say this replica runs", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// lookup returns replica's entry, reading the namespace at most once a
// second.
func (p *presence) lookup(replica string) (presenceEntry, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.read) > time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		entries := map[string]presenceEntry{}
		keys, err := p.kv.KVList(ctx, presenceNS, "", "", 1000)
		for _, k := range keys {
			b, found, gerr := p.kv.KVGet(ctx, presenceNS, k)
			var e presenceEntry
			if gerr == nil && found && json.Unmarshal(b, &e) == nil {
				entries[k] = e
			}
		}
		if err == nil {
			p.entries, p.read = entries, time.Now()
		}
	}
	e, ok := p.entries[replica]
	return e, ok
}

// alive reports whether replica's entry is fresh (service.Config.Alive).
// Without an answer from the database, every replica is taken to be
// alive: nothing is taken over on a doubt.
func (p *presence) alive(replica string) bool {
	e, ok := p.lookup(replica)
	if !ok {
		p.mu.Lock()
		unread := p.read.IsZero()
		p.mu.Unlock()
		return unread
	}
	return time.Since(e.Seen) < presenceTTL
}

// forwarder is the sandbox API's Forward: a request about a sandbox
// another replica holds goes to it; 503 when that replica is gone (the
// sandbox is taken over or marked lost within seconds). nil on a single
// server (p nil).
func (p *presence) forwarder(sbx *service.Service) func(r *http.Request, id string) (*url.URL, error) {
	if p == nil {
		return nil
	}
	return func(r *http.Request, id string) (*url.URL, error) {
		holder, err := sbx.Holder(r.Context(), id)
		if err != nil || holder == "" || holder == p.self {
			return nil, nil // served here: a 404 for a sandbox there is none of
		}
		e, ok := p.lookup(holder)
		if !ok || time.Since(e.Seen) >= presenceTTL {
			return nil, fmt.Errorf("sandbox %s is held by the server %s, which has stopped; it is being taken over or marked lost", id, holder)
		}
		return url.Parse(e.URL)
	}
}
