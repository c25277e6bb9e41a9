package skills

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kilnhq/kiln/core"
)

// MaxSkillFile is the largest SKILL.md the catalog writes, in bytes.
const MaxSkillFile = 256 << 10

// Check parses src as the SKILL.md of the skill name without storing it:
// what an editor shows as the user types.
func Check(name string, src []byte) (*Skill, []Warning, error) {
	if len(src) > MaxSkillFile {
		return nil, nil, &ParseError{File: File, Reason: fmt.Sprintf("SKILL.md is %d bytes; the limit is %d", len(src), MaxSkillFile)}
	}
	return Parse(name, src)
}

// WriteCustom creates or replaces the custom skill name with src, which
// must parse (a *ParseError otherwise, and nothing is written). The file
// is written whole and renamed into place, so a watcher never reads half
// of it. It returns whether the custom skill existed before.
func (c *Catalog) WriteCustom(name string, src []byte) (existed bool, err error) {
	if c.dir == "" {
		return false, core.Errorf(core.EUNAVAIL, "this catalog has no custom skills folder")
	}
	if !ValidName(name) {
		return false, core.Errorf(core.EINVALID, "skill name %q: 1 to 64 characters of a-z, 0-9 and single hyphens, not at either end", name)
	}
	if _, _, err := Check(name, src); err != nil {
		return false, err
	}
	dir := filepath.Join(c.dir, name)
	_, statErr := os.Stat(filepath.Join(dir, File))
	existed = statErr == nil
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(dir, ".SKILL.md-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(src); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, File)); err != nil {
		return false, err
	}
	// Parse it again whatever its size and time say.
	c.mu.Lock()
	delete(c.custom, name)
	c.mu.Unlock()
	return existed, c.Reload()
}

// DeleteCustom removes the custom skill name, its folder and everything
// in it, revealing a plugin's or a built-in skill of the same name.
// ENOTFOUND when there is no custom skill of that name.
func (c *Catalog) DeleteCustom(name string) error {
	if c.dir == "" || !ValidName(name) {
		return core.Errorf(core.ENOTFOUND, "no custom skill %q", name)
	}
	dir := filepath.Join(c.dir, name)
	if fi, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) || err == nil && !fi.IsDir() {
		return core.Errorf(core.ENOTFOUND, "no custom skill %q (only custom skills, in the data root's skills folder, can be deleted)", name)
	} else if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return c.Reload()
}
