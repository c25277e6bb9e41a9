package files

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/grantfs"
)

// A skill's folder (Options.SkillFiles) is read through its fs.FS, which
// may be an os.DirFS: that follows symbolic links wherever they lead, so
// every path is checked segment by segment with fs.Lstat and one that is
// or goes through a symbolic link is refused, as is a file with more than
// one hard link (grantfs's rule).

// skillBase is the view path of the run's skill folder: /skills/<name>.
func skillBase(env *view) string { return "/" + mountSkills + "/" + env.Skill }

// fsName is rel's name in an fs.FS: "." for the folder itself.
func fsName(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// skillStat describes what rel (a clean slash path inside the skill's
// folder, "" for the folder) names, without following symbolic links:
// EFORBIDDEN when rel is or goes through one, ENOTFOUND when there is
// nothing, EINVALID when a segment before the last is a file.
func skillStat(fsys fs.FS, rel string) (fs.FileInfo, error) {
	if rel == "" {
		fi, err := fs.Stat(fsys, ".")
		return fi, skillErr(err)
	}
	var fi fs.FileInfo
	p := ""
	for seg := range strings.SplitSeq(rel, "/") {
		if fi != nil && !fi.IsDir() {
			return nil, core.Errorf(core.EINVALID, "a segment of the path is a file, not a folder")
		}
		p = path.Join(p, seg)
		var err error
		if fi, err = fs.Lstat(fsys, p); err != nil {
			return nil, skillErr(err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, core.Errorf(core.EFORBIDDEN, "the path is or goes through a symbolic link; Kiln does not follow links in a skill's folder")
		}
	}
	return fi, nil
}

// openSkill opens the file rel names in the skill's folder, with the
// refusals of skillStat and plainSkillFile, and returns it with its size.
// A refused hard link matches grantfs.ErrLinked.
func openSkill(fsys fs.FS, rel string) (fs.File, int64, error) {
	fi, err := skillStat(fsys, rel)
	if err != nil {
		return nil, 0, err
	}
	if err := plainSkillFile(fi); err != nil {
		return nil, 0, err
	}
	f, err := fsys.Open(rel)
	if err != nil {
		return nil, 0, skillErr(err)
	}
	ofi, err := f.Stat()
	if err == nil {
		err = plainSkillFile(ofi)
	}
	if err == nil && !sameFile(fi, ofi) {
		err = core.Errorf(core.EFORBIDDEN, "the file was replaced while it was being opened")
	}
	if err != nil {
		f.Close()
		return nil, 0, skillErr(err)
	}
	return f, ofi.Size(), nil
}

// plainSkillFile returns nil when fi is a regular file with one hard
// link, else why it is refused.
func plainSkillFile(fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		return core.Errorf(core.EINVALID, "the path names a folder, not a file")
	case !fi.Mode().IsRegular():
		return core.Errorf(core.EINVALID, "not a regular file (a symbolic link, device, pipe or the like)")
	}
	if n := grantfs.HardLinks(fi); n > 1 {
		return &linked{core.Errorf(core.EFORBIDDEN, "the file has %d hard links; Kiln refuses files linked from elsewhere", n)}
	}
	return nil
}

// linked is the refusal of a file with several hard links: a *core.Error
// that also matches grantfs.ErrLinked, as grantfs's own does.
type linked struct{ err *core.Error }

func (l *linked) Error() string   { return l.err.Error() }
func (l *linked) Unwrap() []error { return []error{l.err, grantfs.ErrLinked} }

// sameFile reports whether the infos of a file before and after opening
// it describe one file. Infos that do not come from the os package (an
// embed.FS, a fstest.MapFS) cannot be compared and are taken to: such a
// file system has no links to swap in between the two.
func sameFile(before, after fs.FileInfo) bool {
	if !os.SameFile(before, before) {
		return true
	}
	return os.SameFile(before, after)
}

// skillErr turns an error of a skill's fs.FS into a *core.Error whose
// message holds no path; a *core.Error passes, and an error other than a
// missing file or a denied access is a failure to run.
func skillErr(err error) error {
	var ce *core.Error
	switch {
	case err == nil, errors.As(err, &ce):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return core.Errorf(core.ENOTFOUND, "no such file or folder")
	case errors.Is(err, fs.ErrPermission):
		return core.Errorf(core.EFORBIDDEN, "the operating system denies access")
	}
	return fmt.Errorf("read the skill's folder: %w", err)
}

// listSkill lists a folder, or describes a file, of the run's skill.
func listSkill(env *view, t *target) ([]listed, *listed, error) {
	if t.kind == kindSkills {
		return []listed{{name: env.Skill, dir: true, note: "the skill you follow, read-only"}}, nil, nil
	}
	fi, err := skillStat(env.skill, t.rel)
	if err != nil {
		return nil, nil, pathErr(t.path, err)
	}
	if !fi.IsDir() {
		// Describe only what read_file could read.
		f, size, err := openSkill(env.skill, t.rel)
		if err != nil {
			return nil, nil, pathErr(t.path, err)
		}
		f.Close()
		return nil, &listed{name: path.Base(t.rel), size: size}, nil
	}
	ents, err := fs.ReadDir(env.skill, fsName(t.rel))
	if err != nil {
		return nil, nil, pathErr(t.path, skillErr(err))
	}
	out := make([]listed, 0, len(ents))
	for _, e := range ents {
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			out = append(out, listed{name: e.Name(), size: -1, note: "a symbolic link: Kiln does not follow links in a skill's folder"})
		case e.IsDir():
			out = append(out, listed{name: e.Name(), dir: true})
		default:
			if fi, err := e.Info(); err == nil {
				out = append(out, fileEntry(e.Name(), fi))
			}
		}
	}
	return sorted(out), nil, nil
}

// skill walks the run's skill folder, or a part of it: symbolic links
// are skipped, never followed, and so are folders that cannot be read.
func (w *walker) skill(t *target, top bool) error {
	fsys := w.env.skill
	if _, err := skillStat(fsys, t.rel); err != nil {
		return skip(pathErr(t.path, err), top)
	}
	base := skillBase(w.env) + "/"
	root := fsName(t.rel)
	return fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if d == nil { // root itself, gone since skillStat
				return skip(pathErr(t.path, skillErr(err)), top)
			}
			return nil
		}
		if err := w.visit(); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil // a folder, walked into; a symbolic link or special file, skipped
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		return w.fn(found{path: base + p, size: fi.Size(), open: func() (io.ReadCloser, error) {
			f, _, err := openSkill(fsys, p)
			if err != nil {
				return nil, err
			}
			return f, nil
		}})
	})
}
