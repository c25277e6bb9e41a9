package marketplace

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// The staging folder, Dir/.staging: a marketplace is named in Dir too,
// and no marketplace name starts with a dot. A Kiln download is staged
// in Dir/.staging/<digest>; conversions (Claude Code, MCP Registry) and
// git clones use temporary folders beside them, which their callers
// remove.
const stagingDir = ".staging"

// Staged previews kept for the install that follows them: the newest
// maxStaged, none older than stagedFor. An unpacked plugin may take
// hundreds of MiB; previewing version after version does not fill the
// disk.
const (
	maxStaged = 3
	stagedFor = time.Hour
)

// keyLocks is a mutex per key (a marketplace's name, a folder digest),
// held by those who use it and forgotten when none does.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int // holders and waiters
}

// lock locks key and returns its unlock.
func (k *keyLocks) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyLock{}
	}
	l := k.m[key]
	if l == nil {
		l = &keyLock{}
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

// evictStaged removes the staged downloads beyond the newest maxStaged-1
// other than keep (the digest being staged, which makes maxStaged), and
// those staged longer than stagedFor ago. A download in use (being
// staged, previewed or installed) is neither removed nor left out of the
// count.
func (c *Client) evictStaged(keep string) {
	root := filepath.Join(c.cfg.Dir, stagingDir)
	ents, err := os.ReadDir(root)
	if err != nil {
		return
	}
	type entry struct {
		name string
		at   time.Time
	}
	var staged []entry
	for _, e := range ents {
		if !e.IsDir() || e.Name() == keep || checkSHA256(e.Name()) != "" {
			continue
		}
		if fi, err := e.Info(); err == nil {
			staged = append(staged, entry{e.Name(), fi.ModTime()})
		}
	}
	slices.SortFunc(staged, func(a, b entry) int { return cmp.Or(b.at.Compare(a.at), cmp.Compare(a.name, b.name)) })
	now := c.cfg.Now()
	c.staging.mu.Lock()
	defer c.staging.mu.Unlock()
	kept := 0
	for _, e := range staged {
		switch {
		case c.staging.m[e.name] != nil:
			kept++
		case kept < maxStaged-1 && now.Sub(e.at) < stagedFor:
			kept++
		default:
			os.RemoveAll(filepath.Join(root, e.name))
		}
	}
}
