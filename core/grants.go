package core

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// GrantInput grants a folder. Path is resolved to its real path (absolute,
// symlinks followed) and must be a directory. Name is the mount name under
// /grants/; "" derives one from the folder's base name. AcknowledgeDataRoot
// must be set to grant Kiln's data root, a folder inside it or one that
// contains it.
type GrantInput struct {
	Path                string `json:"path"`
	Name                string `json:"name,omitempty"`
	Writable            bool   `json:"writable"`
	AcknowledgeDataRoot bool   `json:"acknowledge_data_root,omitempty"`
}

var reGrantName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ListGrants lists p's folder grants by name.
func (s *Service) ListGrants(ctx context.Context, p Principal) ([]*Grant, error) {
	var gs []*Grant
	err := s.view(ctx, func(tx ReadTx) (err error) {
		gs, err = tx.Grants(p.ID)
		return err
	})
	if gs == nil {
		gs = []*Grant{}
	}
	return gs, err
}

// AddGrant grants p a folder. EINVALID for a path that is not an existing
// directory or a bad name; ECONFLICT for a name in use, a folder granted
// already, an overlap with another grant other than a read-only folder
// holding a writable one (a writable folder over a read-only one would
// undo the read-only grant), or the data root without acknowledgement.
func (s *Service) AddGrant(ctx context.Context, p Principal, in GrantInput) (*Grant, error) {
	if err := CheckText("path", in.Path, false); err != nil {
		return nil, err
	}
	if strings.TrimSpace(in.Path) == "" {
		return nil, Errorf(EINVALID, "path must not be empty")
	}
	real, err := realDir(in.Path)
	if err != nil {
		return nil, err
	}
	dataRoot := false
	if s.cfg.DataRoot != "" {
		if root, err := filepath.EvalSymlinks(s.cfg.DataRoot); err == nil && overlaps(real, root) {
			if !in.AcknowledgeDataRoot {
				return nil, Errorf(ECONFLICT, "%s overlaps Kiln's data root %s (its database, plugins and memories); grant it only with acknowledge_data_root", real, root)
			}
			dataRoot = true
		}
	}
	name := in.Name
	if name != "" && !reGrantName.MatchString(name) {
		return nil, Errorf(EINVALID, "grant name %q: want 1-64 lowercase letters, digits, dashes and underscores, starting with a letter or digit", name)
	}
	now := s.now()
	g := &Grant{ID: NewID("grt", now), Path: real, Writable: in.Writable, DataRoot: dataRoot, OwnerID: p.ID, CreatedAt: now}
	err = s.update(ctx, func(tx Tx) error {
		gs, err := tx.Grants(p.ID)
		if err != nil {
			return err
		}
		taken := map[string]bool{}
		for _, o := range gs {
			taken[o.Name] = true
			if err := grantConflict(o, g); err != nil {
				return err
			}
		}
		g.Name = name
		if g.Name == "" {
			g.Name = freeGrantName(filepath.Base(real), taken)
		} else if taken[g.Name] {
			return Errorf(ECONFLICT, "a grant named %q exists", g.Name)
		}
		return tx.PutGrant(g)
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("folder granted", "grant", g.ID, "name", g.Name, "writable", g.Writable)
	return g, nil
}

// RemoveGrant revokes one of p's grants; it takes effect for the next
// tool call of every run.
func (s *Service) RemoveGrant(ctx context.Context, p Principal, id string) error {
	return s.update(ctx, func(tx Tx) error {
		g, err := tx.Grant(id)
		if err != nil {
			return err
		}
		if g.OwnerID != p.ID {
			return Errorf(ENOTFOUND, "grant %q not found", id)
		}
		return tx.DeleteGrant(id)
	})
}

func findGrant(tx ReadTx, owner, ref string) (*Grant, error) {
	gs, err := tx.Grants(owner)
	if err != nil {
		return nil, err
	}
	for _, g := range gs {
		if g.ID == ref || g.Name == ref {
			return g, nil
		}
	}
	return nil, Errorf(ENOTFOUND, "no folder grant %q (see kiln grants ls)", ref)
}

// realDir resolves path to an existing directory's real path.
func realDir(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", Errorf(EINVALID, "path %q: %v", path, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", Errorf(EINVALID, "%s does not exist", abs)
		}
		return "", Errorf(EINVALID, "%s cannot be resolved: %v", abs, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", Errorf(EINVALID, "%s: %v", real, err)
	}
	if !fi.IsDir() {
		return "", Errorf(EINVALID, "%s is not a directory", real)
	}
	return real, nil
}

// within reports whether path is dir or inside it (both clean, absolute).
func within(path, dir string) bool {
	if path == dir {
		return true
	}
	if !strings.HasSuffix(dir, string(filepath.Separator)) {
		dir += string(filepath.Separator)
	}
	return strings.HasPrefix(path, dir)
}

func overlaps(a, b string) bool { return within(a, b) || within(b, a) }

// grantConflict says why g may not be granted beside o, or nil: the same
// folder twice, or an overlap other than a read-only folder holding a
// writable one.
func grantConflict(o, g *Grant) error {
	switch {
	case o.Path == g.Path:
		return Errorf(ECONFLICT, "%s is granted already, as %q", g.Path, o.Name)
	case within(g.Path, o.Path) && !o.Writable && g.Writable, within(o.Path, g.Path) && !g.Writable && o.Writable:
		return nil
	case overlaps(o.Path, g.Path):
		return Errorf(ECONFLICT, "%s overlaps the grant %q (%s); only a writable folder inside a read-only one may overlap", g.Path, o.Name, o.Path)
	}
	return nil
}

// freeGrantName derives a grant name from a folder's base name: lowercase,
// runs of other characters as one dash, unique among taken (a -2, -3, ...
// suffix).
func freeGrantName(base string, taken map[string]bool) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(base) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_'
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	name := strings.TrimRight(b.String(), "-")
	if len(name) > 56 {
		name = strings.TrimRight(name[:56], "-")
	}
	if name == "" {
		name = "folder"
	}
	cand := name
	for i := 2; taken[cand]; i++ {
		cand = name + "-" + strconv.Itoa(i)
	}
	return cand
}
