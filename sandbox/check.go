package sandbox

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

var (
	reID  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)
	reEnv = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// CheckPath returns nil when p is a path the file operations take:
// absolute, clean (path.Clean leaves it as it is: no "." or ".."
// elements, no doubled or trailing slash) and without NUL bytes.
// Otherwise it returns an *fs.PathError for op wrapping ErrInvalid.
func CheckPath(op, p string) error {
	if p == "" || p[0] != '/' || path.Clean(p) != p || strings.IndexByte(p, 0) >= 0 {
		return &fs.PathError{Op: op, Path: p, Err: fmt.Errorf("%w: want an absolute, clean, slash-separated path", ErrInvalid)}
	}
	return nil
}

// Check reports why spec cannot be started by a runtime with
// capabilities c: an error wrapping ErrInvalid for a malformed spec or one
// beyond c.Max, or c's *UnsupportedError for a network mode or an image
// it does not provide. Runtimes call it first thing in Start.
func (s Spec) Check(c Capabilities) error {
	if !reID.MatchString(s.ID) {
		return fmt.Errorf("%w: sandbox id %q: want 1 to 128 characters of A-Z, a-z, 0-9, '_', '.' and '-', starting with a letter or digit", ErrInvalid, s.ID)
	}
	if err := checkEnv(s.Env); err != nil {
		return err
	}
	for _, r := range []struct {
		name     string
		got, max int
	}{
		{"cpu_millis", s.Resources.CPUMillis, c.Max.CPUMillis},
		{"memory_mib", s.Resources.MemoryMiB, c.Max.MemoryMiB},
		{"disk_mib", s.Resources.DiskMiB, c.Max.DiskMiB},
	} {
		switch {
		case r.got < 0:
			return fmt.Errorf("%w: %s %d is negative", ErrInvalid, r.name, r.got)
		case r.max > 0 && r.got > r.max:
			return fmt.Errorf("%w: %s %d is more than sandbox runtime %q allows (%d)", ErrInvalid, r.name, r.got, c.Name, r.max)
		}
	}
	mode := s.Network.Mode
	if mode == "" {
		mode = NetworkNone
	}
	switch mode {
	case NetworkNone, NetworkOpen:
		if len(s.Network.Allow) > 0 {
			return fmt.Errorf("%w: network allow list is for mode %q, not %q", ErrInvalid, NetworkEgress, mode)
		}
	case NetworkEgress:
		if len(s.Network.Allow) == 0 || slices.Contains(s.Network.Allow, "") {
			return fmt.Errorf("%w: network mode %q needs hosts to allow", ErrInvalid, NetworkEgress)
		}
	default:
		return fmt.Errorf("%w: network mode %q is not one of %q, %q, %q", ErrInvalid, mode, NetworkNone, NetworkEgress, NetworkOpen)
	}
	if mode != NetworkNone && !slices.Contains(c.Network, mode) {
		return Unsupported(c.Name, fmt.Sprintf("network mode %q", mode))
	}
	if mode == NetworkEgress && !filepath.IsAbs(s.EgressSocket) {
		return fmt.Errorf("%w: network mode %q needs the absolute host path of the egress socket", ErrInvalid, NetworkEgress)
	}
	if mode != NetworkEgress && s.EgressSocket != "" {
		return fmt.Errorf("%w: an egress socket is for network mode %q, not %q", ErrInvalid, NetworkEgress, mode)
	}
	if (s.Image != "" || len(s.Entrypoint) > 0) && !c.Images {
		return Unsupported(c.Name, "images")
	}
	if slices.ContainsFunc(s.Entrypoint, func(a string) bool { return strings.IndexByte(a, 0) >= 0 }) {
		return fmt.Errorf("%w: the entrypoint holds a NUL byte", ErrInvalid)
	}
	if len(s.Mounts) > 0 && !c.Mounts {
		return Unsupported(c.Name, "host volumes")
	}
	for _, m := range s.Mounts {
		if !filepath.IsAbs(m.HostPath) || filepath.Clean(m.HostPath) != m.HostPath {
			return fmt.Errorf("%w: mount host path %q: want an absolute, clean path", ErrInvalid, m.HostPath)
		}
		if err := CheckPath("mount", m.Path); err != nil || m.Path == "/" {
			return fmt.Errorf("%w: mount path %q: want an absolute, clean path other than /", ErrInvalid, m.Path)
		}
	}
	return nil
}

// Check reports why req cannot be run: an error wrapping ErrInvalid for
// an empty command or program, a Dir that CheckPath refuses, or a
// variable name that is not one.
func (req ExecRequest) Check() error {
	if len(req.Command) == 0 || req.Command[0] == "" {
		return fmt.Errorf("%w: no command to run", ErrInvalid)
	}
	if slices.ContainsFunc(req.Command, func(a string) bool { return strings.IndexByte(a, 0) >= 0 }) {
		return fmt.Errorf("%w: the command holds a NUL byte", ErrInvalid)
	}
	if req.Dir != "" {
		if err := CheckPath("exec", req.Dir); err != nil {
			return err
		}
	}
	return checkEnv(req.Env)
}

func checkEnv(env map[string]string) error {
	for k, v := range env {
		if !reEnv.MatchString(k) {
			return fmt.Errorf("%w: environment variable %q: want a name of A-Z, a-z, 0-9 and '_' not starting with a digit", ErrInvalid, k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("%w: environment variable %s holds a NUL byte", ErrInvalid, k)
		}
	}
	return nil
}
