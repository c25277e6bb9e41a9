package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/integrity"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// Limits of a plugin folder being installed.
const (
	MaxInstallBytes = integrity.MaxBytes // all files together
	MaxInstallFiles = integrity.MaxFiles
)

// tempPrefix names the folder an install copies into before it is
// renamed to <id>/<version>; Open removes leftovers.
const tempPrefix = ".install-"

// inspected is a plugin folder checked for install.
type inspected struct {
	m   *plugins.Manifest
	sum string // integrity.Sum
}

// inspect reads and checks the plugin folder at path: the manifest, its
// bytes (the entry's sha256, or a bundle's digest) and whether this Kiln
// can run it. Problems are EINVALID with the precise reason.
//
// With moved set (an install that will move the folder into place and
// hash it there, Install's Move with a Source) the bytes are not hashed
// here: the sum is the one the manifest states for its entry, or for a
// bundle the digest the source published, and copyIn checks them on the
// one pass it makes over the moved folder.
func (r *Registry) inspect(path string, moved *pluginapi.Source) (inspected, error) {
	if !filepath.IsAbs(path) {
		return inspected{}, core.Errorf(core.EINVALID, "plugin path %q must be absolute (a folder on the server's machine)", path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return inspected{}, core.Errorf(core.EINVALID, "plugin folder: %v", err)
	}
	if !fi.IsDir() {
		return inspected{}, core.Errorf(core.EINVALID, "plugin path %s is not a folder (it must hold %s)", path, plugins.ManifestFile)
	}
	m, err := plugins.LoadManifest(path)
	if err != nil {
		var me *plugins.ManifestError
		if errors.As(err, &me) {
			return inspected{}, me.Unwrap()
		}
		return inspected{}, core.Errorf(core.EINVALID, "%v", err)
	}
	var sum string
	switch {
	case moved != nil && m.DataOnly():
		sum = moved.Digest
	case moved != nil:
		sum = m.SHA256
	default:
		if sum, err = integrity.Sum(path, m); err != nil {
			return inspected{}, core.Errorf(core.EINVALID, "plugin %s: %v", m.ID, err)
		}
	}
	kinds, err := kindsOf(m)
	if err != nil {
		return inspected{}, core.Errorf(core.EINVALID, "plugin %s %v", m.ID, err)
	}
	l, err := r.loader(m.EffectiveRuntime())
	if err != nil {
		return inspected{}, core.Errorf(core.EINVALID, "plugin %s: %v", m.ID, err)
	}
	if c, ok := l.(plugins.Carrier); ok {
		for _, k := range m.Provides {
			if !c.Carries(k) {
				return inspected{}, core.Errorf(core.EINVALID, "plugin %s provides %q, which its runtime %q cannot carry", m.ID, k, m.EffectiveRuntime())
			}
		}
	}
	if m.DataOnly() {
		if err := validate(l, path, m, kinds); err != nil {
			return inspected{}, core.Errorf(core.EINVALID, "plugin %s: %v", m.ID, err)
		}
	}
	return inspected{m: m, sum: sum}, nil
}

// validate opens a data-only bundle (nothing runs) and lets each kind
// that can check its content do so.
func validate(l plugins.Loader, dir string, m *plugins.Manifest, kinds []plugins.Kind) error {
	ctx := context.Background()
	inst, err := l.Load(ctx, plugins.LoadRequest{ID: m.ID, Dir: dir, Manifest: m})
	if err != nil {
		return err
	}
	defer inst.Close()
	for _, k := range kinds {
		v, ok := k.(plugins.Validator)
		if !ok {
			continue
		}
		client, err := inst.Dispense(ctx, k.Name())
		if err == nil {
			err = v.Validate(ctx, plugins.Attach{ID: m.ID, Manifest: m, Client: client})
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k.Name(), err)
		}
	}
	return nil
}

