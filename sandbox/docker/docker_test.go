package docker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/docker"
	"github.com/kilnhq/kiln/sandbox/sandboxtest"
)

// testImage is the image .ci/docker-up builds: busybox alone.
const testImage = "kiln-test/busybox:latest"

// newRuntime returns a runtime over the local engine, with the test
// image as its default; without an engine the test skips, or fails under
// KILN_REQUIRE_DOCKER=1 (make test).
func newRuntime(t *testing.T, opts docker.Options) *docker.Runtime {
	t.Helper()
	if opts.DefaultImage == "" {
		opts.DefaultImage = testImage
	}
	r, err := docker.New(opts)
	if err != nil {
		if os.Getenv("KILN_REQUIRE_DOCKER") == "1" {
			t.Fatalf("%v (KILN_REQUIRE_DOCKER=1: run .ci/docker-up)", err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestConformance(t *testing.T) {
	newRuntime(t, docker.Options{}) // skips the whole suite without an engine
	sandboxtest.Run(t, func(t *testing.T) sandbox.Runtime { return newRuntime(t, docker.Options{}) })
}

// start starts a sandbox of spec (ID from the test's name) and destroys
// it when t ends.
func start(t *testing.T, r *docker.Runtime, spec sandbox.Spec) sandbox.Handle {
	t.Helper()
	if spec.ID == "" {
		spec.ID = fmt.Sprintf("test-%s-%d", strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-"), time.Now().UnixNano())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := r.Start(ctx, spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Destroy(context.Background(), h); err != nil {
			t.Errorf("Destroy: %v", err)
		}
	})
	return h
}

// sh runs script in the sandbox and returns its exit code, stdout and
// stderr.
func sh(t *testing.T, r *docker.Runtime, h sandbox.Handle, script string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	st, err := r.Exec(ctx, h, sandbox.ExecRequest{Command: []string{"sh", "-c", script}}, func(e sandbox.ExecEvent) {
		if e.Stream == sandbox.Stdout {
			out.Write(e.Data)
		} else {
			errOut.Write(e.Data)
		}
	})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return st.Code, out.String(), errOut.String()
}

func TestNoNetwork(t *testing.T) {
	r := newRuntime(t, docker.Options{})
	h := start(t, r, sandbox.Spec{})
	if code, out, _ := sh(t, r, h, "ls /sys/class/net"); code != 0 || strings.Fields(out)[0] != "lo" || len(strings.Fields(out)) != 1 {
		t.Errorf("network interfaces in a sandbox = %d, %q; want lo alone", code, out)
	}
	// The host's loopback is not the sandbox's: a listener on it is out
	// of reach.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	if code, out, errOut := sh(t, r, h, fmt.Sprintf("echo x | nc -w 2 127.0.0.1 %d && echo connected", port)); code == 0 || strings.Contains(out, "connected") {
		t.Errorf("nc to the host's 127.0.0.1:%d from a sandbox = %d, %q, %q; want it refused", port, code, out, errOut)
	}
	select {
	case <-accepted:
		t.Error("the host's listener accepted a connection from a sandbox")
	case <-time.After(200 * time.Millisecond):
	}
}

func TestHardening(t *testing.T) {
	r := newRuntime(t, docker.Options{})
	h := start(t, r, sandbox.Spec{})
	_, out, _ := sh(t, r, h, "cat /proc/self/status")
	for _, want := range []string{"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("/proc/self/status in a sandbox lacks %q:\n%s", want, out)
		}
	}
	// Without capabilities, root in the sandbox cannot do what root can.
	if code, _, _ := sh(t, r, h, "mknod /tmp/dev c 1 3"); code == 0 {
		t.Error("mknod succeeded in a sandbox")
	}
	// Nothing of kiln-execd without it.
	if code, _, _ := sh(t, r, h, "[ -e /kiln ]"); code == 0 {
		t.Error("/kiln is in a sandbox of a runtime without kiln-execd")
	}
	if _, err := r.DialExec(context.Background(), h); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Errorf("DialExec without kiln-execd: %v; want ErrUnsupported", err)
	}
}

