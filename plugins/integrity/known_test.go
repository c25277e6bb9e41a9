package integrity_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/kilnhq/kiln/plugins/integrity"
)

// TestKnown: a file is known good while it is unchanged; rewriting it with
// the same size and its old modification time, or replacing it, makes it
// unknown (the kernel's change time moves on).
func TestKnown(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("fingerprints are supported on Linux")
	}
	path := filepath.Join(t.TempDir(), "bin")
	write(t, path, []byte("version 1"))
	sum := hexSum([]byte("version 1"))
	var k integrity.Known
	if k.Good(path, sum, integrity.FingerprintOf(path)) {
		t.Fatal("a file never verified is known good")
	}
	// Just written: not at rest, so not remembered.
	k.Remember(path, sum, integrity.FingerprintOf(path))
	if k.Good(path, sum, integrity.FingerprintOf(path)) {
		t.Fatal("a file changed a moment ago was remembered")
	}
	old := time.Now().Add(-time.Minute)
	os.Chtimes(path, old, old) // sets the ctime to now, the mtime back
	time.Sleep(1100 * time.Millisecond)
	k.Remember(path, sum, integrity.FingerprintOf(path))
	if !k.Good(path, sum, integrity.FingerprintOf(path)) || k.Good(path, hexSum([]byte("other")), integrity.FingerprintOf(path)) {
		t.Fatal("Good after Remember")
	}
	fi, _ := os.Stat(path)
	time.Sleep(10 * time.Millisecond)
	write(t, path, []byte("version 2")) // same size
	os.Chtimes(path, fi.ModTime(), fi.ModTime())
	if k.Good(path, sum, integrity.FingerprintOf(path)) {
		t.Error("a rewritten file with its old mtime is still known good")
	}
	k.Remember(path, sum, integrity.FingerprintOf(path))
	// Replaced by another file.
	other := path + ".new"
	write(t, other, []byte("version 3"))
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	if k.Good(path, sum, integrity.FingerprintOf(path)) {
		t.Error("a replaced file is still known good")
	}
	// A file changed between its fingerprint and the end of its hashing
	// is not remembered.
	before := integrity.FingerprintOf(path)
	time.Sleep(10 * time.Millisecond)
	write(t, path, []byte("version 4"))
	k.Remember(path, hexSum([]byte("version 3")), before)
	if k.Good(path, hexSum([]byte("version 3")), integrity.FingerprintOf(path)) {
		t.Error("remembered a file that changed while it was hashed")
	}
}
