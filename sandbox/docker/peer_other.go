//go:build !linux

package docker

import (
	"errors"
	"net"
)

// servedFrom cannot check where a socket's peer runs on this system; the
// Docker runtime's sandboxes with kiln-execd are for Linux hosts.
func servedFrom(net.Conn, string) error {
	return errors.New("checking a socket's peer needs Linux")
}