// cgroupValue reads the first of the cgroup files (v2, then v1) that the
// sandbox has.
func cgroupValue(t *testing.T, r *docker.Runtime, h sandbox.Handle, files ...string) string {
	t.Helper()
	for _, f := range files {
		if code, out, _ := sh(t, r, h, "cat "+f); code == 0 {
			return strings.TrimSpace(out)
		}
	}
	t.Fatalf("none of the cgroup files %q is in the sandbox", files)
	return ""
}

func TestLimits(t *testing.T) {
	r := newRuntime(t, docker.Options{PidsLimit: 40})
	h := start(t, r, sandbox.Spec{Resources: sandbox.Resources{MemoryMiB: 64, CPUMillis: 500}})
	if got := cgroupValue(t, r, h, "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"); got != "67108864" {
		t.Errorf("the memory limit of a sandbox of 64 MiB is %s", got)
	}
	if got := cgroupValue(t, r, h, "/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"); got != "40" {
		t.Errorf("the pids limit is %s; want 40", got)
	}
	if got := cgroupValue(t, r, h, "/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"); got != "50000 100000" && got != "50000" {
		t.Errorf("the CPU quota of half a core is %s", got)
	}
	// Forking past the limit fails in the sandbox (sh gives up at the
	// first refusal), and only there: once the sleeps end, commands run
	// again.
	if code, _, errOut := sh(t, r, h, "for i in $(seq 60); do sleep 3 & done; wait"); code == 0 || !strings.Contains(errOut, "fork") {
		t.Errorf("60 sleeps in a sandbox limited to 40 processes = %d, stderr %q; want forks refused", code, errOut)
	}
	time.Sleep(3500 * time.Millisecond)
	if code, out, _ := sh(t, r, h, "echo alive"); code != 0 || out != "alive\n" {
		t.Errorf("after the fork loop: %d, %q", code, out)
	}
}

// TestDiskLimit: what a sandbox writes is held to its disk size and never
// lands on the host's disk past it: writing more than it fails in the
// sandbox with "No space left on device" (or, where the storage driver
// cannot limit a container, outside WritableDirs with "Read-only file
// system"), and the container's writable layer stays within the size. A
// sandbox without a disk size gets the default.
func TestDiskLimit(t *testing.T) {
	r := newRuntime(t, docker.Options{})
	id := fmt.Sprintf("test-disk-%d", time.Now().UnixNano())
	h := start(t, r, sandbox.Spec{ID: id, Resources: sandbox.Resources{MemoryMiB: 256, DiskMiB: 32}})
	code, _, errOut := sh(t, r, h, "dd if=/dev/zero of=/tmp/big bs=1M count=64")
	if code == 0 || !strings.Contains(errOut, "No space left on device") {
		t.Errorf("64 MiB into /tmp of a sandbox of 32 MiB: exit %d, stderr %q", code, errOut)
	}
	if code, out, _ := sh(t, r, h, "wc -c < /tmp/big"); code != 0 || strings.TrimSpace(out) == "" || len(strings.TrimSpace(out)) > 8 {
		t.Errorf("the file written: %d %q", code, out)
	} else if n, _ := strconv.Atoi(strings.TrimSpace(out)); n > 32<<20 {
		t.Errorf("%d bytes written into a sandbox of 32 MiB", n)
	}
	code, _, errOut = sh(t, r, h, "dd if=/dev/zero of=/var/big bs=1M count=64")
	if code == 0 || !strings.Contains(errOut, "No space left on device") && !strings.Contains(errOut, "Read-only file system") {
		t.Errorf("64 MiB into the root of a sandbox of 32 MiB: exit %d, stderr %q", code, errOut)
	}
	if out, err := exec.Command("docker", "inspect", "--size", "-f", "{{.SizeRw}}", "kiln-"+id).Output(); err != nil {
		t.Errorf("docker inspect: %v", err)
	} else if n, _ := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); n > 33<<20 {
		t.Errorf("the container's writable layer on the host's disk holds %d bytes, more than its 32 MiB", n)
	}
	// The default, where the folders are tmpfs: DefaultDiskMiB each.
	d := start(t, r, sandbox.Spec{})
	if code, out, _ := sh(t, r, d, "grep ' /tmp tmpfs' /proc/mounts"); code == 0 && !strings.Contains(out, fmt.Sprintf("size=%dk", docker.DefaultDiskMiB<<10)) {
		t.Errorf("the /tmp of a sandbox without a disk size: %q, want %d MiB", out, docker.DefaultDiskMiB)
	}
}

