package registry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/Masterminds/semver/v3"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/integrity"
)

// Rollback switches plugin id to the version installed before the
// current one, in one step: the previous version's folder is checked
// against the digest recorded when it was installed, and its manifest
// against its record and its consent as recorded (no new consent is
// asked), before anything changes. The current version then becomes the
// previous one, so a second Rollback rolls forward. The plugin stays
// enabled or disabled as it was; when it was running and the previous
// version fails to start, the current one is started again and an
// EUNAVAIL error says so.
//
// Refusals change nothing: ENOTFOUND for an unknown plugin, EINVALID for
// a built-in, ECONFLICT when no previous version is kept, the plugin is
// pinned, or the previous version's folder no longer matches its record.
func (r *Registry) Rollback(ctx context.Context, id string) (Info, error) {
	unlock, err := r.lockOp(ctx)
	if err != nil {
		return Info{}, err
	}
	defer unlock()
	r.mu.Lock()
	cur, ok := r.entries[id]
	rec := r.state.Plugins[id]
	r.mu.Unlock()
	switch {
	case !ok:
		return Info{}, notFound(id)
	case cur.builtin != nil:
		return Info{}, core.Errorf(core.EINVALID, "plugin %q is built in: it has no other version to roll back to", id)
	case rec.Previous == nil:
		return Info{}, core.Errorf(core.ECONFLICT, "plugin %s %s has no previous version to roll back to (one is kept only once another version is installed over it)", id, rec.Version)
	case rec.Pinned != "":
		return Info{}, pinnedError(id, rec.Pinned, "rolling back to "+rec.Previous.Version)
	}
	prev := *rec.Previous
	dir := filepath.Join(r.cfg.Root, id, prev.Version)
	refuse := func(why string) error {
		return core.Errorf(core.ECONFLICT, "plugin %s cannot roll back to %s: %s; %s stays installed", id, prev.Version, why, rec.Version)
	}
	if prev.Digest == "" {
		return Info{}, refuse("no digest of its folder was recorded to check it against")
	}
	t, err := integrity.Tree(dir)
	if err != nil {
		return Info{}, refuse(err.Error())
	}
	if t.Digest != prev.Digest {
		why := fmt.Sprintf("its folder changed since it was installed (digest %s, recorded %s)", t.Digest, prev.Digest)
		if listing, err := os.ReadFile(r.listingPath(id, prev.Version)); err == nil {
			if d := integrity.Diff(listing, t.Listing); d != "" {
				why = "its folder changed since it was installed: " + d
			}
		}
		return Info{}, refuse(why)
	}
	m, reason := r.checkInstalled(id, dir, prev)
	if reason == "" {
		if _, err := kindsOf(m); err != nil {
			reason = err.Error()
		}
	}
	if reason != "" {
		return Info{}, refuse(reason)
	}
	next := record{installation: prev, Enabled: rec.Enabled}
	now := rec.installation
	next.Previous = &now
	in, switched, err := r.swap(ctx, cur, rec, &entry{id: id, m: m, dir: dir}, next)
	if switched {
		r.log.Info("plugin rolled back", "plugin", id, "from", rec.Version, "to", prev.Version)
	}
	return in, err
}

// swap makes rec the record of plugin e.id and e its entry, in place of
// old (nil for a new plugin) whose record was oldRec, and starts e when
// rec is enabled. The record is saved first: when that fails nothing
// changed and switched is false. When old was running and e fails to
// start, swap switches back to old and starts it again: switched is false
// and the error EUNAVAIL names both. Otherwise switched is true, and the
// error is EUNAVAIL when e failed to start. r.op is held.
func (r *Registry) swap(ctx context.Context, old *entry, oldRec record, e *entry, rec record) (in Info, switched bool, err error) {
	id := e.id
	r.mu.Lock()
	if err := r.setRecord(id, &rec); err != nil {
		r.mu.Unlock()
		return Info{}, false, err
	}
	wasRunning := old != nil && old.run != nil
	r.mu.Unlock()
	if old != nil {
		r.stop(old)
	}
	r.mu.Lock()
	r.entries[id] = e
	r.mu.Unlock()
	if !rec.Enabled {
		in, err := r.Get(ctx, id)
		return in, true, err
	}
	in, err = r.startReported(ctx, e)
	if err == nil || !wasRunning {
		return in, true, err
	}
	// The version that was running goes back in.
	r.stop(e)
	r.mu.Lock()
	if serr := r.setRecord(id, &oldRec); serr != nil {
		r.mu.Unlock()
		return in, true, errors.Join(err, fmt.Errorf("switch plugin %s back to %s: %w", id, oldRec.Version, serr))
	}
	r.entries[id] = old
	r.mu.Unlock()
	back, berr := r.startReported(ctx, old)
	if berr != nil {
		return back, false, core.Errorf(core.EUNAVAIL, "plugin %s %s failed to start (%s), and %s, switched back to, failed too: %v", id, rec.Version, in.Error, oldRec.Version, berr)
	}
	return back, false, core.Errorf(core.EUNAVAIL, "plugin %s %s failed to start: %s; %s is running again", id, rec.Version, in.Error, oldRec.Version)
}

// Pin holds plugin id at version, which must be the installed one: the
// lock file and Info say so, `kiln plugin upgrade` leaves it alone, and
// installing another version of it or rolling it back is refused until it
// is unpinned. Pin with version "" unpins. Pinning a pinned plugin again,
// or unpinning one that is not, changes nothing.
//
// ENOTFOUND for an unknown plugin; EINVALID for a built-in or a version
// that is not a semantic version; ECONFLICT when version is not the
// installed one.
func (r *Registry) Pin(ctx context.Context, id, version string) (Info, error) {
	unlock, err := r.lockOp(ctx)
	if err != nil {
		return Info{}, err
	}
	defer unlock()
	if err := r.pin(id, version); err != nil {
		return Info{}, err
	}
	return r.Get(ctx, id)
}

func (r *Registry) pin(id, version string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[id]
	if !ok {
		return notFound(id)
	}
	if e.builtin != nil {
		return core.Errorf(core.EINVALID, "plugin %q is built in: it comes with this Kiln and has no versions to pin", id)
	}
	rec := r.state.Plugins[id]
	if version != "" {
		if _, err := semver.StrictNewVersion(version); err != nil {
			return core.Errorf(core.EINVALID, "version %q is not a semantic version (MAJOR.MINOR.PATCH, no leading v)", version)
		}
		if version != rec.Version {
			return core.Errorf(core.ECONFLICT, "plugin %s is at %s, not %s: install %s first, then pin it", id, rec.Version, version, version)
		}
	}
	if rec.Pinned == version {
		return nil
	}
	rec.Pinned = version
	return r.setRecord(id, &rec)
}

// pinnedError refuses what would move a pinned plugin off its version.
func pinnedError(id, pinned, what string) error {
	return core.Errorf(core.ECONFLICT, "plugin %s is pinned at %s, so %s is refused; unpin it first (kiln plugin unpin %s)", id, pinned, what, id)
}
