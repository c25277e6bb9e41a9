//go:build !linux

package process

import "os/exec"

// dieWithHost has no kernel support here; the plugin SDK's Serve exits
// when its parent process goes away (sdk/plugin).
func dieWithHost(*exec.Cmd) {}
