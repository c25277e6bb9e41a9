package process

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHCLogAdapter(t *testing.T) {
	var buf bytes.Buffer
	l := newHCLog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), "go-plugin")
	l.Trace("hidden by the handler")
	l.Named("stdio").With("a", 1).Warn("careful", "b", 2)
	l.Debug("shown")
	if !l.IsDebug() || l.IsTrace() {
		t.Errorf("IsDebug=%v IsTrace=%v", l.IsDebug(), l.IsTrace())
	}
	l.SetLevel(hclog.Error)
	l.Warn("dropped")
	if l.GetLevel() != hclog.Error {
		t.Errorf("GetLevel = %v", l.GetLevel())
	}
	w := l.StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Error})
	w.Write([]byte("line one\nline "))
	w.Write([]byte("two\n"))

	out := buf.String()
	for _, want := range []string{
		`level=WARN msg=careful logger=go-plugin.stdio a=1 b=2`,
		`level=DEBUG msg=shown logger=go-plugin`,
		`level=ERROR msg="line one" logger=go-plugin`,
		`level=ERROR msg="line two" logger=go-plugin`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	for _, unwanted := range []string{"hidden", "dropped"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("log has %q:\n%s", unwanted, out)
		}
	}
}
