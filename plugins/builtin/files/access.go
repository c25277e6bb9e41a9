package files

import (
	"bytes"
	"io"
	"strings"

	"github.com/kilnhq/kiln/core"
)

// MaxTextFile is the largest file, in bytes, that edit_file edits and
// grep searches. read_file reads files of any size, by lines.
const MaxTextFile = 4 << 20

// opened is a file of the view open for reading.
type opened struct {
	io.ReadCloser
	size int64
	mime string // the attachment's media type, or ""
}

// openFile opens the file t names for reading: EINVALID when t is a
// folder, ENOTFOUND when there is none, grantfs's refusals for grant and
// memory files, and for the skill's folder those of openSkill.
func openFile(env *view, t *target) (*opened, error) {
	if t.isDir() {
		return nil, core.Errorf(core.EINVALID, "%s is a folder; list it with ls", t.path)
	}
	switch t.kind {
	case kindGrant:
		d, err := openGrant(t)
		if err != nil {
			return nil, err
		}
		defer d.Close() // the open file outlives its os.Root
		if fi, err := d.Stat(t.rel); err == nil && fi.IsDir() {
			return nil, core.Errorf(core.EINVALID, "%s is a folder; list it with ls", t.path)
		}
		f, err := d.Open(t.rel)
		if err != nil {
			return nil, pathErr(t.path, err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		return &opened{ReadCloser: f, size: fi.Size()}, nil
	case kindMemory:
		d, err := openMemory(env, false)
		if core.IsNotFound(err) {
			return nil, core.Errorf(core.ENOTFOUND, "%s: no such memory file", t.path)
		} else if err != nil {
			return nil, err
		}
		defer d.Close()
		f, err := d.Open(t.rel)
		if core.IsNotFound(err) {
			return nil, core.Errorf(core.ENOTFOUND, "%s: no such memory file", t.path)
		} else if err != nil {
			return nil, pathErr(t.path, err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		return &opened{ReadCloser: f, size: fi.Size()}, nil
	case kindSkill:
		if fi, err := skillStat(env.skill, t.rel); err == nil && fi.IsDir() {
			return nil, core.Errorf(core.EINVALID, "%s is a folder; list it with ls", t.path)
		}
		f, size, err := openSkill(env.skill, t.rel)
		if err != nil {
			return nil, pathErr(t.path, err)
		}
		return &opened{ReadCloser: f, size: size}, nil
	case kindAttachment:
		rc, err := openAttachment(env, t.att)
		if err != nil {
			return nil, err
		}
		return &opened{ReadCloser: rc, size: t.att.Size, mime: t.att.MIME}, nil
	}
	if env.Files == nil {
		return nil, core.Errorf(core.ENOTFOUND, "%s: no such file", t.path)
	}
	f, err := env.Files.Read(t.path)
	if core.IsNotFound(err) {
		files, lerr := listVirtual(env)
		if lerr != nil {
			return nil, lerr
		}
		if virtualDir(files, t.path) {
			return nil, core.Errorf(core.EINVALID, "%s is a folder; list it with ls", t.path)
		}
		return nil, core.Errorf(core.ENOTFOUND, "%s: no such file", t.path)
	} else if err != nil {
		return nil, pathErr(t.path, err)
	}
	return &opened{ReadCloser: io.NopCloser(bytes.NewReader(f.Data)), size: int64(len(f.Data))}, nil
}

// openAttachment opens an attachment's bytes.
func openAttachment(env *view, a *core.Attachment) (io.ReadCloser, error) {
	if env.OpenAttachment == nil {
		return nil, core.Errorf(core.EUNAVAIL, "%s: attachments cannot be read in this run", core.AttachmentPath(a))
	}
	return env.OpenAttachment(a)
}

// readAll returns the content of the file t names, ELIMIT when it is
// over limit bytes.
func readAll(env *view, t *target, limit int64) ([]byte, error) {
	f, err := openFile(env, t)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if f.size > limit {
		return nil, core.Errorf(core.ELIMIT, "%s is %d bytes, over the limit of %d", t.path, f.size, limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, pathErr(t.path, err)
	}
	if int64(len(b)) > limit {
		return nil, core.Errorf(core.ELIMIT, "%s is over the limit of %d bytes", t.path, limit)
	}
	return b, nil
}

// readOnly returns the refusal of a write to t when t is under a
// read-only mount (the attachments, the skill's folder), else nil.
func readOnly(t *target) error {
	switch t.kind {
	case kindAttachments, kindAttachmentDir, kindAttachment:
		return core.Errorf(core.EFORBIDDEN, "%s: attachments are read-only; write a copy elsewhere", t.path)
	case kindSkills, kindSkill:
		return core.Errorf(core.EFORBIDDEN, "%s: a skill's files are read-only; write a copy elsewhere", t.path)
	}
	return nil
}

// writeFile creates or replaces the file t names with data: a grant's
// file through grantfs (refused unless the grant is writable), a memory
// file (at most MaxMemoryFile bytes), or a virtual file. Attachments and
// the skill's folder are read-only (readOnly) and folders are not files.
func writeFile(env *view, t *target, data []byte) error {
	if err := readOnly(t); err != nil {
		return err
	}
	switch {
	case t.isDir():
		return core.Errorf(core.EINVALID, "%s is a folder, not a file", t.path)
	}
	switch t.kind {
	case kindGrant:
		d, err := openGrant(t)
		if err != nil {
			return err
		}
		defer d.Close()
		return pathErr(t.path, d.WriteFile(t.rel, data, 0o644))
	case kindMemory:
		if len(data) > MaxMemoryFile {
			return core.Errorf(core.ELIMIT, "%s: a memory file holds at most %d KiB; this is %d bytes", t.path, MaxMemoryFile>>10, len(data))
		}
		d, err := openMemory(env, true)
		if err != nil {
			return err
		}
		defer d.Close()
		return pathErr(t.path, d.WriteFile(t.rel, data, 0o600))
	}
	if env.Files == nil {
		return core.Errorf(core.EUNAVAIL, "%s: this run has no virtual files", t.path)
	}
	files, err := listVirtual(env)
	if err != nil {
		return err
	}
	for _, f := range files {
		switch {
		case strings.HasPrefix(f.Path, t.path+"/"):
			return core.Errorf(core.EINVALID, "%s is a folder, not a file", t.path)
		case strings.HasPrefix(t.path, f.Path+"/"):
			return core.Errorf(core.EINVALID, "%s: %s is a file, not a folder", t.path, f.Path)
		}
	}
	return pathErr(t.path, env.Files.Write(t.path, data))
}

// listVirtual returns the thread's virtual files, without their data.
func listVirtual(env *view) ([]*core.File, error) {
	if env.Files == nil {
		return nil, nil
	}
	files, err := env.Files.List()
	if err != nil {
		return nil, pathErr("listing the virtual files", err)
	}
	return files, nil
}

// virtualDir reports whether a virtual file lies under the folder p.
func virtualDir(files []*core.File, p string) bool {
	prefix := strings.TrimSuffix(p, "/") + "/"
	for _, f := range files {
		if strings.HasPrefix(f.Path, prefix) {
			return true
		}
	}
	return false
}
