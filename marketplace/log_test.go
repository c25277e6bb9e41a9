package marketplace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/kilnhq/kiln/core"
)

// growLog appends n records made by record to a log published in dir,
// writing after each append as Build does, and returns the log and its
// tree head after each append (heads[i] has size i+1).
func growLog(t *testing.T, dir string, n int, record func(i int) string) (*Log, []Tree) {
	t.Helper()
	var l Log
	var heads []Tree
	for i := range n {
		from := l.Size()
		if err := l.Add([]byte(record(i))); err != nil {
			t.Fatal(err)
		}
		if err := l.Write(dir, from); err != nil {
			t.Fatal(err)
		}
		tree, err := l.Tree()
		if err != nil {
			t.Fatal(err)
		}
		heads = append(heads, tree)
	}
	return &l, heads
}

func rec(i int) string { return fmt.Sprintf("kiln marketplace v1\nacme\n%d\n%064x\n", i+1, i) }

func TestLogProofs(t *testing.T) {
	dir := t.TempDir()
	const n = 300 // past one full tile
	l, heads := growLog(t, dir, n, rec)
	f, err := NewFetcher(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if got := string(readFile(t, dir, EntryPath(299))); got != rec(299) {
		t.Errorf("entry 299 = %q", got)
	}
	for _, p := range []string{"log/tile/8/0/000", "log/tile/8/0/001.p/44", "log/tile/8/1/000.p/1", "log/tile/8/0/000.p/7"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("tile %s: %v", p, err)
		}
	}
	for _, size := range []int{1, 2, 7, 255, 256, 257, 300} {
		tree := heads[size-1]
		for i := 0; i < size; i += 1 + i/8 {
			if err := CheckInclusion(ctx, f, tree, int64(i), []byte(rec(i))); err != nil {
				t.Fatalf("entry %d in tree %d: %v", i, size, err)
			}
		}
		err := CheckInclusion(ctx, f, tree, 0, []byte(rec(1)))
		if size > 1 && !errors.Is(err, ErrLogProof) {
			t.Errorf("another record as entry 0 of tree %d: %v", size, err)
		}
		for _, old := range []int{1, 3, 200, 256, size} {
			if old > size {
				continue
			}
			if err := CheckConsistency(ctx, f, heads[old-1], tree); err != nil {
				t.Errorf("tree %d after %d: %v", size, old, err)
			}
		}
	}
	if err := CheckConsistency(ctx, f, heads[9], heads[4]); !errors.Is(err, ErrLogProof) || !strings.Contains(err.Error(), "fewer") {
		t.Errorf("a shorter log: %v", err)
	}
	if err := CheckConsistency(ctx, f, Tree{}, heads[4]); err != nil {
		t.Errorf("from nothing: %v", err)
	}

	// The publisher reloads its log from the entries.
	again, err := LoadLog(dir, n)
	if err != nil {
		t.Fatal(err)
	}
	if tree, _ := again.Tree(); tree != heads[n-1] || string(again.Record(5)) != string(l.Record(5)) {
		t.Errorf("reloaded tree %+v, want %+v", tree, heads[n-1])
	}
	if _, err := LoadLog(dir, n+1); err == nil {
		t.Error("LoadLog past the last entry: no error")
	}
}

func TestLogRewrittenHistory(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	_, headsA := growLog(t, dirA, 20, rec)
	_, headsB := growLog(t, dirB, 30, func(i int) string {
		if i == 5 {
			return rec(500)
		}
		return rec(i)
	})
	fb, _ := NewFetcher(dirB, nil)
	ctx := context.Background()
	if err := CheckConsistency(ctx, fb, headsA[3], headsB[29]); err != nil {
		t.Errorf("the common prefix: %v", err)
	}
	for _, old := range []int{6, 10, 20} {
		if err := CheckConsistency(ctx, fb, headsA[old-1], headsB[29]); !errors.Is(err, ErrLogProof) {
			t.Errorf("tree %d of the other history: %v", old, err)
		}
	}
	if err := CheckConsistency(ctx, fb, headsA[9], headsB[9]); !errors.Is(err, ErrLogProof) || !strings.Contains(err.Error(), "tree hash") {
		t.Errorf("same size, other hash: %v", err)
	}
	if err := CheckInclusion(ctx, fb, headsB[29], 5, []byte(rec(5))); !errors.Is(err, ErrLogProof) {
		t.Errorf("the replaced record: %v", err)
	}
}

func TestLogTiles(t *testing.T) {
	dir := t.TempDir()
	_, heads := growLog(t, dir, 3, rec)
	f, _ := NewFetcher(dir, nil)
	ctx := context.Background()
	// A tile cut short, or one from a missing file, fails the proof or the
	// read: the first is the log's fault, the second says not found.
	tile := "log/tile/8/0/000.p/3"
	data := readFile(t, dir, tile)
	writeFiles(t, dir, map[string]string{tile: string(data[:len(data)-1])})
	if err := CheckInclusion(ctx, f, heads[2], 1, []byte(rec(1))); !errors.Is(err, ErrLogProof) || !strings.Contains(err.Error(), tile+" has 95 bytes, not 96") {
		t.Errorf("a short tile: %v", err)
	}
	os.Remove(filepath.Join(dir, tile))
	if err := CheckInclusion(ctx, f, heads[2], 1, []byte(rec(1))); errors.Is(err, ErrLogProof) || !core.IsNotFound(err) {
		t.Errorf("a missing tile: %v", err)
	}
	if err := CheckInclusion(ctx, f, Tree{Size: 3, Hash: "nope"}, 1, []byte(rec(1))); !errors.Is(err, ErrLogProof) {
		t.Errorf("a bad tree hash: %v", err)
	}
	var l Log
	if err := l.Add(make([]byte, MaxRecordSize+1)); err == nil {
		t.Error("an oversized record: accepted")
	}
	if tree, err := l.Tree(); err != nil || tree != (Tree{}) {
		t.Errorf("empty log's tree = %+v, %v", tree, err)
	}
	if p := TilePath(tlog.Tile{H: 8, L: 1, N: 1234, W: 3}); p != "log/tile/8/1/x001/234.p/3" {
		t.Errorf("TilePath = %q", p)
	}
}
