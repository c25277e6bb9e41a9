package docker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kilnhq/kiln/sandbox"
)

// The file operations are small sh scripts run through the exec API,
// with the path as $1 (never in the script's text). They exit with one
// of these codes for the errors a caller tells apart, and another with a
// message on stderr for the rest.
const (
	codeMissing  = 10
	codeNotDir   = 11
	codeIsDir    = 12
	codeOtherErr = 13
)

// Scripts of the file operations. The read script writes "K" before the
// file's bytes, so that ReadFile knows the file opened before it returns.
const (
	readScript = `[ -e "$1" ] || exit 10
[ -d "$1" ] && exit 12
printf K
exec cat -- "$1"`
	writeScript = `[ -d "$1" ] && exit 12
d=${1%/*}
mkdir -p -- "${d:-/}" || exit 13
umask 077
cat >"$1" || exit 13
exec chmod "$2" -- "$1"`
	statScript = `[ -e "$1" ] || exit 10
exec stat -L -c '%f %s %Y' -- "$1"`
	// Each entry is its lstat line, a newline, its name and a NUL.
	readDirScript = `[ -e "$1" ] || exit 10
[ -d "$1" ] || exit 11
cd -- "$1" || exit 13
for f in * .[!.]* ..?*; do
	if [ -e "$f" ] || [ -L "$f" ]; then
		if s=$(stat -c '%f %s %Y' -- "$f" 2>/dev/null); then printf '%s\n%s\0' "$s" "$f"; fi
	fi
done`
	removeScript = `[ -e "$1" ] || [ -L "$1" ] || exit 10
exec rm -rf -- "$1"`
)

// script runs one file operation's script on p, with its output going
// to stdout (nil drops it), and returns its error as an *fs.PathError.
func (r *Runtime) script(ctx context.Context, h sandbox.Handle, op, p, script string, args []string, stdin io.Reader, stdout io.Writer) error {
	if err := sandbox.CheckPath(op, p); err != nil {
		return err
	}
	d, err := r.container(h)
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	code, err := r.run(ctx, d, proc{cmd: append([]string{"sh", "-c", script, "kiln", p}, args...), stdin: stdin}, func(e sandbox.ExecEvent) {
		if e.Stream == sandbox.Stdout && stdout != nil {
			stdout.Write(e.Data)
		} else if e.Stream == sandbox.Stderr {
			stderr.Write(e.Data)
		}
	})
	if err == nil {
		err = codeErr(code, &stderr)
	}
	if err != nil {
		return &fs.PathError{Op: op, Path: p, Err: err}
	}
	return nil
}

var (
	errNotDir = errors.New("not a folder")
	errIsDir  = errors.New("is a folder")
)

// codeErr is the error of a script's exit code.
func codeErr(code int, stderr *bytes.Buffer) error {
	switch code {
	case 0:
		return nil
	case codeMissing:
		return fs.ErrNotExist
	case codeNotDir:
		return errNotDir
	case codeIsDir:
		return errIsDir
	}
	msg := strings.TrimSpace(stderr.String())
	if msg == "" {
		msg = "no message"
	}
	return fmt.Errorf("exit code %d: %s", code, msg)
}

// ReadFile streams the file with cat; closing the reader early kills it.
func (r *Runtime) ReadFile(ctx context.Context, h sandbox.Handle, p string) (io.ReadCloser, error) {
	if err := sandbox.CheckPath("read", p); err != nil {
		return nil, err
	}
	if _, err := r.container(h); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	// A reader that stops reading must not hold up the end of ctx.
	stop := context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
	go func() {
		err := r.script(ctx, h, "read", p, readScript, nil, nil, pw)
		stop()
		pw.CloseWithError(err)
	}()
	var k [1]byte
	if _, err := io.ReadFull(pr, k[:]); err != nil {
		cancel()
		pr.Close()
		if errors.Is(err, io.EOF) {
			err = &fs.PathError{Op: "read", Path: p, Err: errors.New("the read script wrote nothing")}
		}
		return nil, err
	}
	return &fileReader{PipeReader: pr, cancel: cancel}, nil
}

// fileReader is ReadFile's reader: its Close stops the read.
type fileReader struct {
	*io.PipeReader
	cancel context.CancelFunc
	once   sync.Once
}

