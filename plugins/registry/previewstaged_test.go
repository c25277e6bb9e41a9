package registry_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/integrity"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// TestPreviewStaged: the preview of a folder its writer hashed takes its
// listing instead of hashing the folder again, and is the folder's
// Preview; a listing that is not the source's digest is refused.
func TestPreviewStaged(t *testing.T) {
	ctx := context.Background()
	r := newEnv(t).open(t)
	install(t, r, writeBundle(t, "team.review"))
	next := setVersion(t, writeBundle(t, "team.review"), "1.1.0")
	os.WriteFile(filepath.Join(next, "skills", "a.md"), []byte("a"), 0o644)
	tree, err := integrity.Tree(next)
	if err != nil {
		t.Fatal(err)
	}
	src := &pluginapi.Source{Marketplace: "acme", Version: "1.1.0", ArchiveSHA256: strings.Repeat("a", 64), Digest: tree.Digest, IndexVersion: 1}
	want, err := r.Preview(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.PreviewStaged(ctx, next, src, tree.Listing)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("staged preview %+v, %v\nwant the folder's %+v", got, err, want)
	}
	if !slices.Equal(got.Changes.Added, []string{"skills/a.md"}) {
		t.Fatalf("changes: %+v", got.Changes)
	}
	// A file written after the listing: the staged preview does not
	// hash the folder again (Install's one pass over it would refuse it).
	os.WriteFile(filepath.Join(next, "skills", "b.md"), []byte("b"), 0o644)
	if got, err := r.PreviewStaged(ctx, next, src, tree.Listing); err != nil || !slices.Equal(got.Changes.Added, []string{"skills/a.md"}) {
		t.Fatalf("the staged preview hashed the folder again: %+v, %v", got.Changes, err)
	}
	bad := *src
	bad.Digest = strings.Repeat("b", 64)
	if _, err := r.PreviewStaged(ctx, next, &bad, tree.Listing); core.ErrorCode(err) != core.EINVALID {
		t.Fatalf("a listing that is not the digest: %v", err)
	}
}
