package files

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/grantfs"
)

// The mounts: the first segments of the view that are not virtual files.
const (
	mountGrants      = "grants"
	mountMemories    = "memories"
	mountAttachments = "attachments"
	mountSkills      = "skills"
)

// Memory files.
const (
	// MaxMemoryFile is the largest memory file write_file and edit_file
	// write, in bytes: core's rule.
	MaxMemoryFile = core.MaxMemorySize
	// MemoryOff is what the tools say of /memories/ while long-term
	// memory is off.
	MemoryOff = "long-term memory is off (Settings > Memory)"
)

// isMemoryName reports whether name is a valid memory file name (core's
// rule, which the memories API follows too).
func isMemoryName(name string) bool { return core.CheckMemoryName(name) == nil }

// hostRoot holds the names in the host's root folder ("etc", "home",
// ...), read once: a virtual path under one of them is refused, so that a
// model that asks for /etc/passwd is told file tools never go there.
var hostRoot = sync.OnceValue(func() map[string]bool {
	names := map[string]bool{}
	entries, _ := os.ReadDir("/")
	for _, e := range entries {
		names[e.Name()] = true
	}
	return names
})

// kind is what a view path names.
type kind int

const (
	kindRoot          kind = iota // "/"
	kindGrants                    // "/grants"
	kindGrant                     // "/grants/<name>[/<rel>]"
	kindMemories                  // "/memories"
	kindMemory                    // "/memories/<name>.md"
	kindAttachments               // "/attachments"
	kindAttachmentDir             // "/attachments/<id>"
	kindAttachment                // "/attachments/<id>/<name>"
	kindSkills                    // "/skills"
	kindSkill                     // "/skills/<name>[/<rel>]", <name> the run's skill
	kindVirtual                   // any other path: a virtual file or folder
)

// target is a view path resolved.
type target struct {
	// path is the clean absolute view path: "/", "/grants/docs/a.md",
	// "/notes/plan.md". For kindVirtual it is the VirtualFS path.
	path  string
	kind  kind
	grant *core.Grant // kindGrant
	// rel is, for kindGrant and kindSkill, the path inside the granted or
	// skill's folder ("" for the folder) and, for kindMemory, the file's
	// name.
	rel string
	att *core.Attachment // kindAttachmentDir, kindAttachment
}

// isDir reports whether t names a folder whatever exists: the root, a
// mount, a granted or skill's folder itself or an attachment's folder.
func (t *target) isDir() bool {
	switch t.kind {
	case kindRoot, kindGrants, kindMemories, kindAttachments, kindAttachmentDir, kindSkills:
		return true
	case kindGrant, kindSkill:
		return t.rel == ""
	}
	return false
}

// segments splits a view path into its segments, dropping empty and "."
// segments (a trailing /, "./src") but refusing "..": the view does not
// clean a path that climbs, since what it means depends on links the
// model cannot see.
func segments(p string) ([]string, error) {
	switch {
	case strings.ContainsRune(p, 0):
		return nil, core.Errorf(core.EINVALID, "%q: the path contains a NUL byte", p)
	case strings.ContainsRune(p, '\\'):
		return nil, core.Errorf(core.EINVALID, "%s: the path contains a backslash; separate segments with /", p)
	}
	var segs []string
	for s := range strings.SplitSeq(p, "/") {
		switch s {
		case "", ".":
		case "..":
			return nil, core.Errorf(core.EFORBIDDEN, `%s: paths may not contain ".."; give the path from / (or from the working folder) without it`, p)
		default:
			segs = append(segs, s)
		}
	}
	return segs, nil
}

// reserved reports whether a virtual path starting with the segment first
// is refused: a mount or a name in the host's root folder.
func reserved(first string) bool {
	switch first {
	case mountGrants, mountMemories, mountAttachments, mountSkills:
		return true
	}
	return hostRoot()[first]
}

