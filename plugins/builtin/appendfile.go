package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/kilnhq/kiln/core"
)

// MaxAppendLine is the longest line, in bytes, append_file accepts.
const MaxAppendLine = 64 << 10

// AppendFile is the "append_file" tool: it appends one line to a file inside
// a scratch directory. It refuses absolute paths, paths with .. components
// and paths whose existing part resolves, through symlinks, outside the
// scratch directory. The file is then opened through an os.Root on the
// scratch directory, which opens every component with O_NOFOLLOW and never
// follows a link out of it, so a symlink swapped in after the check cannot
// redirect the write either.
type AppendFile struct {
	dir string
}

// NewAppendFile returns append_file writing under scratchDir, which is
// created on first use if missing.
func NewAppendFile(scratchDir string) *AppendFile {
	return &AppendFile{dir: scratchDir}
}

// Spec describes append_file. It is not idempotent: running it twice
// appends twice.
func (a *AppendFile) Spec() core.ToolSpec {
	return core.ToolSpec{
		Name: "append_file",
		Description: "Appends one line of text (a newline is added) to a file in the server's scratch directory, " +
			"creating the file and its parent directories if needed. The path is relative to the scratch directory " +
			"and may not leave it. Returns a short confirmation.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"File path relative to the scratch directory, e.g. demo/notes.txt."},` +
			`"line":{"type":"string","description":"The line to append, without newline characters."}},` +
			`"required":["path","line"],"additionalProperties":false}`),
		Idempotent: false,
	}
}

// Call appends the line with a single write on a file opened with O_APPEND,
// so concurrent appends never interleave within a line.
func (a *AppendFile) Call(ctx context.Context, args json.RawMessage) (core.ToolResult, error) {
	out, err := a.run(ctx, args)
	return result(ctx, out, err)
}

func (a *AppendFile) run(ctx context.Context, args json.RawMessage) (string, error) {
	const tool = "append_file"
	fields, err := decodeArgs(tool, args, "path", "line")
	if err != nil {
		return "", err
	}
	path, ok, err := stringArg(tool, fields, "path")
	if err != nil {
		return "", err
	}
	if !ok || path == "" {
		return "", core.Errorf(core.EINVALID, "append_file: missing argument \"path\"")
	}
	line, ok, err := stringArg(tool, fields, "line")
	if err != nil {
		return "", err
	}
	if !ok {
		return "", core.Errorf(core.EINVALID, "append_file: missing argument \"line\"")
	}
	if strings.ContainsAny(line, "\n\r") {
		return "", core.Errorf(core.EINVALID, "append_file: line must be a single line without newline characters")
	}
	if len(line) > MaxAppendLine {
		return "", core.Errorf(core.EINVALID, "append_file: line is longer than %d bytes", MaxAppendLine)
	}
	rel, err := scratchRelPath(path)
	if err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if a.dir == "" {
		return "", fmt.Errorf("append_file: no scratch directory is configured")
	}
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		return "", fmt.Errorf("append_file: creating the scratch directory: %w", err)
	}
	root, err := filepath.Abs(a.dir)
	if err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if err != nil {
		return "", fmt.Errorf("append_file: resolving the scratch directory: %w", err)
	}
	target, err := resolveInside(root, rel, path)
	if err != nil {
		return "", err
	}

	r, err := os.OpenRoot(root)
	if err != nil {
		return "", fmt.Errorf("append_file: opening the scratch directory: %w", err)
	}
	defer r.Close()
	if dir := filepath.Dir(target); dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return "", fmt.Errorf("append_file: creating the directories of %q: %w", path, scrub(err, root))
		}
	}
	f, err := r.OpenFile(target, os.O_WRONLY|os.O_APPEND|os.O_CREATE|openNoBlock, 0o644)
	if err != nil {
		return "", fmt.Errorf("append_file: opening %q: %w", path, scrub(err, root))
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return "", core.Errorf(core.EINVALID, "append_file: %q is not a regular file", path)
	}
	if _, err := f.Write([]byte(line + "\n")); err != nil {
		f.Close()
		return "", fmt.Errorf("append_file: writing %q: %w", path, scrub(err, root))
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("append_file: closing %q: %w", path, scrub(err, root))
	}
	return "appended 1 line to " + filepath.ToSlash(rel), nil
}