// Preview checks the plugin folder at path (absolute, on the server's
// machine) and says what installing it would ask for, without changing
// anything. For an upgrade (another version installed) it names what the
// new version asks for beyond the consent given to the installed one, the
// files that differ (Changes) and whether it is older (Downgrade).
func (r *Registry) Preview(_ context.Context, path string) (Preview, error) {
	p, err := r.preview(path, nil)
	if err != nil || p.Installed == "" {
		return p, err
	}
	p.Changes = r.changes(p, path, nil)
	return p, nil
}

// PreviewStaged is Preview of a folder its caller wrote and hashed as it
// wrote it (a marketplace download): listing is its integrity listing,
// whose digest must be src.Digest (EINVALID otherwise), as Install takes
// a moved folder with its Listing. Nothing in the folder is hashed again:
// its sum is src's digest (a bundle) or the one its manifest states for
// its entry, which Install checks on its one pass over the folder.
func (r *Registry) PreviewStaged(_ context.Context, path string, src *pluginapi.Source, listing []byte) (Preview, error) {
	if src == nil || listing == nil {
		return Preview{}, core.Errorf(core.EINVALID, "a staged preview needs the folder's source and listing")
	}
	if sum := sha256.Sum256(listing); hex.EncodeToString(sum[:]) != src.Digest {
		return Preview{}, core.Errorf(core.EINVALID, "the listing of %s is not the digest %s", path, src.Digest)
	}
	p, err := r.preview(path, src)
	if err != nil || p.Installed == "" {
		return p, err
	}
	p.Changes = r.changes(p, path, listing)
	return p, nil
}

// preview is Preview without Changes, which Install does not need.
func (r *Registry) preview(path string, moved *pluginapi.Source) (Preview, error) {
	in, err := r.inspect(path, moved)
	if err != nil {
		return Preview{}, err
	}
	m := in.m
	p := Preview{
		ID: m.ID, Version: m.Version, Description: m.Description, Runtime: string(m.EffectiveRuntime()),
		SHA256: in.sum, InterruptOn: m.InterruptOn, Permissions: m.ConsentSummary(), NeedsConsent: true,
	}
	for _, c := range m.Provides {
		p.Provides = append(p.Provides, string(c))
	}
	r.mu.Lock()
	if e, ok := r.entries[m.ID]; ok && e.builtin == nil {
		rec := r.state.Plugins[m.ID]
		p.Installed = rec.Version
		p.Downgrade = older(m.Version, rec.Version)
		p.Pinned = rec.Pinned
		if rec.Consent != nil {
			p.Added = rec.Consent.AddedLines(plugins.ConsentOf(m))
			p.NeedsConsent = len(p.Added) > 0
		}
	}
	r.mu.Unlock()
	return p, nil
}

// older reports whether version a precedes version b by semantic version
// precedence (build metadata ignored); false when either is not one.
func older(a, b string) bool {
	va, err := semver.StrictNewVersion(a)
	if err != nil {
		return false
	}
	vb, err := semver.StrictNewVersion(b)
	if err != nil {
		return false
	}
	return va.LessThan(vb)
}