// resolve resolves a path the model gave: absolute in the view, or
// relative to the run's working folder (/grants/<name>/) or, without one,
// to /. It fails with the reason, naming the path: an unknown grant or
// attachment (ENOTFOUND), memory while it is off, a host path, /skills/
// for a run that follows no skill and any skill's folder but its own
// (EFORBIDDEN), its own skill's folder when it is not to be had
// (EUNAVAIL), a malformed path (EINVALID).
func resolve(env *view, p string) (*target, error) {
	segs, err := segments(p)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(p, "/") && env.WorkingFolder != nil {
		segs = append([]string{mountGrants, env.WorkingFolder.Name}, segs...)
	}
	t := &target{path: "/" + strings.Join(segs, "/")}
	if len(segs) == 0 {
		t.kind = kindRoot
		return t, nil
	}
	switch segs[0] {
	case mountGrants:
		if len(segs) == 1 {
			t.kind = kindGrants
			return t, nil
		}
		t.kind, t.grant = kindGrant, findGrant(env, segs[1])
		if t.grant == nil {
			return nil, core.Errorf(core.ENOTFOUND, "%s: no folder is granted as %q; %s", t.path, segs[1], grantList(env))
		}
		t.rel = strings.Join(segs[2:], "/")
		if err := grantfs.CheckPath(t.rel); err != nil {
			return nil, pathErr(t.path, err)
		}
	case mountMemories:
		if !env.Memory {
			return nil, core.Errorf(core.EFORBIDDEN, "%s: %s", t.path, MemoryOff)
		}
		switch {
		case len(segs) == 1:
			t.kind = kindMemories
		case len(segs) > 2:
			return nil, core.Errorf(core.EINVALID, "%s: memory files are flat: /memories/<name>.md", t.path)
		case !isMemoryName(segs[1]):
			return nil, core.Errorf(core.EINVALID, "%s: a memory file's name is a letter or digit, then up to 99 letters, digits, '.', '_' or '-', ending in .md", t.path)
		default:
			t.kind, t.rel = kindMemory, segs[1]
		}
	case mountAttachments:
		if len(segs) == 1 {
			t.kind = kindAttachments
			return t, nil
		}
		for _, a := range env.Attachments {
			if a.ID == segs[1] {
				t.att = a
			}
		}
		if t.att == nil {
			return nil, core.Errorf(core.ENOTFOUND, "%s: the thread has no attachment %q; ls /attachments lists them", t.path, segs[1])
		}
		t.kind = kindAttachmentDir
		if len(segs) > 2 {
			if name := strings.Join(segs[2:], "/"); name != t.att.Name {
				return nil, core.Errorf(core.ENOTFOUND, "%s: attachment %s is %s", t.path, t.att.ID, core.AttachmentPath(t.att))
			}
			t.kind = kindAttachment
		}
	case mountSkills:
		switch {
		case env.Skill == "":
			return nil, core.Errorf(core.EFORBIDDEN, "%s: /skills/ holds a subagent's skill files; only a subagent that follows a skill sees its folder, and this run follows none", t.path)
		case env.skill == nil:
			return nil, core.Errorf(core.EUNAVAIL, "%s: the files of skill %q, which this run follows, cannot be read in this run", t.path, env.Skill)
		case len(segs) == 1:
			t.kind = kindSkills
		case segs[1] != env.Skill:
			return nil, core.Errorf(core.EFORBIDDEN, "%s: a subagent reads only its own skill's folder, /skills/%s/", t.path, env.Skill)
		default:
			t.kind, t.rel = kindSkill, strings.Join(segs[2:], "/")
		}
	default:
		if hostRoot()[segs[0]] {
			return nil, core.Errorf(core.EFORBIDDEN, "%s: the file tools never reach host paths outside /grants/<name>/ (/%s is not a granted folder); %s",
				t.path, segs[0], grantList(env))
		}
		t.kind = kindVirtual
	}
	return t, nil
}

// findGrant returns the run's grant named name, or nil.
func findGrant(env *view, name string) *core.Grant {
	for _, g := range env.Grants {
		if g.Name == name {
			return g
		}
	}
	return nil
}

// grantList says which folders are granted, for messages.
func grantList(env *view) string {
	if len(env.Grants) == 0 {
		return "no folder is granted to this run (the user grants folders in Kiln)"
	}
	var names []string
	for _, g := range env.Grants {
		names = append(names, "/grants/"+g.Name+"/")
	}
	slices.Sort(names)
	return "the granted folders are " + strings.Join(names, ", ")
}

// pathErr returns err's message prefixed with the view path p, as a
// *core.Error of the same code; an error that is not a *core.Error (a
// failure to run, not the tool's own) is returned as it is.
func pathErr(p string, err error) error {
	var ce *core.Error
	if !errors.As(err, &ce) {
		return err
	}
	return &core.Error{Code: ce.Code, Message: p + ": " + ce.Message}
}

// openGrant opens the granted folder t names.
func openGrant(t *target) (*grantfs.Dir, error) {
	d, err := grantfs.Open(t.grant)
	if err != nil {
		return nil, pathErr(t.path, err)
	}
	return d, nil
}

// openMemory opens the memory folder as a writable grant, creating it
// first when create is set. Without create, a missing folder is
// ENOTFOUND.
func openMemory(env *view, create bool) (*grantfs.Dir, error) {
	if env.MemoryDir == "" {
		return nil, core.Errorf(core.EUNAVAIL, "/memories: this run has no memory folder")
	}
	if create {
		if err := os.MkdirAll(env.MemoryDir, 0o700); err != nil {
			return nil, fmt.Errorf("create the memory folder: %w", err)
		}
	}
	dir, err := filepath.EvalSymlinks(env.MemoryDir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, core.Errorf(core.ENOTFOUND, "/memories: no memory files yet")
		}
		return nil, fmt.Errorf("resolve the memory folder: %w", err)
	}
	d, err := grantfs.Open(&core.Grant{Name: mountMemories, Path: dir, Writable: true})
	if err != nil {
		return nil, pathErr("/memories", err)
	}
	return d, nil
}
