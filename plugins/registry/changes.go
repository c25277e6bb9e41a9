package registry

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kilnhq/kiln/plugins/integrity"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// changes compares the installed version of p with the folder at path,
// file by file (their integrity listings). The installed version's
// listing is the one kept beside it (a bundle's, which every load
// checks), else it is hashed; path's is listing when the caller has it,
// else it is hashed. When either cannot be hashed the lists are empty and
// Summary says why.
func (r *Registry) changes(p Preview, path string, listing []byte) *pluginapi.Changes {
	c := &pluginapi.Changes{Added: []string{}, Removed: []string{}, Changed: []string{}}
	was, _ := os.ReadFile(r.listingPath(p.ID, p.Installed))
	if was == nil {
		t, err := integrity.Tree(filepath.Join(r.cfg.Root, p.ID, p.Installed))
		if err != nil {
			c.Summary = "the installed version's files cannot be compared: " + err.Error()
			return c
		}
		was = t.Listing
	}
	if listing == nil {
		t, err := integrity.Tree(path)
		if err != nil {
			c.Summary = "the new version's files cannot be compared: " + err.Error()
			return c
		}
		listing = t.Listing
	}
	changed, added, removed := integrity.Compare(was, listing)
	c.Changed, c.Added, c.Removed = append(c.Changed, changed...), append(c.Added, added...), append(c.Removed, removed...)
	c.Summary = changeSummary(len(c.Changed), len(c.Added), len(c.Removed))
	return c
}

// changeSummary says in one line how many files changed, were added and
// were removed: "3 files changed, 1 added", "1 file added",
// "no files changed".
func changeSummary(changed, added, removed int) string {
	var parts []string
	for _, n := range []struct {
		n    int
		verb string
	}{{changed, "changed"}, {added, "added"}, {removed, "removed"}} {
		if n.n == 0 {
			continue
		}
		noun := ""
		if len(parts) == 0 {
			noun = " files"
			if n.n == 1 {
				noun = " file"
			}
		}
		parts = append(parts, fmt.Sprintf("%d%s %s", n.n, noun, n.verb))
	}
	if len(parts) == 0 {
		return "no files changed"
	}
	return strings.Join(parts, ", ")
}
