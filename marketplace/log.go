package marketplace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/kilnhq/kiln/core"
)

// LogHeight is the height of the log's hash tiles: a full tile holds 256
// hashes.
const LogHeight = 8

// LogDir is the log's folder in a published marketplace: entries at
// log/entry/<n>, hash tiles at log/<tlog.Tile.Path()>.
const LogDir = "log"

// MaxRecordSize bounds a log entry: a statement's first four lines.
const MaxRecordSize = 1 << 10

// maxTileSize is a full tile's size in bytes.
const maxTileSize = (1 << LogHeight) * tlog.HashSize

// ErrLogProof is wrapped by every failure of CheckInclusion and
// CheckConsistency that means the log does not prove what it should, as
// opposed to a tile that cannot be fetched.
var ErrLogProof = errors.New("the log does not prove it")

// EntryPath is the path of the log's entry n in a published marketplace.
func EntryPath(n int64) string { return LogEntryDir + "/" + strconv.FormatInt(n, 10) }

// TilePath is the path of tile t in a published marketplace.
func TilePath(t tlog.Tile) string { return LogDir + "/" + t.Path() }

// Log is a marketplace's log as its publisher or a mirror holds it: every
// record and the hashes of the Merkle tree over them, in memory. It is a
// tlog.HashReader. The zero Log is empty and ready to use.
type Log struct {
	records [][]byte
	hashes  []tlog.Hash // indexed by tlog.StoredHashIndex
}

// LoadLog reads the first n entries of the log published under dir
// (dir/log/entry/0 ... n-1) and rebuilds their hashes. Entries past n are
// left alone: they were written by a build that failed before it signed
// them, and the next Append replaces them.
func LoadLog(dir string, n int64) (*Log, error) {
	var l Log
	for i := range n {
		rec, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(EntryPath(i))))
		if err != nil {
			return nil, fmt.Errorf("read log: %w", err)
		}
		if err := l.Add(rec); err != nil {
			return nil, fmt.Errorf("read log entry %d: %w", i, err)
		}
	}
	return &l, nil
}

// Add appends record to the log in memory.
func (l *Log) Add(record []byte) error {
	if len(record) > MaxRecordSize {
		return core.Errorf(core.EINVALID, "a log record is larger than %d bytes", MaxRecordSize)
	}
	hs, err := tlog.StoredHashes(l.Size(), record, l)
	if err != nil {
		return err
	}
	l.records = append(l.records, bytes.Clone(record))
	l.hashes = append(l.hashes, hs...)
	return nil
}

// Size is the number of records.
func (l *Log) Size() int64 { return int64(len(l.records)) }

// Record returns record n, which must be below Size.
func (l *Log) Record(n int64) []byte { return l.records[n] }

// Tree returns the log's tree head.
func (l *Log) Tree() (Tree, error) {
	if l.Size() == 0 {
		return Tree{}, nil
	}
	h, err := tlog.TreeHash(l.Size(), l)
	if err != nil {
		return Tree{}, err
	}
	return Tree{Size: l.Size(), Hash: h.String()}, nil
}

// ReadHashes returns the stored hashes at indexes (tlog.HashReader).
func (l *Log) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(l.hashes)) {
			return nil, fmt.Errorf("log hash %d is not stored (have %d)", x, len(l.hashes))
		}
		out[i] = l.hashes[x]
	}
	return out, nil
}

// Write writes the entries from from to Size-1 and the tiles a reader of
// the tree of Size needs beyond those of the tree of size from, under
// dir/log. Entries and full tiles never change once written; a partial
// tile's path names its width, so older trees' tiles stay readable.
func (l *Log) Write(dir string, from int64) error {
	for i := from; i < l.Size(); i++ {
		if err := writeFile(dir, EntryPath(i), l.records[i]); err != nil {
			return err
		}
	}
	for _, t := range tlog.NewTiles(LogHeight, from, l.Size()) {
		data, err := tlog.ReadTileData(t, l)
		if err != nil {
			return err
		}
		if err := writeFile(dir, TilePath(t), data); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes data to dir/rel through a temporary file renamed into
// place, so a reader never sees half a file.
func writeFile(dir, rel string, data []byte) error {
	name := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(name), "."+path.Base(rel)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", rel, err)
	}
	return nil
}

// TileReader reads a marketplace's hash tiles through a Fetcher
// (tlog.TileReader). tlog's interface carries no context, so a TileReader
// holds the one of the refresh it serves.
type TileReader struct {
	ctx context.Context
	f   Fetcher
}

// NewTileReader returns a TileReader over f for the duration of ctx.
func NewTileReader(ctx context.Context, f Fetcher) *TileReader {
	return &TileReader{ctx: ctx, f: f}
}

// Height returns LogHeight.
func (r *TileReader) Height() int { return LogHeight }

// ReadTiles fetches the tiles, each of exactly its width's size. A fetch
// failure is returned as a *tileFetchError.
func (r *TileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		data, err := r.f.Fetch(r.ctx, TilePath(t), maxTileSize)
		if err != nil {
			return nil, &tileFetchError{err}
		}
		if len(data) != t.W*tlog.HashSize {
			return nil, fmt.Errorf("%s has %d bytes, not %d", TilePath(t), len(data), t.W*tlog.HashSize)
		}
		out[i] = data
	}
	return out, nil
}