// Install copies the plugin folder req.Path into Root/<id>/<version>,
// checks the copy again, records the consent and, unless req.Disabled,
// enables it. Installing another version of an installed plugin upgrades
// it: it needs consent only when it asks for more than was consented to,
// and the version it replaces is kept as the previous one (Rollback); the
// one kept before that is deleted. When the version replaced was running
// and the new one fails to start, the registry switches back to it and
// returns its Info and an EUNAVAIL error saying so.
//
// Refusals change nothing: EINVALID for a bad folder or manifest, a wrong
// sha256, missing consent or a bad req.Source; ECONFLICT for a built-in's
// ID, the same version already installed, an older version without
// req.AllowDowngrade, a pinned plugin, a folder that changed since it was
// previewed, or one whose digest is not req.Source's. When a new plugin is
// installed but fails to start, Install returns its Info (status failed)
// and an EUNAVAIL error.
func (r *Registry) Install(ctx context.Context, req InstallRequest) (Info, error) {
	var moved *pluginapi.Source
	if req.Move && req.Source != nil {
		moved = req.Source
	}
	p, err := r.preview(req.Path, moved)
	if err != nil {
		return Info{}, err
	}
	if req.SHA256 != "" && req.SHA256 != p.SHA256 {
		return Info{}, core.Errorf(core.ECONFLICT, "plugin %s changed since it was previewed (sha256 %s, previewed %s); review it again", p.ID, p.SHA256, req.SHA256)
	}
	if err := checkSource(req.Source, p); err != nil {
		return Info{}, err
	}
	unlock, err := r.lockOp(ctx)
	if err != nil {
		return Info{}, err
	}
	defer unlock()
	r.mu.Lock()
	old, exists := r.entries[p.ID]
	oldRec := r.state.Plugins[p.ID]
	r.mu.Unlock()
	switch {
	case exists && old.builtin != nil:
		return Info{}, core.Errorf(core.ECONFLICT, "plugin %q is built in; choose another id", p.ID)
	case exists && oldRec.Version == p.Version:
		return Info{}, core.Errorf(core.ECONFLICT, "plugin %s %s is already installed; remove it first (kiln plugin rm %s) or install another version", p.ID, p.Version, p.ID)
	case exists && oldRec.Pinned != "":
		return Info{}, pinnedError(p.ID, oldRec.Pinned, "installing "+p.Version)
	case exists && older(p.Version, oldRec.Version) && !req.AllowDowngrade:
		return Info{}, core.Errorf(core.ECONFLICT, "plugin %s %s is older than the installed %s; use --allow-downgrade (API: allow_downgrade) to install it anyway", p.ID, p.Version, oldRec.Version)
	}
	if p.NeedsConsent && !req.Consent {
		asked := p.Permissions
		if p.Installed != "" && len(p.Added) > 0 {
			asked = p.Added
		}
		return Info{}, core.Errorf(core.EINVALID, "installing %s %s needs consent to its permissions (%s); show them to the user (preview) and send consent: true", p.ID, p.Version, strings.Join(asked, "; "))
	}
	st, err := r.copyIn(req.Path, p, req.Move, req.Listing)
	if err != nil {
		return Info{}, err
	}
	if req.Source != nil && req.Source.Digest != st.digest {
		st.abort()
		return Info{}, core.Errorf(core.ECONFLICT, "plugin %s %s: its folder's digest is %s, but marketplace %s published %s; refused", p.ID, p.Version, st.digest, req.Source.Marketplace, req.Source.Digest)
	}
	m := st.m
	consent := plugins.ConsentOf(m)
	rec := record{
		installation: installation{Version: m.Version, SHA256: p.SHA256, Digest: st.digest, Consent: &consent, Source: cloneSource(req.Source), InstalledAt: time.Now().UTC()},
		Enabled:      !req.Disabled,
	}
	if !m.DataOnly() {
		if rec.ManifestSHA256, err = integrity.FileSum(st.dir, plugins.ManifestFile); err != nil {
			st.abort()
			return Info{}, fmt.Errorf("install %s: %w", m.ID, err)
		}
	}
	var drop *installation // the previous version, no longer kept
	if exists {
		cur := oldRec.installation
		rec.Previous = &cur
		if prev := oldRec.Previous; prev != nil && prev.Version != m.Version {
			drop = prev
		}
	}
	in, switched, err := r.swap(ctx, old, oldRec, &entry{id: m.ID, m: m, dir: st.dir}, rec)
	if !switched {
		st.abort()
		return in, err
	}
	st.commit()
	if drop != nil {
		os.RemoveAll(filepath.Join(r.cfg.Root, m.ID, drop.Version))
		os.Remove(r.listingPath(m.ID, drop.Version))
	}
	r.log.Info("plugin installed", "plugin", m.ID, "version", m.Version, "runtime", m.EffectiveRuntime(), "permissions", consent.Lines())
	return in, err
}

