package core

import (
	"context"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
)

// MaxFilePath is the longest virtual file path, in bytes.
const MaxFilePath = 1024

// CheckFilePath returns EINVALID unless p is a virtual file's path:
// absolute, clean ("." and ".." segments, empty segments and a trailing
// slash are refused, not cleaned), not the root, a single line of valid
// UTF-8 without backslashes.
func CheckFilePath(p string) error {
	switch {
	case len(p) > MaxFilePath:
		return Errorf(EINVALID, "path is %d bytes; the limit is %d", len(p), MaxFilePath)
	case !strings.HasPrefix(p, "/") || p == "/":
		return Errorf(EINVALID, "path %q: want an absolute file path such as /notes/plan.md", p)
	case path.Clean(p) != p:
		return Errorf(EINVALID, "path %q is not clean (no '.', '..' or empty segments)", p)
	case strings.ContainsRune(p, '\\'):
		return Errorf(EINVALID, "path %q: use forward slashes", p)
	}
	return CheckText("path", p, false)
}

// stepFiles is a run's VirtualFS: the thread's committed files plus the
// writes of the step in progress, which commit with its checkpoint.
type stepFiles struct {
	s        *Service
	threadID string
	runID    string

	mu      sync.Mutex
	pending map[string]*File // path -> the step's version (Deleted for a removal)
}

func newStepFiles(s *Service, run *Run) *stepFiles {
	return &stepFiles{s: s, threadID: run.ThreadID, runID: run.ID, pending: map[string]*File{}}
}

func (f *stepFiles) Read(p string) (*File, error) {
	if err := CheckFilePath(p); err != nil {
		return nil, err
	}
	f.mu.Lock()
	v, ok := f.pending[p]
	f.mu.Unlock()
	if ok {
		if v.Deleted {
			return nil, Errorf(ENOTFOUND, "%s: no such file", p)
		}
		c := *v
		return &c, nil
	}
	var out *File
	err := f.s.view(context.Background(), func(tx ReadTx) (err error) {
		out, err = tx.File(f.threadID, p)
		return err
	})
	if IsNotFound(err) {
		return nil, Errorf(ENOTFOUND, "%s: no such file", p)
	}
	return out, err
}

func (f *stepFiles) List() ([]*File, error) {
	var stored []*File
	err := f.s.view(context.Background(), func(tx ReadTx) (err error) {
		stored, err = tx.Files(f.threadID, -1, false)
		return err
	})
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mergeLocked(stored), nil
}

// mergeLocked lays the pending versions over stored, without data.
func (f *stepFiles) mergeLocked(stored []*File) []*File {
	byPath := make(map[string]*File, len(stored)+len(f.pending))
	for _, v := range stored {
		byPath[v.Path] = v
	}
	for p, v := range f.pending {
		if v.Deleted {
			delete(byPath, p)
			continue
		}
		c := *v
		c.Data = nil
		byPath[p] = &c
	}
	out := slices.Collect(maps.Values(byPath))
	slices.SortFunc(out, func(a, b *File) int { return strings.Compare(a.Path, b.Path) })
	return out
}

func (f *stepFiles) Write(p string, data []byte) error {
	if err := CheckFilePath(p); err != nil {
		return err
	}
	if len(data) > MaxFileSize {
		return Errorf(EINVALID, "%s would be %s; a virtual file is at most %s", p, FormatBytes(int64(len(data))), FormatBytes(MaxFileSize))
	}
	files, err := f.List()
	if err != nil {
		return err
	}
	total := len(data)
	for _, v := range files {
		if v.Path != p {
			total += v.Size
		}
	}
	if total > MaxThreadFiles {
		return Errorf(EINVALID, "the thread's virtual files would be %s; the limit is %s", FormatBytes(int64(total)), FormatBytes(MaxThreadFiles))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending[p] = &File{ThreadID: f.threadID, Path: p, Data: slices.Clone(data), Size: len(data), RunID: f.runID, UpdatedAt: f.s.now()}
	return nil
}

func (f *stepFiles) Delete(p string) error {
	if _, err := f.Read(p); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending[p] = &File{ThreadID: f.threadID, Path: p, RunID: f.runID, Deleted: true, UpdatedAt: f.s.now()}
	return nil
}

// mark returns the pending writes so far, for undo.
func (f *stepFiles) mark() map[string]*File {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.pending)
}

// undo drops the writes made since mark.
func (f *stepFiles) undo(m map[string]*File) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending = m
}

// pendingFiles returns copies of the step's writes, ordered by path, for
// its StepCommit (which sets their Seq); nil when there are none.
func (f *stepFiles) pendingFiles() []*File {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.pending) == 0 {
		return nil
	}
	out := make([]*File, 0, len(f.pending))
	for _, p := range slices.Sorted(maps.Keys(f.pending)) {
		v := *f.pending[p]
		out = append(out, &v)
	}
	return out
}

// committed forgets the pending writes once their step committed.
func (f *stepFiles) committed() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.pending)
}

// ThreadFiles lists one of p's threads' virtual files, without data.
func (s *Service) ThreadFiles(ctx context.Context, p Principal, threadID string) ([]*File, error) {
	var files []*File
	err := s.view(ctx, func(tx ReadTx) (err error) {
		if _, err = ownThread(tx, p, threadID); err != nil {
			return err
		}
		files, err = tx.Files(threadID, -1, false)
		return err
	})
	if files == nil {
		files = []*File{}
	}
	return files, err
}

// ThreadFile returns one virtual file of one of p's threads, with its data.
func (s *Service) ThreadFile(ctx context.Context, p Principal, threadID, filePath string) (*File, error) {
	if err := CheckFilePath(filePath); err != nil {
		return nil, err
	}
	var f *File
	err := s.view(ctx, func(tx ReadTx) (err error) {
		if _, err = ownThread(tx, p, threadID); err != nil {
			return err
		}
		f, err = tx.File(threadID, filePath)
		return err
	})
	return f, err
}
