package registry

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// lock is the lock file of the record: every installed plugin, sorted by
// id; r.mu is held (or the registry is not shared yet).
func (r *Registry) lock() pluginapi.Lock {
	l := pluginapi.Lock{Version: pluginapi.LockVersion, Plugins: []pluginapi.LockedPlugin{}}
	for id, rec := range r.state.Plugins {
		if rec.Version == "" || r.isBuiltin(id) {
			continue
		}
		p := pluginapi.LockedPlugin{
			ID: id, Version: rec.Version, SHA256: rec.SHA256, Digest: rec.Digest, Pinned: rec.Pinned != "",
		}
		if rec.Consent != nil {
			p.Runtime = string(rec.Consent.Runtime)
		} else if e := r.entries[id]; e != nil && e.m != nil {
			p.Runtime = string(e.m.EffectiveRuntime())
		}
		if s := rec.Source; s != nil {
			p.Source = &pluginapi.LockSource{Marketplace: s.Marketplace, ArchiveSHA256: s.ArchiveSHA256, IndexVersion: s.IndexVersion, Commit: s.Commit}
		}
		l.Plugins = append(l.Plugins, p)
	}
	slices.SortFunc(l.Plugins, func(a, b pluginapi.LockedPlugin) int { return strings.Compare(a.ID, b.ID) })
	return l
}

// isBuiltin reports whether id is a built-in's.
func (r *Registry) isBuiltin(id string) bool {
	return slices.ContainsFunc(r.cfg.Builtins, func(b plugins.Builtin) bool { return b.Manifest.ID == id })
}

// writeLock writes Config.LockFile from the record, atomically, unless it
// says that already; r.mu is held (or the registry is not shared yet).
func (r *Registry) writeLock() error {
	if r.cfg.LockFile == "" {
		return nil
	}
	want, err := marshal(r.lock())
	if err != nil {
		return err
	}
	if have, err := os.ReadFile(r.cfg.LockFile); err == nil && bytes.Equal(have, want) {
		return nil
	}
	if err := writeAtomic(r.cfg.LockFile, want); err != nil {
		return fmt.Errorf("write the plugin lock file: %w", err)
	}
	return nil
}