func TestMounts(t *testing.T) {
	r := newRuntime(t, docker.Options{})
	ro, rw, other := t.TempDir(), t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ro, "given.txt"), []byte("from the host\n"), 0o644)
	os.WriteFile(filepath.Join(other, "secret.txt"), []byte("not for the sandbox\n"), 0o644)
	h := start(t, r, sandbox.Spec{Mounts: []sandbox.Mount{
		{HostPath: ro, Path: "/mnt/ro", ReadOnly: true},
		{HostPath: rw, Path: "/mnt/rw"},
	}})
	ctx := context.Background()
	if code, out, _ := sh(t, r, h, "cat /mnt/ro/given.txt"); code != 0 || out != "from the host\n" {
		t.Errorf("cat of a read-only mount's file = %d, %q", code, out)
	}
	if code, _, _ := sh(t, r, h, "echo x > /mnt/ro/new.txt"); code == 0 {
		t.Error("a command wrote to a read-only mount")
	}
	if err := r.WriteFile(ctx, h, "/mnt/ro/given.txt", strings.NewReader("changed"), 0); err == nil {
		t.Error("WriteFile wrote to a read-only mount")
	}
	if err := r.Remove(ctx, h, "/mnt/ro/given.txt"); err == nil {
		t.Error("Remove removed from a read-only mount")
	}
	if b, _ := os.ReadFile(filepath.Join(ro, "given.txt")); string(b) != "from the host\n" {
		t.Errorf("the host file under a read-only mount is now %q", b)
	}
	if err := r.WriteFile(ctx, h, "/mnt/rw/out/made.txt", strings.NewReader("made in the sandbox"), 0); err != nil {
		t.Errorf("WriteFile to a writable mount: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "out", "made.txt")); err != nil || string(b) != "made in the sandbox" {
		t.Errorf("the host sees %q, %v through a writable mount", b, err)
	}
	// A host folder that is not in Spec.Mounts is not there, by its path
	// or in the mount table.
	_, mounts, _ := sh(t, r, h, "cat /proc/self/mountinfo")
	if strings.Contains(mounts, other) {
		t.Errorf("a folder not in Spec.Mounts is mounted:\n%s", mounts)
	}
	if code, _, _ := sh(t, r, h, "[ -e '"+other+"' ] || [ -e '"+filepath.Dir(other)+"' ]"); code == 0 {
		t.Errorf("the host path %s is in the sandbox", other)
	}
	for _, f := range strings.Split(mounts, "\n") {
		if fields := strings.Fields(f); len(fields) > 4 && strings.HasPrefix(fields[3], "/tmp/") && !strings.HasPrefix(fields[3], ro) && !strings.HasPrefix(fields[3], rw) {
			t.Errorf("a host path outside Spec.Mounts is mounted: %s", f)
		}
	}
}

func TestReadOnlyRoot(t *testing.T) {
	r := newRuntime(t, docker.Options{ReadOnlyRoot: true})
	h := start(t, r, sandbox.Spec{})
	if code, _, _ := sh(t, r, h, "echo x > /etc/new"); code == 0 {
		t.Error("a command wrote to a read-only root")
	}
	ctx := context.Background()
	if err := r.WriteFile(ctx, h, "/tmp/a/b.txt", strings.NewReader("in tmp"), 0o600); err != nil {
		t.Fatalf("WriteFile in the tmpfs: %v", err)
	}
	if fi, err := r.Stat(ctx, h, "/tmp/a/b.txt"); err != nil || fi.Size != 6 || fi.Mode.Perm() != 0o600 {
		t.Errorf("Stat in the tmpfs = %+v, %v", fi, err)
	}
}

