package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/integrity"
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
func (r *Registry) inspect(path string) (inspected, error) {
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
	sum, err := integrity.Sum(path, m)
	if err != nil {
		return inspected{}, core.Errorf(core.EINVALID, "plugin %s: %v", m.ID, err)
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
// anything. For an upgrade it names what the new version asks for beyond
// the consent given to the installed one.
func (r *Registry) Preview(_ context.Context, path string) (Preview, error) {
	in, err := r.inspect(path)
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
		if rec.Consent != nil {
			p.Added = rec.Consent.AddedLines(plugins.ConsentOf(m))
			p.NeedsConsent = len(p.Added) > 0
		}
	}
	r.mu.Unlock()
	return p, nil
}

// Install copies the plugin folder req.Path into Root/<id>/<version>,
// checks the copy again, records the consent and, unless req.Disabled,
// enables it. Installing another version of an installed plugin replaces
// it; it needs consent only when it asks for more than was consented to.
// Refusals change nothing: EINVALID for a bad folder or manifest, a wrong
// sha256 or missing consent; ECONFLICT for a built-in's ID, the same
// version already installed, or a folder that changed since it was
// previewed. When the plugin is installed but fails to start, Install
// returns its Info (status failed) and an EUNAVAIL error.
func (r *Registry) Install(ctx context.Context, req InstallRequest) (Info, error) {
	p, err := r.Preview(ctx, req.Path)
	if err != nil {
		return Info{}, err
	}
	if req.SHA256 != "" && req.SHA256 != p.SHA256 {
		return Info{}, core.Errorf(core.ECONFLICT, "plugin %s changed since it was previewed (sha256 %s, previewed %s); review it again", p.ID, p.SHA256, req.SHA256)
	}
	if p.NeedsConsent && !req.Consent {
		asked := p.Permissions
		if p.Installed != "" && len(p.Added) > 0 {
			asked = p.Added
		}
		return Info{}, core.Errorf(core.EINVALID, "installing %s %s needs consent to its permissions (%s); show them to the user (preview) and send consent: true", p.ID, p.Version, strings.Join(asked, "; "))
	}
	r.op.Lock()
	defer r.op.Unlock()
	r.mu.Lock()
	old, exists := r.entries[p.ID]
	oldRec := r.state.Plugins[p.ID]
	r.mu.Unlock()
	switch {
	case exists && old.builtin != nil:
		return Info{}, core.Errorf(core.ECONFLICT, "plugin %q is built in; choose another id", p.ID)
	case exists && oldRec.Version == p.Version:
		return Info{}, core.Errorf(core.ECONFLICT, "plugin %s %s is already installed; remove it first (kiln plugin rm %s) or install another version", p.ID, p.Version, p.ID)
	}
	m, dir, err := r.copyIn(req.Path, p)
	if err != nil {
		return Info{}, err
	}
	enable := !req.Disabled
	if exists {
		r.stop(old)
	}
	consent := plugins.ConsentOf(m)
	e := &entry{id: m.ID, m: m, dir: dir}
	rec := record{Version: m.Version, Enabled: enable, SHA256: p.SHA256, Consent: &consent, InstalledAt: time.Now().UTC()}
	if !m.DataOnly() {
		if rec.ManifestSHA256, err = integrity.FileSum(dir, plugins.ManifestFile); err != nil {
			return Info{}, fmt.Errorf("install %s: %w", m.ID, err)
		}
	}
	r.mu.Lock()
	r.entries[m.ID] = e
	r.state.Plugins[m.ID] = rec
	err = r.saveState()
	r.mu.Unlock()
	if err != nil {
		return Info{}, err
	}
	if exists && old.dir != dir {
		os.RemoveAll(old.dir)
		os.Remove(r.listingPath(old.id, oldRec.Version))
	}
	r.log.Info("plugin installed", "plugin", m.ID, "version", m.Version, "runtime", m.EffectiveRuntime(), "permissions", consent.Lines())
	if !enable {
		return r.Get(ctx, m.ID)
	}
	return r.startReported(ctx, e)
}

// copyIn copies the plugin folder src into Root/<id>/<version> through a
// temporary folder, and verifies the copy against the preview p: the
// install is of the bytes the user saw, even if src changes meanwhile. A
// data-only bundle's listing is written beside the copy.
func (r *Registry) copyIn(src string, p Preview) (*plugins.Manifest, string, error) {
	parent := filepath.Join(r.cfg.Root, p.ID)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, "", fmt.Errorf("install %s: %w", p.ID, err)
	}
	tmp, err := os.MkdirTemp(parent, tempPrefix)
	if err != nil {
		return nil, "", fmt.Errorf("install %s: %w", p.ID, err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
			os.Remove(parent) // when nothing else is installed there
		}
	}()
	if err := copyTree(src, tmp); err != nil {
		return nil, "", err
	}
	changed := core.Errorf(core.ECONFLICT, "plugin %s changed while it was being installed; try again", p.ID)
	got, err := plugins.LoadManifest(tmp)
	if err != nil || got.ID != p.ID || got.Version != p.Version || !slices.Equal(got.ConsentSummary(), p.Permissions) {
		return nil, "", changed
	}
	if got.DataOnly() {
		t, err := integrity.Tree(tmp)
		if err != nil || t.Digest != p.SHA256 {
			return nil, "", changed
		}
		if err := os.WriteFile(r.listingPath(p.ID, p.Version), t.Listing, 0o600); err != nil {
			return nil, "", fmt.Errorf("install %s: %w", p.ID, err)
		}
	} else if sum, err := integrity.Sum(tmp, got); err != nil || sum != p.SHA256 {
		return nil, "", changed
	}
	dst := filepath.Join(parent, p.Version)
	if err := os.RemoveAll(dst); err != nil {
		return nil, "", fmt.Errorf("install %s: %w", p.ID, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return nil, "", fmt.Errorf("install %s: %w", p.ID, err)
	}
	ok = true
	return got, dst, nil
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
