package service

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/grantfs"
)

// SkillsPath is where a thread's sandbox shows the skills staged into it
// (StageSkill): /skills/<name>/, read-only.
const SkillsPath = "/skills"

// Limits of a staged skill's folder.
const (
	MaxSkillBytes = 64 << 20
	MaxSkillFiles = 10000
)

// skillsDir is the host folder of a sandbox's skills, mounted at
// SkillsPath.
func (s *Service) skillsDir(id string) string { return filepath.Join(s.cfg.SkillsDir, id) }

// stagePrefix starts the names of the folders in SkillsDir (beside the
// sandboxes' folders, never in one) that StageSkill copies a skill into
// before it renames it into place, and of the old copies it replaces.
const stagePrefix = ".stage-"

// removeStaging removes what a StageSkill cut short by a crash left in
// dir (a SkillsDir) before any stage starts.
func removeStaging(dir string) error {
	left, err := filepath.Glob(filepath.Join(dir, stagePrefix+"*"))
	if err != nil {
		return err
	}
	for _, p := range left {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

// StageSkill shows the skill folder fsys at SkillsPath/<name>/ in the
// thread sandbox rec, read-only: Kiln copies it into the sandbox's skills
// folder on the host (SkillsDir/<id>/<name>), which the sandbox mounts
// read-only, so that a command in the sandbox can run the skill's scripts
// but not change them. Only folders and regular files with one hard link
// are copied (symbolic links and files linked from elsewhere are left
// out, as the file tools refuse them); files keep whether they are
// executable. A copy that is current (the same paths, sizes, modes and
// times) is kept; a changed skill replaces it whole, by a rename: it is
// copied in SkillsDir, out of every mount, so a sandbox never sees a
// half-copied folder.
//
// A sandbox without a skills folder (its runtime mounts no host folders,
// or it was made before) is EUNAVAIL, saying so; a skill over
// MaxSkillBytes or MaxSkillFiles is ELIMIT.
func (s *Service) StageSkill(rec *core.Sandbox, name string, fsys fs.FS) error {
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return core.Errorf(core.EINVALID, "stage skill: bad skill name %q", name)
	}
	if err := s.hasSkills(rec); err != nil {
		return err
	}
	sum, err := fingerprint(fsys)
	if err != nil {
		return err
	}
	s.stageMu.Lock()
	defer s.stageMu.Unlock()
	key := rec.ID + "\x00" + name
	dir := s.skillsDir(rec.ID)
	dest := filepath.Join(dir, name)
	if s.staged[key] == sum {
		if _, err := os.Lstat(dest); err == nil {
			return nil
		}
	}
	// Copied beside the mounted folder, on the same filesystem, the skill
	// shows in the sandbox only whole, by the rename.
	tmp, err := os.MkdirTemp(s.cfg.SkillsDir, stagePrefix)
	if err != nil {
		return fmt.Errorf("stage skill %s: %w", name, err)
	}
	defer os.RemoveAll(tmp)
	if err := copySkill(fsys, tmp); err != nil {
		return fmt.Errorf("stage skill %s: %w", name, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("stage skill %s: %w", name, err)
	}
	if _, err := os.Lstat(dest); err == nil {
		old := tmp + ".old" // out of the mount too
		if err := os.Rename(dest, old); err != nil {
			return fmt.Errorf("stage skill %s: %w", name, err)
		}
		defer os.RemoveAll(old)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return fmt.Errorf("stage skill %s: %w", name, err)
	}
	if s.staged == nil {
		s.staged = map[string]string{}
	}
	s.staged[key] = sum
	return nil
}

// hasSkills returns nil when rec has a skills folder, else why not.
func (s *Service) hasSkills(rec *core.Sandbox) error {
	if s.cfg.SkillsDir != "" {
		if fi, err := os.Lstat(s.skillsDir(rec.ID)); err == nil && fi.IsDir() {
			return nil
		}
	}
	if r, err := s.runtime(rec.Runtime); err == nil && !r.Capabilities().Mounts {
		return core.Errorf(core.EUNAVAIL, "the %s sandbox runtime mounts no host folders, so it cannot show a skill's folder at %s/<name>/ to run its scripts; "+
			"run such skills on a runtime that does (docker)", rec.Runtime, SkillsPath)
	}
	if s.cfg.SkillsDir == "" {
		return core.Errorf(core.EUNAVAIL, "this server stages no skills into sandboxes")
	}
	return core.Errorf(core.EUNAVAIL, "this thread's sandbox %s was made without a skills folder (before the server staged skills); "+
		"delete it (kiln sandbox rm %s) and the next call makes one that has it", rec.ID, rec.ID)
}

// mkdirShared makes the folder dir, mode 0755 whatever the umask: a
// sandbox's user, who reads it through a mount, is not its owner.
func mkdirShared(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	return os.Chmod(dir, 0o755)
}

// dropSkills removes a sandbox's skills folder once it has ended.
func (s *Service) dropSkills(id string) {
	if s.cfg.SkillsDir == "" {
		return
	}
	s.stageMu.Lock()
	for k := range s.staged {
		if strings.HasPrefix(k, id+"\x00") {
			delete(s.staged, k)
		}
	}
	s.stageMu.Unlock()
	if err := os.RemoveAll(s.skillsDir(id)); err != nil {
		s.log.Warn("remove a sandbox's skills folder", "sandbox", id, "err", err)
	}
}

// fingerprint sums the paths, sizes, modes and times of what fsys holds,
// refusing a folder over the limits.
func fingerprint(fsys fs.FS) (string, error) {
	h := sha256.New()
	var files int
	var bytes int64
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if files++; files > MaxSkillFiles {
			return core.Errorf(core.ELIMIT, "the skill's folder holds more than %d files and folders", MaxSkillFiles)
		}
		if fi.Mode().IsRegular() {
			if bytes += fi.Size(); bytes > MaxSkillBytes {
				return core.Errorf(core.ELIMIT, "the skill's folder holds more than %d MiB", MaxSkillBytes>>20)
			}
		}
		fmt.Fprintf(h, "%q %d %v %d\n", p, fi.Size(), fi.Mode(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		var ce *core.Error
		if errors.As(err, &ce) {
			return "", err
		}
		return "", fmt.Errorf("read the skill's folder: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copySkill copies fsys into the folder dst: folders (0755) and regular
// files with one hard link (0755 when executable, else 0644).
func copySkill(fsys fs.FS, dst string) error {
	return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		to := filepath.Join(dst, filepath.FromSlash(p))
		switch {
		case p == ".":
			return nil
		case d.IsDir():
			return mkdirShared(to)
		case !d.Type().IsRegular():
			return nil // a symbolic link or a special file
		}
		return copySkillFile(fsys, p, to)
	})
}

// copySkillFile copies the regular file p of fsys to the path to, unless
// it has several hard links or is not the file the walk saw.
func copySkillFile(fsys fs.FS, p, to string) error {
	before, err := fs.Lstat(fsys, p)
	if err != nil {
		return err
	}
	f, err := fsys.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || grantfs.HardLinks(fi) > 1 || (os.SameFile(before, before) && !os.SameFile(before, fi)) {
		return nil
	}
	perm := fs.FileMode(0o644)
	if fi.Mode().Perm()&0o111 != 0 {
		perm = 0o755
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, io.LimitReader(f, MaxSkillBytes+1)); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(to, perm)
}
