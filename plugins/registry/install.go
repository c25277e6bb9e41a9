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
)

// Limits of a plugin folder being installed.
const (
	MaxInstallBytes = 512 << 20 // all files together
	MaxInstallFiles = 10000
)

// tempPrefix names the folder an install copies into before it is
// renamed to <id>/<version>; Open removes leftovers.
const tempPrefix = ".install-"

// inspect reads and checks the plugin folder at path: the manifest, the
// entry's sha256 and what this Kiln can load. Problems are EINVALID with
// the precise reason.
func (r *Registry) inspect(path string) (*plugins.Manifest, error) {
	if !filepath.IsAbs(path) {
		return nil, core.Errorf(core.EINVALID, "plugin path %q must be absolute (a folder on the server's machine)", path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, core.Errorf(core.EINVALID, "plugin folder: %v", err)
	}
	if !fi.IsDir() {
		return nil, core.Errorf(core.EINVALID, "plugin path %s is not a folder (it must hold %s)", path, plugins.ManifestFile)
	}
	m, err := plugins.LoadManifest(path)
	if err != nil {
		var me *plugins.ManifestError
		if errors.As(err, &me) {
			return nil, me.Unwrap()
		}
		return nil, core.Errorf(core.EINVALID, "%v", err)
	}
	if err := m.VerifyEntry(path); err != nil {
		return nil, core.Errorf(core.EINVALID, "plugin %s: %v", m.ID, err)
	}
	if !slices.Contains(m.Provides, plugins.CapToolset) {
		return nil, core.Errorf(core.EINVALID, "plugin %s provides %s; this Kiln loads toolset plugins only", m.ID, quoteCaps(m.Provides))
	}
	if m.Runtime == plugins.RuntimeWASM && r.cfg.WASM == nil {
		return nil, core.Errorf(core.EINVALID, "plugin %s is a WASM plugin and this server has no WASM host", m.ID)
	}
	return m, nil
}

// Preview checks the plugin folder at path (absolute, on the server's
// machine) and says what installing it would ask for, without changing
// anything.
func (r *Registry) Preview(_ context.Context, path string) (Preview, error) {
	m, err := r.inspect(path)
	if err != nil {
		return Preview{}, err
	}
	p := Preview{
		ID: m.ID, Version: m.Version, Description: m.Description, Runtime: m.Runtime,
		Provides: m.Provides, SHA256: m.SHA256, InterruptOn: m.InterruptOn,
		Permissions: m.ConsentSummary(),
	}
	r.mu.Lock()
	if e, ok := r.entries[m.ID]; ok && e.builtin == nil {
		p.Installed = r.state.Plugins[m.ID].Version
	}
	r.mu.Unlock()
	return p, nil
}

// Install copies the plugin folder req.Path into Root/<id>/<version>,
// checks the copy again, records the permissions the user accepted and,
// unless req.Disabled, enables it. Installing another version of an
// installed plugin replaces it. Refusals change
// nothing: EINVALID for a bad folder or manifest, a wrong sha256 or
// missing consent; ECONFLICT for a built-in's ID, the same version
// already installed, or a folder that changed since it was previewed.
// When the plugin is installed but fails to start, Install returns its
// Info (status failed) and an EUNAVAIL error.
func (r *Registry) Install(ctx context.Context, req InstallRequest) (Info, error) {
	m, err := r.inspect(req.Path)
	if err != nil {
		return Info{}, err
	}
	if req.SHA256 != "" && req.SHA256 != m.SHA256 {
		return Info{}, core.Errorf(core.ECONFLICT, "plugin %s changed since it was previewed (sha256 %s, previewed %s); review it again", m.ID, m.SHA256, req.SHA256)
	}
	if !req.Consent {
		return Info{}, core.Errorf(core.EINVALID, "installing %s %s needs consent to its permissions (%s); show them to the user (preview) and send consent: true", m.ID, m.Version, strings.Join(m.ConsentSummary(), "; "))
	}
	r.op.Lock()
	defer r.op.Unlock()
	r.mu.Lock()
	old, exists := r.entries[m.ID]
	oldRec := r.state.Plugins[m.ID]
	r.mu.Unlock()
	switch {
	case exists && old.builtin != nil:
		return Info{}, core.Errorf(core.ECONFLICT, "plugin %q is built in; choose another id", m.ID)
	case exists && oldRec.Version == m.Version:
		return Info{}, core.Errorf(core.ECONFLICT, "plugin %s %s is already installed; remove it first (kiln plugin rm %s) or install another version", m.ID, m.Version, m.ID)
	}
	dir, err := r.copyIn(req.Path, m)
	if err != nil {
		return Info{}, err
	}
	enable := !req.Disabled
	if exists {
		r.stop(old)
	}
	e := &entry{id: m.ID, m: m, dir: dir}
	rec := record{Version: m.Version, Enabled: enable, SHA256: m.SHA256, Permissions: m.ConsentSummary(), InstalledAt: time.Now().UTC()}
	r.mu.Lock()
	r.entries[m.ID] = e
	r.state.Plugins[m.ID] = rec
	err = r.saveState()
	r.mu.Unlock()
	if err != nil {
		return Info{}, err
	}
	if exists {
		os.RemoveAll(old.dir)
	}
	r.log.Info("plugin installed", "plugin", m.ID, "version", m.Version, "runtime", m.Runtime, "permissions", rec.Permissions)
	if !enable {
		return r.Get(ctx, m.ID)
	}
	return r.startReported(ctx, e)
}

// copyIn copies the plugin folder src into Root/<id>/<version> through a
// temporary folder, and verifies the copy against m: the install is of the
// bytes the user saw, even if src changes meanwhile.
func (r *Registry) copyIn(src string, m *plugins.Manifest) (string, error) {
	parent := filepath.Join(r.cfg.Root, m.ID)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", fmt.Errorf("install %s: %w", m.ID, err)
	}
	tmp, err := os.MkdirTemp(parent, tempPrefix)
	if err != nil {
		return "", fmt.Errorf("install %s: %w", m.ID, err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
			os.Remove(parent) // when nothing else is installed there
		}
	}()
	if err := copyTree(src, tmp); err != nil {
		return "", err
	}
	got, err := plugins.LoadManifest(tmp)
	if err == nil {
		err = got.VerifyEntry(tmp)
	}
	if err != nil || got.SHA256 != m.SHA256 || !slices.Equal(got.ConsentSummary(), m.ConsentSummary()) {
		return "", core.Errorf(core.ECONFLICT, "plugin %s changed while it was being installed; try again", m.ID)
	}
	dst := filepath.Join(parent, m.Version)
	if err := os.RemoveAll(dst); err != nil {
		return "", fmt.Errorf("install %s: %w", m.ID, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", fmt.Errorf("install %s: %w", m.ID, err)
	}
	ok = true
	return dst, nil
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
