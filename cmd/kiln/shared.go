package main

import (
	"cmp"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kilnhq/kiln/plugins/providers/hub"
	"github.com/kilnhq/kiln/plugins/registry"
)

// Replicas share their configuration through a folder they all mount,
// KILN_SHARED_ROOT: the plugins (their files, record, lock file and data
// folders), providers.json, .mcp.json, the custom skills, the
// marketplaces and the key that seals webhook secrets. What one replica
// changes there the others take up within about two seconds: the skills
// folder has its own watch, and watchShared polls the rest.

// shared is the folder of the configuration replicas share: SharedRoot,
// or the data root when there is none.
func (c serveConfig) shared() string { return cmp.Or(c.SharedRoot, c.DataRoot) }

// sharedPollInterval is how often watchShared looks at the shared files.
const sharedPollInterval = time.Second

// sharedFile is a file of the shared root watchShared follows, and what
// to do when it changes.
type sharedFile struct {
	path   string
	reload func(context.Context) error
	seen   fileStamp
}

// fileStamp tells a file's versions apart: each write of these files
// renames a new file over the old, so its inode changes, and its time and
// size usually do too. The zero stamp is a missing file.
type fileStamp struct {
	ino, size int64
	mtime     time.Time
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	st := fileStamp{size: fi.Size(), mtime: fi.ModTime()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = int64(sys.Ino)
	}
	return st
}

// watchShared reloads, until ctx ends, what another replica changed in
// the shared root: the plugins' record (reg.Sync), the providers'
// settings (models.Reload) and the user's MCP servers (mcp.Sync). A
// change this replica made is reloaded too, which changes nothing.
func watchShared(ctx context.Context, root string, reg *registry.Registry, models *hub.Hub, mcp *userMCP, log *slog.Logger) {
	files := []*sharedFile{
		{path: filepath.Join(root, "plugins", "registry.json"), reload: reg.Sync},
		{path: filepath.Join(root, "providers.json"), reload: func(context.Context) error { return models.Reload() }},
		{path: filepath.Join(root, mcpConfigFile), reload: func(context.Context) error { return mcp.Sync() }},
	}
	for _, f := range files {
		f.seen = stampOf(f.path)
	}
	t := time.NewTicker(sharedPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, f := range files {
			now := stampOf(f.path)
			if now == f.seen {
				continue
			}
			f.seen = now
			if err := f.reload(ctx); err != nil && ctx.Err() == nil {
				log.Warn("reload a shared file another replica changed", "path", f.path, "err", err)
			}
		}
	}
}