// SaveTiles does nothing: tiles are read again on every refresh.
func (r *TileReader) SaveTiles([]tlog.Tile, [][]byte) {}

// tileFetchError is a failure to fetch a tile, as opposed to a tile that
// does not prove what it should.
type tileFetchError struct{ err error }

func (e *tileFetchError) Error() string { return e.err.Error() }
func (e *tileFetchError) Unwrap() error { return e.err }

// hashReader returns a tlog.HashReader over the tiles of tree, read
// through f: every hash it returns is proven to be in tree.
func hashReader(ctx context.Context, f Fetcher, tree Tree) (tlog.HashReader, error) {
	h, err := tlog.ParseHash(tree.Hash)
	if err != nil {
		return nil, fmt.Errorf("tree hash %q is not a base64 sha256: %w", tree.Hash, ErrLogProof)
	}
	return tlog.TileHashReader(tlog.Tree{N: tree.Size, Hash: h}, NewTileReader(ctx, f)), nil
}

// CheckInclusion checks, with a proof read from f's tiles, that record is
// entry n of the log whose tree head is tree. A failure to read a tile
// is returned as is; every other failure wraps ErrLogProof.
func CheckInclusion(ctx context.Context, f Fetcher, tree Tree, n int64, record []byte) error {
	if n < 0 || n >= tree.Size {
		return fmt.Errorf("entry %d is not in a tree of size %d: %w", n, tree.Size, ErrLogProof)
	}
	hr, err := hashReader(ctx, f, tree)
	if err != nil {
		return err
	}
	p, err := tlog.ProveRecord(tree.Size, n, hr)
	if err != nil {
		return proofError(err)
	}
	th, _ := tlog.ParseHash(tree.Hash)
	if err := tlog.CheckRecord(p, tree.Size, th, n, tlog.RecordHash(record)); err != nil {
		return fmt.Errorf("entry %d is not this statement's record (%v): %w", n, err, ErrLogProof)
	}
	return nil
}

// CheckConsistency checks, with a proof read from f's tiles, that the
// log whose tree head is now extends the one whose tree head was old:
// every record of old is in now, in the same place. An empty old is
// extended by any log. A failure to read a tile is returned as is; every
// other failure wraps ErrLogProof.
func CheckConsistency(ctx context.Context, f Fetcher, old, now Tree) error {
	switch {
	case old.Size == 0:
		return nil
	case now.Size < old.Size:
		return fmt.Errorf("the log has %d entries, fewer than the %d seen before: %w", now.Size, old.Size, ErrLogProof)
	case now.Size == old.Size:
		if now.Hash != old.Hash {
			return fmt.Errorf("the log of %d entries has tree hash %s, not %s as seen before: %w", now.Size, now.Hash, old.Hash, ErrLogProof)
		}
		return nil
	}
	oh, err := tlog.ParseHash(old.Hash)
	if err != nil {
		return fmt.Errorf("tree hash %q is not a base64 sha256: %w", old.Hash, ErrLogProof)
	}
	hr, err := hashReader(ctx, f, now)
	if err != nil {
		return err
	}
	p, err := tlog.ProveTree(now.Size, old.Size, hr)
	if err != nil {
		return proofError(err)
	}
	nh, _ := tlog.ParseHash(now.Hash)
	if err := tlog.CheckTree(p, now.Size, nh, old.Size, oh); err != nil {
		return fmt.Errorf("the log of %d entries does not extend the one of %d entries seen before (%v): %w", now.Size, old.Size, err, ErrLogProof)
	}
	return nil
}

// proofError returns a tile fetch failure as is and words any other
// failure to build a proof: tiles that do not hash to the tree.
func proofError(err error) error {
	var fe *tileFetchError
	if errors.As(err, &fe) {
		return fe.err
	}
	return fmt.Errorf("the log's tiles do not match its tree head (%v): %w", err, ErrLogProof)
}
