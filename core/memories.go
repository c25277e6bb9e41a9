package core

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxMemorySize is the largest memory file, in bytes.
const MaxMemorySize = 256 << 10

var reMemoryName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\.md$`)

// CheckMemoryName returns EINVALID unless name is a memory file's name:
// 1-100 letters, digits, dots, dashes and underscores, starting with a
// letter or digit, ending in ".md". Memories are one flat folder.
func CheckMemoryName(name string) error {
	if !reMemoryName.MatchString(name) || strings.Contains(name, "..") {
		return Errorf(EINVALID, "memory name %q: want a file name like notes.md (letters, digits, '.', '-', '_'; ending in .md)", name)
	}
	return nil
}

// CheckMemory returns EINVALID unless content may be a memory: valid UTF-8
// text of at most MaxMemorySize bytes.
func CheckMemory(content []byte) error {
	if len(content) > MaxMemorySize {
		return Errorf(EINVALID, "a memory is at most %s; this one is %s", FormatBytes(MaxMemorySize), FormatBytes(int64(len(content))))
	}
	if !utf8.Valid(content) {
		return Errorf(EINVALID, "a memory is UTF-8 text")
	}
	return nil
}

// Memory is one long-term memory file. Content is left out of lists,
// which carry a Preview instead.
type Memory struct {
	Name      string    `json:"name"`
	Size      int64     `json:"size"`
	Preview   string    `json:"preview,omitempty"`
	Content   *string   `json:"content,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// MemoryDir is where the memory files live, or "" without a data root.
func (s *Service) MemoryDir() string {
	if s.cfg.DataRoot == "" {
		return ""
	}
	return filepath.Join(s.cfg.DataRoot, "memories")
}

// memoryRoot opens the memory folder, creating it.
func (s *Service) memoryRoot() (*os.Root, error) {
	dir := s.MemoryDir()
	if dir == "" {
		return nil, Errorf(EUNAVAIL, "long-term memory needs a data root")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return os.OpenRoot(dir)
}

// Memories lists the memory files by name. The memory folder is the
// owner's (a single-user installation has one).
func (s *Service) Memories(ctx context.Context, p Principal) ([]*Memory, error) {
	root, err := s.memoryRoot()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	out := []*Memory{}
	for _, e := range entries {
		if !e.Type().IsRegular() || CheckMemoryName(e.Name()) != nil {
			continue
		}
		m, err := readMemory(root, e.Name(), false)
		if err != nil {
			continue
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *Memory) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ReadMemory returns a memory file with its content.
func (s *Service) ReadMemory(ctx context.Context, p Principal, name string) (*Memory, error) {
	if err := CheckMemoryName(name); err != nil {
		return nil, err
	}
	root, err := s.memoryRoot()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return readMemory(root, name, true)
}

func readMemory(root *os.Root, name string, content bool) (*Memory, error) {
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Errorf(ENOTFOUND, "memory %q not found", name)
	}
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, Errorf(EINVALID, "memory %q is not a regular file", name)
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxMemorySize+1))
	if err != nil {
		return nil, err
	}
	m := &Memory{Name: name, Size: fi.Size(), UpdatedAt: fi.ModTime().UTC()}
	if content {
		text := string(b)
		m.Content = &text
	} else {
		m.Preview = preview(string(b))
	}
	return m, nil
}

// WriteMemory creates or replaces a memory file (written whole, then
// renamed into place).
func (s *Service) WriteMemory(ctx context.Context, p Principal, name string, content []byte) (*Memory, error) {
	if err := CheckMemoryName(name); err != nil {
		return nil, err
	}
	if err := CheckMemory(content); err != nil {
		return nil, err
	}
	root, err := s.memoryRoot()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if fi, err := root.Lstat(name); err == nil && !fi.Mode().IsRegular() {
		return nil, Errorf(EINVALID, "memory %q is not a regular file", name)
	}
	tmp := "." + name + ".tmp"
	if err := root.WriteFile(tmp, content, 0o600); err != nil {
		return nil, err
	}
	if err := root.Rename(tmp, name); err != nil {
		root.Remove(tmp)
		return nil, err
	}
	return readMemory(root, name, true)
}

// DeleteMemory deletes a memory file.
func (s *Service) DeleteMemory(ctx context.Context, p Principal, name string) error {
	if err := CheckMemoryName(name); err != nil {
		return err
	}
	root, err := s.memoryRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	if _, err := readMemory(root, name, false); err != nil {
		return err
	}
	return root.Remove(name)
}