func TestListAndImages(t *testing.T) {
	r := newRuntime(t, docker.Options{})
	ctx := context.Background()
	id := fmt.Sprintf("test-list-%d", time.Now().UnixNano())
	h := start(t, r, sandbox.Spec{ID: id})
	ids, err := r.List(ctx)
	if err != nil || !slices.Contains(ids, id) {
		t.Errorf("List = %q, %v; want it to hold %s", ids, err, id)
	}
	// Another server on the same engine lists its own containers only.
	other := newRuntime(t, docker.Options{Instance: "another-server"})
	if ids, err := other.List(ctx); err != nil || slices.Contains(ids, id) {
		t.Errorf("another instance's List = %q, %v; it holds %s", ids, err, id)
	}
	if err := r.Destroy(ctx, h); err != nil {
		t.Fatal(err)
	}
	if ids, err := r.List(ctx); err != nil || slices.Contains(ids, id) {
		t.Errorf("List after Destroy = %q, %v", ids, err)
	}
	_, err = r.Start(ctx, sandbox.Spec{ID: id + "-img", Image: "kiln-test/no-such-image:1"})
	if !errors.Is(err, sandbox.ErrUnsupported) || !strings.Contains(err.Error(), "kiln-test/no-such-image:1") {
		t.Errorf("Start with an image the engine lacks: %v; want ErrUnsupported naming it", err)
	}
}

func TestNoEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))
	_, err := docker.New(docker.Options{DefaultImage: testImage})
	if err == nil || !strings.Contains(err.Error(), "no Docker engine answers") || !strings.Contains(err.Error(), "start one") {
		t.Errorf("New without an engine: %v; want it to say how to start one", err)
	}
}

