package skills

import (
	"archive/zip"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/kilnhq/kiln/core"
)

// Import limits.
const (
	MaxImportBytes = 50 << 20 // uncompressed bytes of all files
	MaxImportFiles = 1000
)

// ImportZip adds a custom skill from a zip archive: SKILL.md at its root,
// or inside one top-level folder (which must then be named as the skill),
// with the files beside it (scripts/, references/, assets/ ...). Every
// entry must be a regular file or a folder with a clean relative path (no
// "..", absolute paths, backslashes or links); the archive may hold at
// most MaxImportFiles files and MaxImportBytes bytes once unpacked. The
// SKILL.md must parse. The skill is unpacked beside the others and
// renamed into place, so nothing is left when any check fails. An
// existing custom skill of the name is ECONFLICT unless replace. It
// returns the skill's name.
func (c *Catalog) ImportZip(r io.ReaderAt, size int64, replace bool) (string, error) {
	if c.dir == "" {
		return "", core.Errorf(core.EUNAVAIL, "this catalog has no custom skills folder")
	}
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return "", core.Errorf(core.EINVALID, "not a zip archive: %v", err)
	}
	files, prefix, err := zipEntries(zr)
	if err != nil {
		return "", err
	}
	md, ok := files[prefix+File]
	if !ok {
		return "", core.Errorf(core.EINVALID, "the archive has no %s at its root or in one top-level folder", File)
	}
	src, err := readEntry(md, MaxSkillFile)
	if err != nil {
		return "", err
	}
	name := strings.TrimSuffix(prefix, "/")
	sk, _, err := Parse(name, src)
	if err != nil {
		return "", err
	}
	name = sk.Name
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(c.dir, ".import-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	// The headers' sizes were checked; what the entries really unpack to
	// is counted too, as a header may lie.
	left := int64(MaxImportBytes)
	for p, f := range files {
		rel, ok := strings.CutPrefix(p, prefix)
		if !ok || rel == "" {
			continue
		}
		dst := filepath.Join(tmp, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return "", err
		}
		data, err := readEntry(f, left)
		if err != nil {
			return "", err
		}
		left -= int64(len(data))
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			return "", err
		}
	}
	dst := filepath.Join(c.dir, name)
	if _, err := os.Lstat(dst); err == nil {
		if !replace {
			return "", core.Errorf(core.ECONFLICT, "a custom skill %q exists; import it with replace to overwrite it", name)
		}
		if err := os.RemoveAll(dst); err != nil {
			return "", err
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", err
	}
	c.mu.Lock()
	delete(c.custom, name)
	c.mu.Unlock()
	return name, c.Reload()
}

// zipEntries checks the archive's entries and returns its files by path
// and the folder SKILL.md sits in ("" or "<name>/").
func zipEntries(zr *zip.Reader) (map[string]*zip.File, string, error) {
	files := map[string]*zip.File{}
	var total uint64
	tops := map[string]bool{}
	for _, f := range zr.File {
		p := strings.TrimSuffix(f.Name, "/")
		if err := checkEntry(f.Name, p); err != nil {
			return nil, "", err
		}
		mode := f.Mode()
		switch {
		case mode.IsDir():
			continue
		case !mode.IsRegular():
			return nil, "", core.Errorf(core.EINVALID, "%s: only files and folders are imported, not %s", p, mode.Type())
		}
		if len(files) == MaxImportFiles {
			return nil, "", core.Errorf(core.EINVALID, "the archive holds more than %d files", MaxImportFiles)
		}
		if total += f.UncompressedSize64; total > MaxImportBytes {
			return nil, "", core.Errorf(core.EINVALID, "the archive unpacks to more than %s", core.FormatBytes(MaxImportBytes))
		}
		if _, dup := files[p]; dup {
			return nil, "", core.Errorf(core.EINVALID, "%s is in the archive twice", p)
		}
		files[p] = f
		top, _, _ := strings.Cut(p, "/")
		tops[top] = true
	}
	if _, ok := files[File]; ok {
		return files, "", nil
	}
	if len(tops) == 1 {
		for top := range tops {
			return files, top + "/", nil
		}
	}
	return files, "", nil
}

// checkEntry refuses an entry path that could land outside the skill.
func checkEntry(raw, p string) error {
	switch {
	case p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00") || filepath.VolumeName(p) != "":
		return core.Errorf(core.EINVALID, "%q: entry paths are relative, with forward slashes", raw)
	case path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../"):
		return core.Errorf(core.EINVALID, "%q: entry paths are clean (no '.', '..' or empty segments)", raw)
	}
	return nil
}

// readEntry reads one file of the archive, at most limit bytes whatever
// its header claims.
func readEntry(f *zip.File, limit int64) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, core.Errorf(core.EINVALID, "%s: %v", f.Name, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, limit+1))
	switch {
	case err != nil:
		return nil, core.Errorf(core.EINVALID, "%s: %v", f.Name, err)
	case int64(len(data)) > limit:
		return nil, core.Errorf(core.EINVALID, "%s is over %s", f.Name, core.FormatBytes(limit))
	}
	return data, nil
}
