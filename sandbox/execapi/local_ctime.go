//go:build linux

package execapi

import (
	"syscall"
	"time"
)

// statCtime is the time of a file's last status change, the nearest to a
// creation time that stat(2) reports everywhere.
func statCtime(st *syscall.Stat_t) time.Time { return time.Unix(st.Ctim.Unix()) }
