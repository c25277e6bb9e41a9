package marketplace

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kilnhq/kiln/plugins"
)

// bigIndex returns an index of plugins×versions plugin versions.
func bigIndex(plugins_, versions int) *Index {
	idx := &Index{Schema: IndexSchemaURL, Name: "acme", Owner: Owner{Name: "Acme"}, Published: t0, Expires: t0.Add(DefaultExpiresAfter)}
	for p := range plugins_ {
		name := fmt.Sprintf("plugin-%05d", p)
		pl := Plugin{Name: name, Description: "A plugin that does useful things for agents, number " + fmt.Sprint(p) + ".", Author: "Acme", License: "MIT", Tags: []string{"tools", "example"}, Kinds: []string{"toolset"}}
		for v := versions - 1; v >= 0; v-- {
			ver := fmt.Sprintf("1.%d.0", v)
			pl.Versions = append(pl.Versions, Version{
				Version:   ver,
				Published: t0.Add(-time.Duration(v) * 24 * time.Hour),
				Artifact:  Artifact{URL: ArchivePath(name, ver), SHA256: fmt.Sprintf("%064x", p*versions+v), Size: 123456},
				Digest:    fmt.Sprintf("%064x", p*versions+v+1),
				Manifest: ManifestSummary{Runtime: plugins.RuntimeWASM, Provides: []string{"toolset"},
					Permissions: plugins.Permissions{Network: []string{fmt.Sprintf("api%d.example.com", p)}, MemoryMiB: 64, TimeoutMS: 30000}},
				Protocol: Protocol,
			})
		}
		idx.Plugins = append(idx.Plugins, pl)
	}
	return idx
}

// BenchmarkRefresh10k refreshes and verifies, over HTTP on loopback, an
// index of 10,000 plugin versions (2,000 plugins with 5 versions each,
// about 6 MB) that is the 300th entry of its log, from a client that last
// saw the 100th. Target: under 200 ms.
func BenchmarkRefresh10k(b *testing.B) {
	dir := b.TempDir()
	signer, verifier := testKey(b, "acme")
	var log Log
	var seen Trust
	for i := range 299 {
		if _, err := publishIndex(dir, []byte(fmt.Sprintf("{%d}", i)), "acme", uint64(i+1), &log, signer); err != nil {
			b.Fatal(err)
		}
		if i == 99 {
			tree, _ := log.Tree()
			seen = Trust{Keys: []string{verifier}, Version: 100, Tree: tree, Seen: t0}
		}
	}
	idx := bigIndex(2000, 5)
	idx.Version, idx.Log.Index = 300, log.Size()
	raw, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := publishIndex(dir, raw, "acme", idx.Version, &log, signer); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(Handler(dir))
	defer srv.Close()
	f, err := NewFetcher(srv.URL, srv.Client())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ResetTimer()
	for b.Loop() {
		v, err := Refresh(context.Background(), f, "acme", seen, t0)
		if err != nil {
			b.Fatal(err)
		}
		if n := len(v.Index.Plugins); n != 2000 {
			b.Fatalf("%d plugins", n)
		}
	}
}
