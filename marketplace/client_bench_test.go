package marketplace

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/pluginapi"
	"github.com/kilnhq/kiln/plugins/registry"
	"github.com/kilnhq/kiln/plugins/skillbundle"
	"github.com/kilnhq/kiln/skills"
)

// BenchmarkSearch10k searches an index of 10,000 plugin versions (2,000
// plugins with 5 versions each) for a name, a word of the descriptions,
// two tags and a missing word, and reports the median query time.
// Target: p50 under 5 ms.
func BenchmarkSearch10k(b *testing.B) {
	c, err := Open(Config{Dir: b.TempDir(), Plugins: newFakeInstaller(), Protocol: Protocol, Now: func() time.Time { return t0 }})
	if err != nil {
		b.Fatal(err)
	}
	c.st.Marketplaces["acme"] = &marketplace{Kind: pluginapi.MarketplaceKiln}
	c.loaded["acme"] = newLoaded(bigIndex(2000, 5))
	queries := []string{"plugin-01234", "useful", "tools example", "nothing-matches-this"}
	var times []time.Duration
	for b.Loop() {
		for _, q := range queries {
			start := time.Now()
			res := c.Search(context.Background(), q)
			times = append(times, time.Since(start))
			if q == "plugin-01234" && (len(res) == 0 || res[0].Name != "plugin-01234" || res[0].Latest != "1.4.0") {
				b.Fatalf("search %q: %+v", q, res[:min(len(res), 2)])
			}
		}
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
}

// BenchmarkInstall20MB installs, through the plugin registry, a skills
// bundle holding a 20 MB file from a marketplace on the local disk (a
// folder path): verify, download, unpack, check, copy into the registry.
// It reports the install's time over that of copying the archive once
// (copy-x). Target: within 2x.
func BenchmarkInstall20MB(b *testing.B) {
	src := b.TempDir()
	writeFiles(b, filepath.Join(src, "src/big"), map[string]string{
		"kiln-plugin.json":    `{"apiVersion":"kiln.dev/v1","id":"big","version":"1.0.0","description":"A large bundle.","provides":["skills"],"permissions":{}}`,
		"skills/big/SKILL.md": "---\nname: big\ndescription: A skill with a large file.\n---\nRead data.bin.\n",
	})
	blob := make([]byte, 20<<20)
	rand.Read(blob)
	if err := os.WriteFile(filepath.Join(src, "src/big/skills/big/data.bin"), blob, 0o644); err != nil {
		b.Fatal(err)
	}
	signer, verifier := testKey(b, "local")
	writePublish(b, src, Publish{Name: "local", Owner: Owner{Name: "Bench"}, Plugins: []PublishPlugin{{Path: "src/big"}}})
	if _, err := Build(BuildOptions{Dir: src, Signer: signer, Now: t0}); err != nil {
		b.Fatal(err)
	}
	archive := filepath.Join(src, filepath.FromSlash(ArchivePath("big", "1.0.0")))
	ctx := context.Background()

	var install, copying time.Duration
	for b.Loop() {
		b.StopTimer()
		root := b.TempDir()
		cat, err := skills.NewCatalog(filepath.Join(root, "skills"), nil)
		if err != nil {
			b.Fatal(err)
		}
		reg, err := registry.Open(ctx, registry.Config{
			Root: filepath.Join(root, "plugins"), DataRoot: filepath.Join(root, "plugin-data"), CacheRoot: filepath.Join(root, "cache"),
			Hosts: map[plugins.Capability]any{skillbundle.Name: cat}, LockFile: filepath.Join(root, "plugins.lock"),
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			b.Fatal(err)
		}
		c, err := Open(Config{Dir: filepath.Join(root, "marketplaces"), Plugins: reg, Protocol: Protocol, Now: func() time.Time { return t0 }})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Add(ctx, pluginapi.AddMarketplaceRequest{Name: "local", URL: src, Keys: []string{verifier}}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := copyFile(archive, filepath.Join(root, "copy.tar.gz")); err != nil {
			b.Fatal(err)
		}
		copying += time.Since(start)
		b.StartTimer()
		start = time.Now()
		if _, err := c.Install(ctx, pluginapi.MarketplaceInstallRequest{Name: "big", Consent: true}); err != nil {
			b.Fatal(err)
		}
		install += time.Since(start)
		b.StopTimer()
		reg.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(install)/float64(copying), "copy-x")
	b.ReportMetric(float64(copying.Microseconds())/float64(b.N)/1000, "copy-ms")
}

// copyFile copies src to dst, synced, as a user copying the archive
// would (cp then sync).
func copyFile(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}
