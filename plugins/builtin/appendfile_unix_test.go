//go:build unix

package builtin

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestAppendFileRefusesFIFO(t *testing.T) {
	scratch := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(scratch, "pipe"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := appendCall(t, NewAppendFile(scratch), "pipe", "x")
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("appending to a FIFO: want an error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("appending to a FIFO blocked")
	}
}
