package process

import (
	"os/exec"
	"syscall"
)

// dieWithHost makes the kernel kill the plugin when the host process
// dies, even by SIGKILL, so no plugin outlives its server.
func dieWithHost(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
