package wasm

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
)

// description is what a Load that compiled, checked and described a
// module learned about it: enough to load the same module again without
// compiling or instantiating it until its first call. It is kept by the
// Host, and in Config.CacheDir beside the compiled code, keyed like that
// code (compiledKey: the module's sha256 and the memory limit).
//
// A description is taken to depend on the module's bytes only: the ABI
// asks kiln_describe for a fixed description, and the guest SDK builds it
// from the kinds passed to Serve. A module whose description changes from
// one instance to the next is described by its first.
type description struct {
	ABI int `json:"abi"` // the module's ABI version
	// Kinds are the module's descriptions of the kinds it serves, as
	// ABI 3's kiln_describe has them (Module.kinds).
	Kinds     map[string]json.RawMessage `json:"kinds"`
	MinMemory uint64                     `json:"min_memory"` // the memory of a fresh instance, in bytes
}

// describedDir is the folder of descriptions in a cache folder: one per
// format and wazero version, like wazero's own, since a description
// vouches that this wazero accepted the module. (Format v1 held ABI 2's
// tool list and provider description; v2 holds ABI 3's kinds.)
func describedDir(cacheDir string) string {
	return filepath.Join(cacheDir, "kiln-described-v2-"+wazeroVersion())
}

var wazeroVersion = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/tetratelabs/wazero" {
				if d.Replace != nil {
					d = d.Replace
				}
				return d.Version
			}
		}
	}
	return "unknown"
})

func (k compiledKey) file() string { return fmt.Sprintf("%s-%d.json", k.sha256, k.pages) }

// described returns the description of the module key, from memory or
// from the cache folder; false when there is none (or it is unreadable,
// for another ABI, or malformed: the caller then loads the module in full
// and describes it again).
func (h *Host) described(key compiledKey) (description, bool) {
	h.mu.Lock()
	d, ok := h.descriptions[key]
	h.mu.Unlock()
	if ok || h.cfg.CacheDir == "" {
		return d, ok
	}
	data, err := os.ReadFile(filepath.Join(describedDir(h.cfg.CacheDir), key.file()))
	if err != nil {
		return description{}, false
	}
	if err := json.Unmarshal(data, &d); err != nil || d.ABI < 1 || d.ABI > ABIVersion || len(d.Kinds) == 0 {
		return description{}, false
	}
	h.mu.Lock()
	h.descriptions[key] = d
	h.mu.Unlock()
	return d, true
}

// remember keeps the description of the module key, in memory and in the
// cache folder. A failure to write the file is logged: the next start
// then compiles the module at Load, as without a description.
func (h *Host) remember(key compiledKey, d description) {
	h.mu.Lock()
	h.descriptions[key] = d
	h.mu.Unlock()
	if h.cfg.CacheDir == "" {
		return
	}
	if err := writeFileAtomic(describedDir(h.cfg.CacheDir), key.file(), d); err != nil {
		h.cfg.Logger.Warn("wasm host: cache the description of a module", "sha256", key.sha256, "err", err)
	}
}

// writeFileAtomic writes v as JSON to dir/name through a temporary file
// and a rename, so a reader sees the whole file or none.
func writeFileAtomic(dir, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, name+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a successful rename there is nothing to remove
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, name))
}
