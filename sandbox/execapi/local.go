//go:build unix

package execapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kilnhq/kiln/sandbox"
)

// LocalBackend is the operating system it runs on: commands are
// processes in their own process group (killed as a group), command
// lines run by /bin/sh -c, and files are the paths as given. It is what
// kiln-execd serves inside a sandbox.
type LocalBackend struct{}

// waitDelay bounds how long Run waits for output after a command exits
// while something it started in the background keeps its output open.
const waitDelay = 500 * time.Millisecond

func (LocalBackend) command(c Command) (*exec.Cmd, error) {
	var cmd *exec.Cmd
	switch {
	case c.Shell != "":
		cmd = exec.Command("/bin/sh", "-c", c.Shell)
	case len(c.Args) > 0:
		cmd = exec.Command(c.Args[0], c.Args[1:]...)
	default:
		return nil, fmt.Errorf("%w: no command to run", sandbox.ErrInvalid)
	}
	cmd.Dir = c.Dir
	if len(c.Env) > 0 {
		cmd.Env = os.Environ()
		for k, v := range c.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if c.UID != nil {
		cred := &syscall.Credential{Uid: *c.UID, Gid: *c.UID}
		if c.GID != nil {
			cred.Gid = *c.GID
		}
		cmd.SysProcAttr.Credential = cred
	}
	return cmd, nil
}

// killGroup kills the process group that cmd leads.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// outWriter passes what a command writes to out, one write at a time.
type outWriter struct {
	ch chan<- chunk
	s  sandbox.Stream
}

type chunk struct {
	s    sandbox.Stream
	data []byte
}

func (w outWriter) Write(p []byte) (int, error) {
	w.ch <- chunk{w.s, bytes.Clone(p)}
	return len(p), nil
}

func (b LocalBackend) Run(ctx context.Context, c Command, started func(), out func(sandbox.Stream, []byte)) (int, error) {
	if c.Dir != "" {
		if fi, err := os.Stat(c.Dir); err != nil || !fi.IsDir() {
			return 0, &fs.PathError{Op: "run: chdir", Path: c.Dir, Err: fs.ErrNotExist}
		}
	}
	cmd, err := b.command(c)
	if err != nil {
		return 0, err
	}
	ch := make(chan chunk, 16)
	cmd.Stdout = outWriter{ch, sandbox.Stdout}
	cmd.Stderr = outWriter{ch, sandbox.Stderr}
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("run: %w", err)
	}
	started()
	stop := context.AfterFunc(ctx, func() { killGroup(cmd) })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); close(ch) }()
	for c := range ch {
		out(c.s, c.data)
	}
	err = <-done
	if !stop() {
		return 0, fmt.Errorf("run: %w", context.Cause(ctx))
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	case errors.Is(err, exec.ErrWaitDelay), err == nil:
		return cmd.ProcessState.ExitCode(), nil
	}
	return 0, fmt.Errorf("run: %w", err)
}

func (b LocalBackend) Shell(dir string) (*Process, error) {
	cmd := exec.Command("/bin/sh")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start a shell: %w", err)
	}
	return &Process{Stdin: stdin, Stdout: stdout, Stderr: stderr, Kill: func() error {
		err := killGroup(cmd)
		cmd.Wait()
		return err
	}}, nil
}

func (LocalBackend) Open(_ context.Context, p string) (io.ReadCloser, FileInfo, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, FileInfo{}, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, FileInfo{}, err
	}
	return f, fileInfo(fi), nil
}

func (LocalBackend) Write(_ context.Context, p string, data io.Reader, perm fs.FileMode) error {
	if perm == 0 {
		perm = 0o644
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".kiln-upload-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = io.Copy(f, data)
	if err == nil {
		err = f.Chmod(perm.Perm())
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return &fs.PathError{Op: "write", Path: p, Err: err}
	}
	return nil
}

func (LocalBackend) Stat(_ context.Context, p string) (FileInfo, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return FileInfo{}, err
	}
	return fileInfo(fi), nil
}