// TestExecd runs the kiln-execd binary that KILN_EXECD_BIN names.
func TestExecd(t *testing.T) {
	bin := os.Getenv("KILN_EXECD_BIN")
	if bin == "" {
		t.Skip("KILN_EXECD_BIN names no static kiln-execd binary to run in the sandboxes")
	}
	state := t.TempDir()
	var logMu sync.Mutex
	var logs strings.Builder
	r := newRuntime(t, docker.Options{ExecdPath: bin, StateDir: state, Log: func(l slog.Level, msg string) {
		t.Log(msg)
		logMu.Lock()
		logs.WriteString(msg + "\n")
		logMu.Unlock()
	}})
	if _, err := r.Start(context.Background(), sandbox.Spec{ID: "test-execd-no-token"}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("Start without an exec token: %v; want ErrInvalid", err)
	}
	id := fmt.Sprintf("test-execd-%d", time.Now().UnixNano())
	h := start(t, r, sandbox.Spec{ID: id, ExecToken: "kiln-test-token"})
	// The run folder is named by a short hash of the container's name.
	tokens, _ := filepath.Glob(filepath.Join(state, "*", "run", "token"))
	if len(tokens) != 1 {
		t.Fatalf("token files %v, want one", tokens)
	}
	if fi, err := os.Stat(tokens[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the token file = %v, %v; want mode 0600", fi, err)
	}
	conn, err := r.DialExec(context.Background(), h)
	if err != nil {
		t.Fatalf("DialExec: %v", err)
	}
	conn.Close()
	if code, _, _ := sh(t, r, h, "echo x > /kiln/bin/kiln-execd"); code == 0 {
		t.Error("a command wrote over kiln-execd")
	}
	// The run folder is the sandbox's to write: a socket it swaps for a
	// link to the host's Docker engine (or anything else outside the
	// sandbox) leads Kiln nowhere, and a delete still ends the sandbox.
	evil := start(t, r, sandbox.Spec{ID: id + "-evil", ExecToken: "kiln-test-token"})
	if code, _, errOut := sh(t, r, evil, "rm /kiln/run/execd.sock && ln -s /var/run/docker.sock /kiln/run/execd.sock"); code != 0 {
		t.Fatalf("planting the link: %s", errOut)
	}
	if c, err := r.DialExec(context.Background(), evil); err == nil {
		c.Close()
		t.Error("DialExec followed a link the sandbox planted to the Docker engine's socket")
	} else if !strings.Contains(err.Error(), "not served from inside the sandbox's container") || strings.Contains(err.Error(), "process") {
		// The error reaches the sandbox's holder: no host process ID in
		// it, only in the server's log.
		t.Errorf("DialExec through the planted link: %v; want it refused for a process outside the sandbox, without host details", err)
	}
	logMu.Lock()
	if !strings.Contains(logs.String(), "which is not in the sandbox's container") {
		t.Errorf("the log does not say which process served the planted socket:\n%s", logs.String())
	}
	logMu.Unlock()
	if err := r.Destroy(context.Background(), evil); err != nil {
		t.Fatalf("Destroy of the sandbox that planted the link: %v", err)
	}
	if out, _ := exec.Command("docker", "ps", "-q", "--filter", "label=io.kiln.sandbox="+id+"-evil").Output(); len(bytes.TrimSpace(out)) != 0 {
		t.Error("the sandbox that planted the link still runs after Destroy")
	}
	// A command's detached child, which must end with the sandbox.
	if code, _, _ := sh(t, r, h, "setsid sleep 1000 >/dev/null 2>&1 &"); code != 0 {
		t.Fatal("could not start a background process")
	}
	// The janitor is held off while the test looks into the retired
	// container; a slow machine gives it quiet enough to remove it first.
	docker.SetRetireQuiet(r, time.Hour)
	if err := r.Destroy(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	// The sandbox's processes have ended when Destroy returns; the
	// container waits, retired, with its init and kiln-execd alone.
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=io.kiln.sandbox="+id).Output()
	fields := strings.Fields(string(out))
	if err != nil || len(fields) != 1 {
		t.Fatalf("containers of the destroyed sandbox: %q, %v; want one, retired", out, err)
	}
	if ids, err := r.List(context.Background()); err != nil || slices.Contains(ids, id) {
		t.Errorf("List after Destroy = %q, %v", ids, err)
	}
	top, err := exec.Command("docker", "top", fields[0], "-o", "pid,comm").Output()
	if err != nil {
		t.Fatalf("docker top: %v", err)
	}
	var procs []string
	for _, line := range strings.Split(strings.TrimSpace(string(top)), "\n")[1:] {
		procs = append(procs, strings.Fields(line)[1])
	}
	if len(procs) != 2 || !slices.Contains(procs, "kiln-execd") || !slices.Contains(procs, "docker-init") {
		t.Errorf("processes in the destroyed sandbox: %q; want docker-init and kiln-execd alone", procs)
	}
	// Once the runtime is quiet the janitor removes it with its run folder.
	docker.SetRetireQuiet(r, 250*time.Millisecond)
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=io.kiln.sandbox="+id).Output()
		_, err := os.Stat(filepath.Dir(filepath.Dir(tokens[0])))
		if len(bytes.TrimSpace(out)) == 0 && errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the retired container (%q) or its run folder (%v) is still there", out, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// withToken is a runtime with kiln-execd whose Start gives every Spec an
// exec token, for the conformance suite, whose Specs have none.
type withToken struct{ *docker.Runtime }

func (w withToken) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Handle, error) {
	if spec.ExecToken == "" {
		spec.ExecToken = "kiln-test-token"
	}
	return w.Runtime.Start(ctx, spec)
}

// TestConformanceExecd: the suite again, with kiln-execd in the
// sandboxes (as kiln serve runs them), whose Destroy retires them.
func TestConformanceExecd(t *testing.T) {
	bin := os.Getenv("KILN_EXECD_BIN")
	if bin == "" {
		t.Skip("KILN_EXECD_BIN names no static kiln-execd binary to run in the sandboxes")
	}
	state := t.TempDir()
	newRuntime(t, docker.Options{}) // skips the whole suite without an engine
	sandboxtest.Run(t, func(t *testing.T) sandbox.Runtime {
		return withToken{newRuntime(t, docker.Options{ExecdPath: bin, StateDir: state})}
	})
}