// scratchRelPath checks a model-supplied path lexically and returns it as a
// clean relative OS path.
func scratchRelPath(path string) (string, error) {
	if strings.ContainsRune(path, 0) {
		return "", core.Errorf(core.EINVALID, "append_file: path contains a NUL byte")
	}
	if filepath.IsAbs(path) || strings.HasPrefix(path, "/") || strings.HasPrefix(path, `\`) || filepath.VolumeName(path) != "" {
		return "", core.Errorf(core.EFORBIDDEN, "append_file: path %q must be relative to the scratch directory", path)
	}
	for _, c := range strings.FieldsFunc(path, func(r rune) bool { return r == '/' || r == filepath.Separator }) {
		if c == ".." {
			return "", core.Errorf(core.EFORBIDDEN, "append_file: path %q must not contain ..", path)
		}
	}
	if strings.HasSuffix(path, "/") || strings.HasSuffix(path, string(filepath.Separator)) {
		return "", core.Errorf(core.EINVALID, "append_file: path %q names a directory, not a file", path)
	}
	rel := filepath.Clean(filepath.FromSlash(path))
	if rel == "." {
		return "", core.Errorf(core.EINVALID, "append_file: path %q names the scratch directory, not a file", path)
	}
	if !filepath.IsLocal(rel) {
		return "", core.Errorf(core.EFORBIDDEN, "append_file: path %q is not a plain relative path", path)
	}
	return rel, nil
}

// resolveInside resolves the longest existing prefix of rel under root with
// filepath.EvalSymlinks, checks it stays inside root, and returns the path to
// open relative to root: the resolved prefix plus the missing components.
// path is the caller's spelling, for messages.
func resolveInside(root, rel, path string) (string, error) {
	comps := strings.Split(rel, string(filepath.Separator))
	existing := root
	i := 0
	for ; i < len(comps); i++ {
		next := filepath.Join(existing, comps[i])
		if _, err := os.Lstat(next); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			if errors.Is(err, syscall.ENOTDIR) {
				return "", core.Errorf(core.EINVALID, "append_file: path %q goes through a file as if it were a directory", path)
			}
			return "", fmt.Errorf("append_file: checking %q: %w", path, scrub(err, root))
		}
		existing = next
	}
	resolved, err := filepath.EvalSymlinks(existing)
	if err != nil {
		// A dangling symlink: its target is unknown territory.
		return "", core.Errorf(core.EFORBIDDEN, "append_file: path %q goes through a symlink that cannot be resolved", path)
	}
	if !within(root, resolved) {
		return "", core.Errorf(core.EFORBIDDEN, "append_file: path %q resolves outside the scratch directory through a symlink", path)
	}
	if i == len(comps) {
		fi, err := os.Stat(resolved)
		if err != nil {
			return "", fmt.Errorf("append_file: checking %q: %w", path, scrub(err, root))
		}
		if !fi.Mode().IsRegular() {
			return "", core.Errorf(core.EINVALID, "append_file: %q is not a regular file", path)
		}
	}
	prefix, err := filepath.Rel(root, resolved)
	if err != nil {
		return "", fmt.Errorf("append_file: %w", err)
	}
	return filepath.Join(append([]string{prefix}, comps[i:]...)...), nil
}

// within reports whether p is root or inside it; both are clean absolute paths.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return false
	}
	return rel == "." || filepath.IsLocal(rel)
}

// scrub removes the absolute scratch directory from an error's text so the
// model sees paths relative to it.
func scrub(err error, root string) error {
	msg := strings.ReplaceAll(err.Error(), root+string(filepath.Separator), "")
	if msg == err.Error() {
		return err
	}
	return &scrubbed{msg: msg, err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (s *scrubbed) Error() string { return s.msg }
func (s *scrubbed) Unwrap() error { return s.err }
