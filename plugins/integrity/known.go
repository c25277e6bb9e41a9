package integrity

import (
	"sync"
	"time"
)

// quiet is how long a file must have been left alone to be remembered.
const quiet = time.Second

// A Fingerprint identifies a file's contents without reading them: its
// device and inode, size, and modification and change times (in
// nanoseconds). Writing to the file, or replacing it, changes it: the
// change time is set by the kernel on every change and cannot be set back
// from user space. The zero Fingerprint matches nothing.
type Fingerprint struct {
	Dev, Ino     uint64
	Size         int64
	Mtime, Ctime int64
}

// Known remembers files whose sha256 was verified, by path, with their
// fingerprint then, so that a runtime that starts the same executable
// again (a restart, an enable after a disable) need not hash it again
// while it is unchanged. It is safe for concurrent use.
type Known struct {
	mu    sync.Mutex
	files map[string]known
}

type known struct {
	sum string
	fp  Fingerprint
}

// Good reports whether path was verified to have sha256 sum while its
// fingerprint was fp (FingerprintOf, taken now). It is false for the zero
// Fingerprint, which is all a system without fingerprints has.
func (k *Known) Good(path, sum string, fp Fingerprint) bool {
	if fp == (Fingerprint{}) {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	f, ok := k.files[path]
	return ok && f.sum == sum && f.fp == fp
}

// Remember records that path has sha256 sum, if its fingerprint is before
// now as well: taken before the file was hashed and checked again after,
// so that a file changed meanwhile is not remembered. A file changed in
// the last second is not remembered either: the kernel stamps times from a
// coarse clock, so two writes within one tick may leave the same
// fingerprint, and only a file at rest since before the hash is known.
func (k *Known) Remember(path, sum string, before Fingerprint) {
	fp, ok := fingerprint(path)
	if !ok || fp != before || fp == (Fingerprint{}) || time.Since(time.Unix(0, max(fp.Ctime, fp.Mtime))) < quiet {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.files == nil {
		k.files = map[string]known{}
	}
	k.files[path] = known{sum, fp}
}

// FingerprintOf returns path's fingerprint now; the zero Fingerprint when
// the file cannot be stat'ed or fingerprints are not supported here.
func FingerprintOf(path string) Fingerprint {
	fp, _ := fingerprint(path)
	return fp
}
