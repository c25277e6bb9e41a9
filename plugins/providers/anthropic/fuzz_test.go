package anthropic

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/providertest"
)

// FuzzReadStream feeds the stream parser arbitrary bodies, seeded with the
// recorded streams: it must never panic, and a reply it accepts has valid
// JSON arguments for every tool call.
func FuzzReadStream(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.http"))
	if len(paths) == 0 {
		f.Fatal("no fixtures")
	}
	for _, p := range paths {
		fx := providertest.ReadFixture(f, filepath.Base(p))
		if strings.HasPrefix(fx.Header.Get("Content-Type"), "text/event-stream") {
			f.Add(fx.Body)
		}
	}
	names := providers.NewToolNames(nil, nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := readStream(context.Background(), strings.NewReader(string(body)), names, func(string) {})
		if err != nil {
			return
		}
		for _, c := range resp.ToolCalls {
			if !json.Valid(c.Args) {
				t.Errorf("tool call %s: invalid arguments %q", c.ID, c.Args)
			}
		}
	})
}
