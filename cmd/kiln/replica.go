package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// lockDataRoot takes <data>/kiln.lock for as long as the process lives
// (the kernel lets go of it when the process ends, however it ends): one
// kiln serve per data root, so that the replica ID below names one
// process.
func lockDataRoot(dir string) (release func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "kiln.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the data root: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another kiln serve is using the data root %s; give each server a data root of its own (--data)", dir)
		}
		return nil, fmt.Errorf("lock the data root: %w", err)
	}
	return func() { f.Close() }, nil
}

// replicaID is this server's name in the leases of the runs it drives:
// <data>/replica-id, made at the first start (the host's name and a
// random suffix) and kept, so that a restarted server takes back the
// runs it was driving at once. The data root's lock makes it one
// process's.
func replicaID(dir string) (string, error) {
	path := filepath.Join(dir, "replica-id")
	b, err := os.ReadFile(path)
	if err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("replica id: %w", err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "kiln"
	}
	suffix := make([]byte, 4)
	rand.Read(suffix)
	id := host + "-" + hex.EncodeToString(suffix)
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("replica id: %w", err)
	}
	return id, nil
}