// checkSource checks what a marketplace says about the folder previewed
// as p: the version it published is the manifest's, and its sums are
// sums. The folder's digest is checked against it on the copy.
func checkSource(s *pluginapi.Source, p Preview) error {
	if s == nil {
		return nil
	}
	bad := func(format string, args ...any) error {
		return core.Errorf(core.EINVALID, "plugin %s: source: %s", p.ID, fmt.Sprintf(format, args...))
	}
	switch {
	case s.Marketplace == "":
		return bad("the marketplace's name is missing")
	case s.Version != p.Version:
		return bad("the marketplace published version %q, the folder holds %s", s.Version, p.Version)
	case !reSHA256.MatchString(s.ArchiveSHA256):
		return bad("archive_sha256 must be 64 lowercase hex digits")
	case !reSHA256.MatchString(s.Digest):
		return bad("digest must be 64 lowercase hex digits")
	case s.Commit != "" && !reCommit.MatchString(s.Commit):
		return bad("commit must be a git commit id, 40 or 64 lowercase hex digits")
	}
	return nil
}

var (
	reSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)
	reCommit = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)
)

func cloneSource(s *pluginapi.Source) *pluginapi.Source {
	if s == nil {
		return nil
	}
	c := *s
	return &c
}

// staged is a plugin folder copied in for install, at dir, not yet
// recorded: commit keeps it, abort removes it and puts back what stood
// there before.
type staged struct {
	m      *plugins.Manifest
	dir    string
	digest string // integrity.Tree of the copy
	// aside is where a folder that stood at dir was moved ("" if none);
	// listing the listing that stood beside it (nil if none).
	aside   string
	listing []byte
	parent  string
}

// commit deletes what the staged folder replaced.
func (s *staged) commit() {
	if s.aside != "" {
		os.RemoveAll(s.aside)
	}
}

// abort removes the staged folder and its listing and puts back what
// stood there.
func (s *staged) abort() {
	os.RemoveAll(s.dir)
	sums := s.dir + ".sums"
	os.Remove(sums)
	if s.aside != "" {
		os.Rename(s.aside, s.dir)
	}
	if s.listing != nil {
		os.WriteFile(sums, s.listing, 0o600)
	}
	os.Remove(s.parent) // when nothing else is installed there
}

// copyIn copies the plugin folder src into Root/<id>/<version> through a
// temporary folder, and verifies the copy against the preview p: the
// install is of the bytes the user saw, even if src changes meanwhile. A
// data-only bundle's listing is written beside the copy. A folder already
// at Root/<id>/<version> (a previous version reinstalled) is moved aside
// until the staged copy is committed or aborted.
func (r *Registry) copyIn(src string, p Preview, move bool, listing []byte) (*staged, error) {
	parent := filepath.Join(r.cfg.Root, p.ID)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, fmt.Errorf("install %s: %w", p.ID, err)
	}
	tmp, err := os.MkdirTemp(parent, tempPrefix)
	if err != nil {
		return nil, fmt.Errorf("install %s: %w", p.ID, err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
			os.Remove(parent) // when nothing else is installed there
		}
	}()
	moved, err := moveOrCopy(src, tmp, move)
	if err != nil {
		return nil, err
	}
	changed := core.Errorf(core.ECONFLICT, "plugin %s changed while it was being installed; try again", p.ID)
	got, err := plugins.LoadManifest(tmp)
	if err != nil || got.ID != p.ID || got.Version != p.Version || !slices.Equal(got.ConsentSummary(), p.Permissions) {
		return nil, changed
	}
	// One pass over the copy gives its digest and, from the listing, the
	// entry's sha256; a moved folder's listing may come from its writer.
	t, err := treeOf(tmp, moved, listing)
	if err != nil {
		return nil, core.Errorf(core.EINVALID, "plugin %s: %v", p.ID, err)
	}
	if got.DataOnly() && t.Digest != p.SHA256 || !got.DataOnly() && (got.SHA256 != p.SHA256 || integrity.Listed(t.Listing, got.Entry) != p.SHA256) {
		return nil, changed
	}
	st := &staged{m: got, dir: filepath.Join(parent, p.Version), digest: t.Digest, parent: parent}
	if _, err := os.Lstat(st.dir); err == nil {
		aside, err := os.MkdirTemp(parent, tempPrefix)
		if err == nil {
			err = os.Remove(aside)
		}
		if err == nil {
			err = os.Rename(st.dir, aside)
		}
		if err != nil {
			return nil, fmt.Errorf("install %s: %w", p.ID, err)
		}
		st.aside = aside
	}
	sums := r.listingPath(p.ID, p.Version)
	st.listing, _ = os.ReadFile(sums)
	if err := os.Rename(tmp, st.dir); err != nil {
		st.abort()
		return nil, fmt.Errorf("install %s: %w", p.ID, err)
	}
	ok = true
	if got.DataOnly() {
		if err := os.WriteFile(sums, t.Listing, 0o600); err != nil {
			st.abort()
			return nil, fmt.Errorf("install %s: %w", p.ID, err)
		}
	}
	return st, nil
}

