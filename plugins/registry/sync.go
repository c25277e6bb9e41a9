package registry

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Several servers may share one Root (kiln serve's KILN_SHARED_ROOT): one
// installs, enables, disables, rolls back, pins or removes a plugin, and
// the others' Sync brings their loaded plugins in line with the record
// it wrote. Every change takes an exclusive lock of Root's lock file
// (flock) and reads the record again first, so two servers' changes do
// not lose each other's.

// opLockFile, in Config.Root, is locked for the length of each change.
const opLockFile = ".op.lock"

// lockOp starts a change: it takes r.op and Root's lock file, and makes
// the record this server holds the one on disk (syncLocked). The function
// it returns ends the change.
func (r *Registry) lockOp(ctx context.Context) (unlock func(), err error) {
	r.op.Lock()
	f, err := os.OpenFile(filepath.Join(r.cfg.Root, opLockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		r.op.Unlock()
		return nil, fmt.Errorf("lock the plugin registry: %w", err)
	}
	unlock = func() {
		f.Close() // releases the flock
		r.op.Unlock()
	}
	if err := r.syncLocked(ctx); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// Sync reads the record again, as another server sharing Root may have
// changed it, and loads, reloads or unloads the plugins whose record
// changed: one installed, updated or rolled back there is loaded here
// (or reloaded), one removed is unloaded, one enabled or disabled is
// started or stopped. A plugin that fails to load is reported by List, as
// at Open.
func (r *Registry) Sync(ctx context.Context) error {
	unlock, err := r.lockOp(ctx)
	if err != nil {
		return err
	}
	unlock()
	return nil
}

// syncLocked is Sync with r.op held.
func (r *Registry) syncLocked(ctx context.Context) error {
	st, from, _, err := loadState(filepath.Join(r.cfg.Root, stateFile), r.cfg.Root)
	if err != nil {
		return err
	}
	if from != stateVersion {
		return fmt.Errorf("plugin registry: %s is version %d; it is migrated when a server opens it", stateFile, from)
	}
	r.mu.Lock()
	old := r.state
	r.state = st
	var stop, start []*entry
	for id := range union(old.Plugins, st.Plugins) {
		o, had := old.Plugins[id]
		n, has := st.Plugins[id]
		e := r.entries[id]
		if e != nil && e.builtin != nil {
			switch was, is := enabledIn(old, e), enabledIn(st, e); {
			case was && !is:
				stop = append(stop, e)
			case !was && is:
				start = append(start, e)
			}
			continue
		}
		switch {
		case !has:
			if e != nil {
				stop = append(stop, e)
				delete(r.entries, id)
			}
		case !had || e == nil || o.Version != n.Version || o.Digest != n.Digest:
			if e != nil {
				stop = append(stop, e)
			}
			ne := &entry{id: id, dir: filepath.Join(r.cfg.Root, id, n.Version)}
			ne.m, ne.err = r.checkInstalled(id, ne.dir, n.installation)
			r.entries[id] = ne
			if n.Enabled && ne.err == "" {
				start = append(start, ne)
			}
		case o.Enabled != n.Enabled:
			if n.Enabled {
				start = append(start, e)
			} else {
				stop = append(stop, e)
			}
		}
	}
	r.mu.Unlock()
	for _, e := range stop {
		r.stop(e)
	}
	for _, e := range start {
		if err := r.start(ctx, e); err != nil {
			r.log.Warn("plugin failed to start", "plugin", e.id, "err", err)
		}
	}
	if len(stop)+len(start) > 0 {
		r.log.Info("plugins changed by another server", "started", len(start), "stopped", len(stop))
	}
	return nil
}

// union is the keys of a and b.
func union(a, b map[string]record) map[string]bool {
	keys := make(map[string]bool, len(a)+len(b))
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	return keys
}
