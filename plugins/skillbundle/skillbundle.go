// Package skillbundle is the "skills" extension kind: SKILL.md skills a
// plugin ships, usually as a data-only bundle. A bundle's skills are the
// folders skills/<name>/ of its folder that hold a SKILL.md; the name is
// the folder's (1 to 64 characters of a-z, 0-9 and single hyphens, not at
// either end, as the Agent Skills specification has it). Attach lists
// them and hands them, with the bundle's files, to the server's skills
// host; a bundle that provides "skills" without any is refused with the
// reason. skillbundletest is the kind's conformance kit.
package skillbundle

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/skills"
)

// Source is the client of the "skills" kind: a folder of files.
// plugins.Bundle satisfies it.
type Source interface {
	FS() fs.FS
}

// Host takes the skills of a plugin while it is enabled. The skills
// package implements it; a server without one lists a plugin's skills
// (Info.Provided) without using them.
type Host interface {
	// AddSkills makes the named skills, read from fsys, available under
	// source (the plugin's ID).
	AddSkills(source string, fsys fs.FS, names []string) error
	// RemoveSkills withdraws them.
	RemoveSkills(source string)
}

// Name is the kind's name, as manifests list it in "provides".
const Name plugins.Capability = "skills"

func init() { plugins.RegisterKind(Kind{}) }

// Kind is the "skills" kind.
type Kind struct{}

// Name is "skills".
func (Kind) Name() plugins.Capability { return Name }

// IsData is true: a folder of skills is data, which a data-only bundle provides.
func (Kind) IsData() bool { return true }

// Validate checks the source's skills at install.
func (Kind) Validate(_ context.Context, a plugins.Attach) error {
	src, ok := a.Client.(Source)
	if !ok {
		return fmt.Errorf("the runtime handed out %T for %q, not a folder of skills", a.Client, Name)
	}
	_, err := List(src.FS())
	return err
}

// Attach lists the source's skills and adds them to the host.
func (Kind) Attach(_ context.Context, a plugins.Attach) (plugins.Attached, error) {
	src, ok := a.Client.(Source)
	if !ok {
		return plugins.Attached{}, fmt.Errorf("the runtime handed out %T for %q, not a folder of skills", a.Client, Name)
	}
	names, err := List(src.FS())
	if err != nil {
		return plugins.Attached{}, err
	}
	host, ok := a.Host.(Host)
	if !ok {
		return plugins.Attached{Items: names}, nil
	}
	if err := host.AddSkills(a.ID, src.FS(), names); err != nil {
		return plugins.Attached{}, err
	}
	return plugins.Attached{Items: names, Detach: func() { host.RemoveSkills(a.ID) }}, nil
}

// List returns the names of the skills in fsys, sorted: each folder
// skills/<name>/ with a SKILL.md. A folder with a bad name or without a
// SKILL.md, and a bundle with no skills at all, are errors naming the
// path.
func List(fsys fs.FS) ([]string, error) {
	ents, err := fs.ReadDir(fsys, skills.BundleDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("provides skills but has no %s/ folder (want %s/<name>/%s)", skills.BundleDir, skills.BundleDir, skills.File)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s/: %w", skills.BundleDir, err)
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		if !skills.ValidName(name) {
			return nil, fmt.Errorf("%s/%s: a skill's folder is its name: 1 to 64 characters of a-z, 0-9 and single hyphens, not at either end", skills.BundleDir, name)
		}
		fi, err := fs.Stat(fsys, skills.BundleDir+"/"+name+"/"+skills.File)
		if err != nil || !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s/%s has no %s", skills.BundleDir, name, skills.File)
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("provides skills but %s/ holds none (want %s/<name>/%s)", skills.BundleDir, skills.BundleDir, skills.File)
	}
	slices.Sort(names)
	return names, nil
}

// Interface guards.
var (
	_ plugins.DataKind  = Kind{}
	_ plugins.Validator = Kind{}
	_ Host              = (*skills.Catalog)(nil)
)
