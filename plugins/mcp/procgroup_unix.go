//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd as the leader of a process group of its own, so
// that what it starts (npx starts node) ends with it.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup ends what is left of cmd's process group.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil && cmd.Process.Pid > 0 {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
