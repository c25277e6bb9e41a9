//go:build unix

package grantfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

func TestHardLinkRefused(t *testing.T) {
	g, outside := setup(t, true)
	if err := os.Link(filepath.Join(outside, "secret"), filepath.Join(g.Path, "planted")); err != nil {
		t.Skip("hard links not supported:", err)
	}
	d := open(t, g)
	if fi, err := d.Stat("planted"); err != nil || HardLinks(fi) != 2 {
		t.Errorf("HardLinks of the planted file: %v, %v", fi, err)
	}
	for method, err := range every(d, "planted") {
		switch method {
		case "Stat", "Walk":
			if err != nil {
				t.Errorf("%s(planted) = %v; only reads and writes are refused", method, err)
			}
			continue
		case "ReadDir":
			continue // not a folder
		}
		wantCode(t, method+"(planted)", err, core.EFORBIDDEN)
		if !errors.Is(err, ErrLinked) || !strings.Contains(err.Error(), "has 2 hard links; Kiln refuses files linked from elsewhere") {
			t.Errorf("%s(planted) = %v; want the hard-link refusal", method, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "secret" {
		t.Errorf("outside/secret = %q after the refused write", b)
	}
}

func TestDevicesAndPipesRefused(t *testing.T) {
	g, _ := setup(t, true)
	fifo := filepath.Join(g.Path, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	d := open(t, g)
	done := make(chan map[string]error)
	go func() { done <- every(d, "fifo") }()
	select {
	case errs := <-done:
		for _, method := range []string{"Open", "ReadFile", "WriteFile"} {
			wantCode(t, method+"(fifo)", errs[method], core.EINVALID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an access to a FIFO blocked")
	}
}