// treeOf is integrity.Tree(dir), or for a folder moved into place whose
// writer hashed it as it wrote it, that writer's listing and its digest.
func treeOf(dir string, moved bool, listing []byte) (integrity.TreeSum, error) {
	if !moved || listing == nil {
		return integrity.Tree(dir)
	}
	sum := sha256.Sum256(listing)
	return integrity.TreeSum{Digest: hex.EncodeToString(sum[:]), Listing: listing}, nil
}

// moveOrCopy fills the empty folder dst with src's files: with move, by
// renaming src over it when both are on one filesystem (src is then gone;
// it reports true), else by copying.
func moveOrCopy(src, dst string, move bool) (bool, error) {
	if move {
		if err := os.Remove(dst); err != nil {
			return false, err
		}
		if err := os.Rename(src, dst); err == nil {
			return true, nil
		}
		if err := os.Mkdir(dst, 0o700); err != nil {
			return false, err
		}
	}
	return false, copyTree(src, dst)
}

// copyTree copies the regular files and folders under src into dst. A
// symlink is followed when it leads to a file inside src; a symlink out of
// src, a symlinked folder, a device or a socket is refused, as is a tree
// past MaxInstallFiles or MaxInstallBytes.
func copyTree(src, dst string) error {
	root, err := os.OpenRoot(src)
	if err != nil {
		return core.Errorf(core.EINVALID, "plugin folder: %v", err)
	}
	defer root.Close()
	files, total := 0, int64(0)
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return core.Errorf(core.EINVALID, "plugin folder: %v", err)
		}
		target := filepath.Join(dst, filepath.FromSlash(p))
		if d.IsDir() {
			if p == "." {
				return nil
			}
			return os.Mkdir(target, 0o700)
		}
		fi, err := root.Stat(p) // follows a symlink, inside src only
		if err != nil {
			return core.Errorf(core.EINVALID, "plugin folder: %s: %v", p, err)
		}
		if !fi.Mode().IsRegular() {
			return core.Errorf(core.EINVALID, "plugin folder: %s is not a regular file or folder", p)
		}
		if files++; files > MaxInstallFiles {
			return core.Errorf(core.EINVALID, "plugin folder has more than %d files", MaxInstallFiles)
		}
		if total += fi.Size(); total > MaxInstallBytes {
			return core.Errorf(core.EINVALID, "plugin folder is larger than %d MiB", MaxInstallBytes>>20)
		}
		return copyFile(root, p, target, fi.Mode().Perm(), fi.Size())
	})
}

// copyFile copies p to target, at most size bytes: a file that grows
// while it is copied is cut, and the verification after the copy fails.
func copyFile(root *os.Root, p, target string, perm fs.FileMode, size int64) error {
	in, err := root.Open(p)
	if err != nil {
		return core.Errorf(core.EINVALID, "plugin folder: %s: %v", p, err)
	}
	defer in.Close()
	out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm&0o755|0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, io.LimitReader(in, size)); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
