package marketplace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/kilnhq/kiln/core"
)

// Mirrored is what Mirror copied.
type Mirrored struct {
	// Verified is the upstream marketplace as Refresh verified it; its
	// Trust is what a client of the mirror starts from.
	Verified *Verified
	// Archives counts the archives in the mirror, Fetched those it
	// downloaded (the others were there already, with the right bytes).
	Archives, Fetched int
	// Upstream lists the versions whose index entry gives an absolute
	// URL ("calc@1.2.0 https://cdn.example/calc-1.2.0.tar.gz"): the mirror
	// holds a verified copy at ArchivePath, but the signed index still
	// points upstream, so a client of the mirror downloads them from
	// there.
	Upstream []string
}

// Mirror copies the marketplace name read through f into the folder out,
// an offline copy that clients verify exactly as the original: it is
// first verified as Refresh does against t, and then every file is
// checked before it is written. The index, its signature and the key
// rotations are copied byte for byte (they are signed); the log's entries
// are checked to hash to the signed tree head and its tiles rebuilt from
// them; every archive is checked against its size and sha256 and copied
// to the same relative path. An archive the index gives by absolute URL
// is checked and kept at ArchivePath, and reported in Upstream: the
// signed index cannot be rewritten to point at the copy.
//
// Mirror may be run again on the same folder to update it: archives and
// log entries already there are checked and kept, and the index and its
// signature are written last, so the folder holds a consistent previous
// state until then. Refusals are Refresh's, and ReasonNotLogged for log
// entries that do not hash to the signed tree head, ReasonArchive for an
// archive.
func Mirror(ctx context.Context, f Fetcher, name string, t Trust, out string, now time.Time) (*Mirrored, error) {
	v, err := Refresh(ctx, f, name, t, now)
	if err != nil {
		return nil, err
	}
	res := &Mirrored{Verified: v}
	log, err := mirrorLog(ctx, f, name, v.Trust.Tree, out, true)
	if err != nil {
		return nil, err
	}
	written := map[string]string{} // path to sha256
	for _, p := range v.Index.Plugins {
		for _, ver := range p.Versions {
			rel := ver.Artifact.URL
			if u, _ := artifactURL(rel); u != nil {
				rel = ArchivePath(p.Name, ver.Version)
				res.Upstream = append(res.Upstream, p.Name+"@"+ver.Version+" "+ver.Artifact.URL)
			}
			if sum, ok := written[rel]; ok {
				if sum != ver.Artifact.SHA256 {
					return nil, refuse(core.EINVALID, ReasonArchive, "marketplace %s: two archives with other bytes at %s", name, rel)
				}
				continue
			}
			fetched, err := mirrorArchive(ctx, f, out, rel, p.Name, ver)
			if err != nil {
				return nil, err
			}
			written[rel] = ver.Artifact.SHA256
			res.Archives++
			if fetched {
				res.Fetched++
			}
		}
	}
	if err := log.Write(out, 0); err != nil {
		return nil, err
	}
	rot, err := f.Fetch(ctx, RotationsFile, MaxRotationsSize)
	switch {
	case err == nil:
		if _, err := ParseRotations(rot); err != nil {
			return nil, inMarketplace(name, err)
		}
		if err := writeFile(out, RotationsFile, rot); err != nil {
			return nil, err
		}
	case !core.IsNotFound(err):
		return nil, inMarketplace(name, err)
	}
	if err := writeFile(out, IndexFile, v.Raw); err != nil {
		return nil, err
	}
	if err := writeFile(out, SignatureFile, v.Sig); err != nil {
		return nil, err
	}
	return res, nil
}

// mirrorLog reads the log of tree, its entries from out where they are
// (when local) or else through f, and checks them against the tree head.
// Entries in out that do not hash to it are read again through f.
func mirrorLog(ctx context.Context, f Fetcher, name string, tree Tree, out string, local bool) (*Log, error) {
	var log Log
	for i := range tree.Size {
		var rec []byte
		var err error
		if local {
			rec, err = os.ReadFile(filepath.Join(out, filepath.FromSlash(EntryPath(i))))
		}
		if !local || err != nil {
			if rec, err = f.Fetch(ctx, EntryPath(i), MaxRecordSize); err != nil {
				return nil, inMarketplace(name, err)
			}
		}
		if err := log.Add(rec); err != nil {
			if local {
				return mirrorLog(ctx, f, name, tree, out, false)
			}
			return nil, inMarketplace(name, fmt.Errorf("%s: %w", EntryPath(i), err))
		}
	}
	if got, err := log.Tree(); err != nil || got != tree {
		if local {
			return mirrorLog(ctx, f, name, tree, out, false)
		}
		return nil, refuse(core.EINVALID, ReasonNotLogged, "marketplace %s: the log's %d entries do not hash to the signed tree head", name, tree.Size)
	}
	return &log, nil
}

// mirrorArchive makes out/rel the verified archive of version v of the
// plugin name, downloading it unless it is there already. It reports
// whether it downloaded it.
func mirrorArchive(ctx context.Context, f Fetcher, out, rel, name string, v Version) (bool, error) {
	dest := filepath.Join(out, filepath.FromSlash(rel))
	if have, err := os.Open(dest); err == nil {
		_, err = CopyArtifact(io.Discard, have, name, v)
		have.Close()
		if err == nil {
			return false, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+path.Base(rel)+".tmp-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	_, err = FetchArtifact(ctx, f, tmp, name, v)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dest)
	}
	return true, err
}