func (LocalBackend) ReadDir(_ context.Context, p string) ([]FileInfo, error) {
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, err
	}
	out := make([]FileInfo, 0, len(ents))
	for _, e := range ents {
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, err
		}
		out = append(out, fileInfo(fi))
	}
	return out, nil
}

func (LocalBackend) Remove(_ context.Context, p string) error { return os.Remove(p) }

func (LocalBackend) RemoveAll(_ context.Context, p string) error { return os.RemoveAll(p) }

func (LocalBackend) Rename(_ context.Context, src, dst string) error { return os.Rename(src, dst) }

func (LocalBackend) Chmod(_ context.Context, p string, perm fs.FileMode) error {
	return os.Chmod(p, perm.Perm())
}

func (LocalBackend) Chown(_ context.Context, p, owner, group string) error {
	uid, gid := -1, -1
	if owner != "" {
		id, err := lookupID(owner, func(n string) (string, error) {
			u, err := user.Lookup(n)
			if err != nil {
				return "", err
			}
			return u.Uid, nil
		})
		if err != nil {
			return err
		}
		uid = id
	}
	if group != "" {
		id, err := lookupID(group, func(n string) (string, error) {
			g, err := user.LookupGroup(n)
			if err != nil {
				return "", err
			}
			return g.Gid, nil
		})
		if err != nil {
			return err
		}
		gid = id
	}
	return os.Lchown(p, uid, gid)
}

// lookupID returns the numeric ID name is, or the one lookup finds for it.
func lookupID(name string, lookup func(string) (string, error)) (int, error) {
	if id, err := strconv.Atoi(name); err == nil {
		return id, nil
	}
	s, err := lookup(name)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", sandbox.ErrInvalid, err)
	}
	return strconv.Atoi(s)
}

func (LocalBackend) MkdirAll(_ context.Context, p string, perm fs.FileMode) error {
	if perm == 0 {
		perm = 0o755
	}
	return os.MkdirAll(p, perm.Perm())
}

// Metrics reads /proc (Linux): CPU use over 100 ms, and memory as
// MemTotal less MemAvailable. Elsewhere only the CPU count is known.
func (LocalBackend) Metrics(ctx context.Context) (Metrics, error) {
	m := Metrics{CPUCount: runtime.NumCPU()}
	if t, err := memInfo(); err == nil {
		m.MemTotalMiB, m.MemUsedMiB = t[0]/1024, (t[0]-t[1])/1024
	}
	busy0, total0, err := cpuTimes()
	if err != nil {
		return m, nil
	}
	select {
	case <-time.After(100 * time.Millisecond):
	case <-ctx.Done():
		return m, ctx.Err()
	}
	if busy1, total1, err := cpuTimes(); err == nil && total1 > total0 {
		m.CPUUsedPct = 100 * (busy1 - busy0) / (total1 - total0)
	}
	return m, nil
}

// memInfo returns MemTotal and MemAvailable in KiB.
func memInfo() ([2]float64, error) {
	var t [2]float64
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return t, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		n, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		switch k {
		case "MemTotal":
			t[0] = n
		case "MemAvailable":
			t[1] = n
		}
	}
	return t, sc.Err()
}

// cpuTimes returns the busy and total jiffies of /proc/stat's cpu line.
func cpuTimes() (busy, total float64, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, errors.New("/proc/stat: no cpu line")
	}
	for i, s := range f[1:] {
		n, _ := strconv.ParseFloat(s, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total, nil
}

func (LocalBackend) DialPort(ctx context.Context, port int) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
}

func fileInfo(fi fs.FileInfo) FileInfo {
	out := FileInfo{Name: fi.Name(), Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime(), Created: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		out.Owner = strconv.FormatUint(uint64(st.Uid), 10)
		if u, err := user.LookupId(out.Owner); err == nil {
			out.Owner = u.Username
		}
		out.Group = strconv.FormatUint(uint64(st.Gid), 10)
		if g, err := user.LookupGroupId(out.Group); err == nil {
			out.Group = g.Name
		}
		out.Created = statCtime(st)
	}
	return out
}

var _ Backend = LocalBackend{}
