package files

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/grantfs"
)

// MaxListEntries is the most entries ls shows.
const MaxListEntries = 1000

var lsSpec = core.ToolSpec{
	Name: "ls",
	Description: "Lists a folder: one entry per line, folders with a trailing /, files with their size. " +
		"`ls /` shows the mounts that exist (grants/, memories/ when memory is on, attachments/ when the thread has any, skills/ for a subagent that follows a skill) " +
		"and the thread's own files and folders; `ls /grants` shows each granted folder and whether it is writable. " +
		"Without a path it lists the working folder, or / when the run has none. Given a file, it shows that file's size. " +
		fmt.Sprintf("At most %d entries are shown. ", MaxListEntries) + viewHelp,
	Schema: json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"The folder to list, e.g. / or /grants/docs/src. Default: the working folder, or /."}},` +
		`"additionalProperties":false}`),
	Idempotent: true,
}

// listed is one entry ls shows.
type listed struct {
	name string
	dir  bool
	size int64  // -1 when not shown
	note string // shown in parentheses after the size
}

// line shows the entry under name.
func (e listed) line(name string) string {
	if e.dir {
		if e.note != "" {
			return name + "/  (" + e.note + ")"
		}
		return name + "/"
	}
	var about []string
	if e.size >= 0 {
		about = append(about, sizeText(e.size))
	}
	if e.note != "" {
		about = append(about, e.note)
	}
	return name + "  (" + strings.Join(about, ", ") + ")"
}

func runLs(ctx context.Context, env *view, args json.RawMessage) (string, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := decode("ls", args, &a); err != nil {
		return "", err
	}
	t, err := resolve(env, a.Path)
	if err != nil {
		return "", err
	}
	entries, file, err := list(env, t)
	if err != nil {
		return "", err
	}
	if file != nil {
		return file.line(t.path), nil
	}
	dir := strings.TrimSuffix(t.path, "/") + "/"
	if len(entries) == 0 {
		return dir + " is empty", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d entries):\n", dir, len(entries))
	for i, e := range entries {
		if i == MaxListEntries {
			fmt.Fprintf(&b, "[… %d more entries not shown; list a subfolder or use glob]\n", len(entries)-i)
			break
		}
		b.WriteString(e.line(e.name) + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// list returns the entries of the folder t names, sorted by name, or,
// when t names a file, that file's entry.
func list(env *view, t *target) ([]listed, *listed, error) {
	switch t.kind {
	case kindRoot:
		var out []listed
		if len(env.Grants) > 0 {
			var names []string
			for _, g := range env.Grants {
				names = append(names, g.Name)
			}
			slices.Sort(names)
			out = append(out, listed{name: mountGrants, dir: true, note: "the folders the user granted: " + strings.Join(names, ", ")})
		}
		if env.Memory {
			out = append(out, listed{name: mountMemories, dir: true, note: "long-term memory files"})
		}
		if len(env.Attachments) > 0 {
			out = append(out, listed{name: mountAttachments, dir: true, note: fmt.Sprintf("%d attachments, read-only", len(env.Attachments))})
		}
		if env.skill != nil {
			out = append(out, listed{name: mountSkills, dir: true, note: "your skill's files, read-only: " + env.Skill})
		}
		files, err := listVirtual(env)
		if err != nil {
			return nil, nil, err
		}
		return append(out, virtualEntries(files, "/")...), nil, nil
	case kindGrants:
		var out []listed
		for _, g := range env.Grants {
			note := "read-only"
			if g.Writable {
				note = "writable"
			}
			if env.WorkingFolder != nil && env.WorkingFolder.Name == g.Name {
				note += ", the working folder"
			}
			out = append(out, listed{name: g.Name, dir: true, note: note})
		}
		return sorted(out), nil, nil
	case kindGrant:
		return listGrant(t)
	case kindSkills, kindSkill:
		return listSkill(env, t)
	case kindMemories:
		d, err := openMemory(env, false)
		if core.IsNotFound(err) {
			return nil, nil, nil
		} else if err != nil {
			return nil, nil, err
		}
		defer d.Close()
		ents, err := d.ReadDir("")
		if err != nil {
			return nil, nil, pathErr(t.path, err)
		}
		var out []listed
		for _, e := range ents {
			if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && isMemoryName(e.Name()) {
				out = append(out, listed{name: e.Name(), size: fi.Size()})
			}
		}
		return out, nil, nil
	case kindAttachments:
		var out []listed
		for _, a := range env.Attachments {
			out = append(out, listed{name: a.ID, dir: true, note: fmt.Sprintf("%s, %s, %s", a.Name, a.MIME, sizeText(a.Size))})
		}
		return sorted(out), nil, nil
	case kindAttachmentDir:
		return []listed{{name: t.att.Name, size: t.att.Size, note: t.att.MIME}}, nil, nil
	case kindAttachment:
		return nil, &listed{name: t.att.Name, size: t.att.Size, note: t.att.MIME}, nil
	case kindMemory:
		f, err := openFile(env, t)
		if err != nil {
			return nil, nil, err
		}
		f.Close()
		return nil, &listed{name: t.rel, size: f.size}, nil
	}
	files, err := listVirtual(env)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range files {
		if f.Path == t.path {
			return nil, &listed{name: path.Base(f.Path), size: int64(f.Size)}, nil
		}
	}
	if !virtualDir(files, t.path) {
		return nil, nil, core.Errorf(core.ENOTFOUND, "%s: no such file or folder", t.path)
	}
	return virtualEntries(files, t.path), nil, nil
}

// listGrant lists a folder, or describes a file, inside a grant.
func listGrant(t *target) ([]listed, *listed, error) {
	d, err := openGrant(t)
	if err != nil {
		return nil, nil, err
	}
	defer d.Close()
	fi, err := d.Stat(t.rel)
	if err != nil {
		return nil, nil, pathErr(t.path, err)
	}
	if !fi.IsDir() {
		// Describe only what read_file could read.
		f, err := d.Open(t.rel)
		if err != nil {
			return nil, nil, pathErr(t.path, err)
		}
		f.Close()
		return nil, &listed{name: fi.Name(), size: fi.Size()}, nil
	}
	ents, err := d.ReadDir(t.rel)
	if err != nil {
		return nil, nil, pathErr(t.path, err)
	}
	out := make([]listed, 0, len(ents))
	for _, e := range ents {
		l := listed{name: e.Name()}
		rel := path.Join(t.rel, e.Name())
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			fi, err := d.Stat(rel)
			if err != nil {
				l.size, l.note = -1, "a symbolic link that cannot be followed: "+core.ErrorMessage(err)
				break
			}
			l.dir, l.size, l.note = fi.IsDir(), fi.Size(), "a symbolic link"
		case e.IsDir():
			l.dir = true
		default:
			fi, err := e.Info()
			if err != nil {
				continue // gone since the listing
			}
			l = fileEntry(e.Name(), fi)
		}
		out = append(out, l)
	}
	return out, nil, nil
}

// fileEntry is the entry of a file that is not a folder nor a symbolic
// link, noting what keeps read_file from it.
func fileEntry(name string, fi fs.FileInfo) listed {
	switch n := grantfs.HardLinks(fi); {
	case !fi.Mode().IsRegular():
		return listed{name: name, size: fi.Size(), note: "not a regular file"}
	case n > 1:
		return listed{name: name, size: -1, note: fmt.Sprintf("%d hard links: Kiln refuses files linked from elsewhere", n)}
	}
	return listed{name: name, size: fi.Size()}
}

// virtualEntries returns the entries of the virtual folder dir: its files
// and the folders their paths imply.
func virtualEntries(files []*core.File, dir string) []listed {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var out []listed
	seen := map[string]bool{}
	for _, f := range files {
		rest, ok := strings.CutPrefix(f.Path, prefix)
		if !ok {
			continue
		}
		name, _, sub := strings.Cut(rest, "/")
		if seen[name] {
			continue
		}
		seen[name] = true
		if sub {
			out = append(out, listed{name: name, dir: true})
		} else {
			out = append(out, listed{name: name, size: int64(f.Size)})
		}
	}
	return sorted(out)
}

func sorted(ls []listed) []listed {
	slices.SortFunc(ls, func(a, b listed) int { return strings.Compare(a.name, b.name) })
	return ls
}
