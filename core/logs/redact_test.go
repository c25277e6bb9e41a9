package logs

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/slogtest"

	"github.com/kilnhq/kiln/core"
)

func TestRedacting(t *testing.T) {
	r := core.NewRedactor()
	r.SetSecret("provider openai api_key", "my-own-key-7f3a9c21")
	var buf bytes.Buffer
	log := slog.New(Redacting(slog.NewJSONHandler(&buf, nil), r))
	log = log.With("conf", "key=my-own-key-7f3a9c21")
	log.WithGroup("g").Warn("upstream said Incorrect API key provided: my-own-key-7f3a9c21",
		"err", errors.New("401: my-own-key-7f3a9c21"),
		"header", "Authorization: Bearer abcdef0123456789",
		slog.Group("inner", "v", []string{"my-own-key-7f3a9c21"}),
		"n", 3, "plain", "nothing secret")
	out := buf.String()
	if strings.Contains(out, "my-own-key-7f3a9c21") || strings.Contains(out, "abcdef0123456789") {
		t.Fatalf("a secret reached the log: %s", out)
	}
	for _, want := range []string{`"msg":"upstream said Incorrect API key provided: [REDACTED]"`, `"err":"401: [REDACTED]"`,
		`"header":"Authorization: Bearer [REDACTED]"`, `"n":3`, `"plain":"nothing secret"`, `"conf":"key=[REDACTED]"`, `"v":"[[REDACTED]]"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s: %s", want, out)
		}
	}
}

// TestRedactingHandler runs the standard library's handler conformance
// suite over the redacting handler.
func TestRedactingHandler(t *testing.T) {
	var buf bytes.Buffer
	slogtest.Run(t, func(*testing.T) slog.Handler {
		buf.Reset()
		return Redacting(slog.NewJSONHandler(&buf, nil), core.NewRedactor())
	}, func(*testing.T) map[string]any {
		return parseJSONLine(t, buf.Bytes())
	})
}
