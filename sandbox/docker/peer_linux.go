package docker

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
)

// servedFrom checks that the process that listens at the other end of
// conn (its credentials as of listen(2), SO_PEERCRED) belongs to the
// container id: the engine names every cgroup of a container's processes
// after the container's ID, whether it runs them in /docker/<id> or in
// docker-<id>.scope.
func servedFrom(conn net.Conn, id string) error {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return errors.New("not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if credErr != nil {
		return fmt.Errorf("the peer's credentials: %w", credErr)
	}
	if cred.Pid <= 0 {
		return errors.New("it is served by a process this runtime cannot see")
	}
	cgroups, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cred.Pid))
	if err != nil {
		return fmt.Errorf("the cgroups of the process serving it: %w", err)
	}
	if !strings.Contains(string(cgroups), id) {
		return fmt.Errorf("it is served by process %d, which is not in the sandbox's container", cred.Pid)
	}
	return nil
}
