package files

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/core"
)

// MaxWalk is the most files and folders one glob or grep call visits.
const MaxWalk = 100_000

// errWalkLimit ends a walk that visited MaxWalk entries.
var errWalkLimit = errors.New("walk limit reached")

// found is a file a walk found.
type found struct {
	path string // its view path
	size int64
	// open reads it, with the refusals of openFile (a grant's file
	// through grantfs). It is valid during the walk's callback only.
	open func() (io.ReadCloser, error)
}

// walker walks the view.
type walker struct {
	ctx     context.Context
	env     *view
	fn      func(found) error
	visited int
}

// walk calls fn for every file under t (t itself when it names a file):
// for / and /grants, each granted folder (in name order), the
// attachments, the memory files when memory is on, the skill's folder
// for a subagent that follows one, and the virtual files. Inside a grant it follows
// grantfs's walk: symlinks are never descended into, a symlink to a file
// inside the folder counts as that file, and what cannot be read is
// skipped, as is a granted folder under / or /grants that cannot be
// opened. In the skill's folder every symlink is skipped. It returns fn's error, ctx's, ENOTFOUND when t
// names nothing, or errWalkLimit after MaxWalk entries.
func walk(ctx context.Context, env *view, t *target, fn func(found) error) error {
	w := &walker{ctx: ctx, env: env, fn: fn}
	return w.target(t, true)
}

// visit counts an entry and says whether the walk must stop.
func (w *walker) visit() error {
	w.visited++
	if w.visited > MaxWalk {
		return errWalkLimit
	}
	if w.visited%64 == 0 {
		return w.ctx.Err()
	}
	return nil
}

// target walks t; top says whether t is what the call named, whose
// failure is the call's, or a part of it that is skipped when it fails.
func (w *walker) target(t *target, top bool) error {
	env := w.env
	var parts []*target
	switch t.kind {
	case kindRoot:
		parts = append(grantTargets(env), &target{path: "/" + mountAttachments, kind: kindAttachments})
		if env.Memory {
			parts = append(parts, &target{path: "/" + mountMemories, kind: kindMemories})
		}
		if env.skill != nil {
			parts = append(parts, &target{path: skillBase(env), kind: kindSkill})
		}
	case kindGrants:
		parts = grantTargets(env)
	case kindGrant:
		return w.grant(t, top)
	case kindSkills:
		return w.skill(&target{path: skillBase(env), kind: kindSkill}, top)
	case kindSkill:
		return w.skill(t, top)
	case kindMemories, kindMemory:
		return w.memories(t, top)
	case kindAttachments, kindAttachmentDir, kindAttachment:
		for _, a := range env.Attachments {
			if t.att != nil && a != t.att {
				continue
			}
			if err := w.visit(); err != nil {
				return err
			}
			if err := w.fn(found{path: core.AttachmentPath(a), size: a.Size, open: func() (io.ReadCloser, error) {
				return openAttachment(env, a)
			}}); err != nil {
				return err
			}
		}
		return nil
	}
	for _, p := range parts {
		if err := w.target(p, false); err != nil {
			return err
		}
	}
	if t.kind == kindGrants {
		return nil
	}
	return w.virtual(t, top) // all of them for /
}

// grantTargets returns the run's granted folders, in name order.
func grantTargets(env *view) []*target {
	var ts []*target
	for _, g := range env.Grants {
		ts = append(ts, &target{path: "/" + mountGrants + "/" + g.Name, kind: kindGrant, grant: g})
	}
	slices.SortFunc(ts, func(a, b *target) int { return strings.Compare(a.path, b.path) })
	return ts
}

// grant walks a granted folder, or a part of it.
func (w *walker) grant(t *target, top bool) error {
	d, err := openGrant(t)
	if err != nil {
		return skip(err, top)
	}
	defer d.Close()
	base := "/" + mountGrants + "/" + t.grant.Name + "/"
	err = d.Walk(t.rel, func(rel string, e fs.DirEntry) error {
		if err := w.visit(); err != nil {
			return err
		}
		var size int64
		switch {
		case e.IsDir():
			return nil
		case e.Type()&fs.ModeSymlink != 0:
			fi, err := d.Stat(rel)
			if err != nil || !fi.Mode().IsRegular() {
				return nil // leads out, or to a folder (not descended into)
			}
			size = fi.Size()
		case !e.Type().IsRegular():
			return nil
		default:
			fi, err := e.Info()
			if err != nil {
				return nil
			}
			size = fi.Size()
		}
		return w.fn(found{path: base + rel, size: size, open: func() (io.ReadCloser, error) {
			f, err := d.Open(rel)
			if err != nil {
				return nil, err
			}
			return f, nil
		}})
	})
	if err != nil {
		return skip(pathErr(t.path, err), top)
	}
	return nil
}

// memories walks the memory files, or one of them.
func (w *walker) memories(t *target, top bool) error {
	d, err := openMemory(w.env, false)
	if core.IsNotFound(err) && t.kind == kindMemories {
		return nil
	}
	if err != nil {
		return skip(err, top)
	}
	defer d.Close()
	ents, err := d.ReadDir("")
	if err != nil {
		return skip(pathErr(t.path, err), top)
	}
	for _, e := range ents {
		name := e.Name()
		if t.kind == kindMemory && name != t.rel || !isMemoryName(name) || !e.Type().IsRegular() {
			continue
		}
		if err := w.visit(); err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		if err := w.fn(found{path: "/" + mountMemories + "/" + name, size: fi.Size(), open: func() (io.ReadCloser, error) {
			f, err := d.Open(name)
			if err != nil {
				return nil, err
			}
			return f, nil
		}}); err != nil {
			return err
		}
		if t.kind == kindMemory {
			return nil
		}
	}
	if t.kind == kindMemory && top {
		return core.Errorf(core.ENOTFOUND, "%s: no such memory file", t.path)
	}
	return nil
}

// virtual walks the virtual files under t (all of them for /).
func (w *walker) virtual(t *target, top bool) error {
	files, err := listVirtual(w.env)
	if err != nil {
		return err
	}
	prefix := strings.TrimSuffix(t.path, "/") + "/"
	seen := false
	for _, f := range files {
		if f.Path != t.path && !strings.HasPrefix(f.Path, prefix) {
			continue
		}
		seen = true
		if err := w.visit(); err != nil {
			return err
		}
		vpath := f.Path
		if err := w.fn(found{path: vpath, size: int64(f.Size), open: func() (io.ReadCloser, error) {
			vf, err := w.env.Files.Read(vpath)
			if err != nil {
				return nil, err
			}
			return io.NopCloser(bytes.NewReader(vf.Data)), nil
		}}); err != nil {
			return err
		}
	}
	if !seen && top && t.kind == kindVirtual {
		return core.Errorf(core.ENOTFOUND, "%s: no such file or folder", t.path)
	}
	return nil
}

// skip returns err when top (the call named what failed) or when it is
// not the tool's own failure, and nil for a part that is skipped.
func skip(err error, top bool) error {
	var ce *core.Error
	if top || !errors.As(err, &ce) {
		return err
	}
	return nil
}

// relTo returns p relative to the folder base (a view path), or p's last
// segment when p is base itself (a walk of one file).
func relTo(base, p string) string {
	if p == base {
		return path.Base(p)
	}
	return strings.TrimPrefix(p, strings.TrimSuffix(base, "/")+"/")
}
