package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/integrity"
)

// LoadSelf starts the built-in plugin of req as a process plugin whose
// entry is this very executable (os.Executable, symlinks resolved) run
// with args, a hidden command that serves the plugin with sdk/plugin's
// Serve: a built-in that needs a process of its own (the Docker socket)
// ships as the kiln binary re-executing itself. req.Manifest is the
// built-in's (runtime "builtin", no entry); the process gets the
// environment its permissions.env declares, opts.Env and
// KILN_PLUGIN_DATA, is restarted when it dies and reports its health, as
// an installed process plugin does (NewLoader).
//
// The entry's sha256 is this executable's, hashed at the first LoadSelf
// of the server and again only once the file changes (its fingerprint):
// the running binary is trusted as the built-ins compiled into it are.
// Every start of the process, the first and each restart, is checked
// against that sum as an installed plugin's is against its manifest, so
// that a kiln binary replaced under a running server (an upgrade) is not
// run as its plugin: the start fails with plugins.ErrChecksumMismatch.
func LoadSelf(ctx context.Context, req plugins.LoadRequest, args []string, opts Options) (plugins.Instance, error) {
	if req.Manifest == nil {
		return nil, errors.New("load built-in plugin: nil manifest")
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return nil, fmt.Errorf("load built-in plugin %s: this executable: %w", req.Manifest.ID, err)
	}
	sum, err := selfSum.of(exe)
	if err != nil {
		return nil, fmt.Errorf("load built-in plugin %s: hash %s: %w", req.Manifest.ID, exe, err)
	}
	m := *req.Manifest
	m.Runtime, m.Entry, m.SHA256 = plugins.RuntimeProcess, filepath.Base(exe), sum
	req.Dir, req.Manifest = filepath.Dir(exe), &m
	opts.Args = args
	return loader{opts}.Load(ctx, req)
}

// selfSum is this executable's sha256, kept while its fingerprint holds.
var selfSum executableSum

type executableSum struct {
	mu  sync.Mutex
	exe string
	fp  integrity.Fingerprint
	sum string
}

// of returns the sha256 of exe, hashing it unless it is the file hashed
// last time and its fingerprint is unchanged. A sum it keeps is also
// remembered in knownEntries, so that starting exe does not hash it
// again.
func (s *executableSum) of(exe string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fp := integrity.FingerprintOf(exe)
	if s.exe == exe && fp != (integrity.Fingerprint{}) && fp == s.fp {
		return s.sum, nil
	}
	sum, err := integrity.FileSum(filepath.Dir(exe), filepath.Base(exe))
	if err != nil {
		return "", err
	}
	if integrity.FingerprintOf(exe) == fp {
		s.exe, s.fp, s.sum = exe, fp, sum
		knownEntries.Remember(exe, sum, fp)
	}
	return sum, nil
}