func (f *fileReader) Close() error {
	f.once.Do(func() {
		f.PipeReader.Close()
		f.cancel()
	})
	return nil
}

// WriteFile streams data to cat, after mkdir -p of the folder above.
func (r *Runtime) WriteFile(ctx context.Context, h sandbox.Handle, p string, data io.Reader, perm fs.FileMode) error {
	if perm == 0 {
		perm = 0o644
	}
	if data == nil {
		data = strings.NewReader("")
	}
	return r.script(ctx, h, "write", p, writeScript, []string{strconv.FormatUint(uint64(perm.Perm()), 8)}, data, nil)
}

// Stat runs stat -L.
func (r *Runtime) Stat(ctx context.Context, h sandbox.Handle, p string) (sandbox.FileInfo, error) {
	var out bytes.Buffer
	if err := r.script(ctx, h, "stat", p, statScript, nil, nil, &out); err != nil {
		return sandbox.FileInfo{}, err
	}
	fi, err := parseStat(strings.TrimSpace(out.String()), path.Base(p))
	if err != nil {
		return sandbox.FileInfo{}, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	return fi, nil
}

// ReadDir runs stat (without -L) on each entry.
func (r *Runtime) ReadDir(ctx context.Context, h sandbox.Handle, p string) ([]sandbox.FileInfo, error) {
	var out bytes.Buffer
	if err := r.script(ctx, h, "readdir", p, readDirScript, nil, nil, &out); err != nil {
		return nil, err
	}
	var ents []sandbox.FileInfo
	br := bufio.NewReader(&out)
	for {
		line, err := br.ReadString('\n')
		if errors.Is(err, io.EOF) && line == "" {
			break
		}
		name, err2 := br.ReadString(0)
		if err != nil || err2 != nil {
			return nil, &fs.PathError{Op: "readdir", Path: p, Err: errors.New("the listing is cut short")}
		}
		fi, err := parseStat(strings.TrimSuffix(line, "\n"), strings.TrimSuffix(name, "\x00"))
		if err != nil {
			return nil, &fs.PathError{Op: "readdir", Path: p, Err: err}
		}
		ents = append(ents, fi)
	}
	slices.SortFunc(ents, func(a, b sandbox.FileInfo) int { return strings.Compare(a.Name, b.Name) })
	return ents, nil
}

// Remove runs rm -rf.
func (r *Runtime) Remove(ctx context.Context, h sandbox.Handle, p string) error {
	if p == "/" {
		return &fs.PathError{Op: "remove", Path: p, Err: fmt.Errorf("%w: will not remove /", sandbox.ErrInvalid)}
	}
	return r.script(ctx, h, "remove", p, removeScript, nil, nil, nil)
}

// parseStat reads a line of stat -c '%f %s %Y': the raw mode in hex, the
// size and the modification time in seconds.
func parseStat(line, name string) (sandbox.FileInfo, error) {
	f := strings.Fields(line)
	if len(f) != 3 {
		return sandbox.FileInfo{}, fmt.Errorf("cannot read the output of stat: %q", line)
	}
	raw, err1 := strconv.ParseUint(f[0], 16, 32)
	size, err2 := strconv.ParseInt(f[1], 10, 64)
	mtime, err3 := strconv.ParseInt(f[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return sandbox.FileInfo{}, fmt.Errorf("cannot read the output of stat %q: %w", line, err)
	}
	return sandbox.FileInfo{Name: name, Size: size, Mode: fileMode(uint32(raw)), ModTime: time.Unix(mtime, 0)}, nil
}

// fileMode converts a Unix st_mode to an fs.FileMode.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & 0o170000 { // S_IFMT
	case 0o040000:
		mode |= fs.ModeDir
	case 0o120000:
		mode |= fs.ModeSymlink
	case 0o010000:
		mode |= fs.ModeNamedPipe
	case 0o140000:
		mode |= fs.ModeSocket
	case 0o020000:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case 0o060000:
		mode |= fs.ModeDevice
	}
	for bit, fm := range map[uint32]fs.FileMode{0o4000: fs.ModeSetuid, 0o2000: fs.ModeSetgid, 0o1000: fs.ModeSticky} {
		if m&bit != 0 {
			mode |= fm
		}
	}
	return mode
}
