package registry

import (
	"fmt"
	"strings"

	"github.com/kilnhq/kiln/plugins/integrity"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// changes compares the installed folder with the folder at path, file by
// file (their integrity listings). When either cannot be hashed the lists
// are empty and Summary says why.
func changes(installed, path string) *pluginapi.Changes {
	c := &pluginapi.Changes{Added: []string{}, Removed: []string{}, Changed: []string{}}
	was, err := integrity.Tree(installed)
	if err != nil {
		c.Summary = "the installed version's files cannot be compared: " + err.Error()
		return c
	}
	now, err := integrity.Tree(path)
	if err != nil {
		c.Summary = "the new version's files cannot be compared: " + err.Error()
		return c
	}
	a, b := listingMap(was.Listing), listingMap(now.Listing)
	// Both listings are sorted by path: so are the lists.
	for _, p := range listingPaths(was.Listing) {
		switch sum, ok := b[p]; {
		case !ok:
			c.Removed = append(c.Removed, p)
		case sum != a[p]:
			c.Changed = append(c.Changed, p)
		}
	}
	for _, p := range listingPaths(now.Listing) {
		if _, ok := a[p]; !ok {
			c.Added = append(c.Added, p)
		}
	}
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

// listingLines yields the (path, sum) of each line of an integrity
// listing.
func listingLines(listing []byte, f func(path, sum string)) {
	for line := range strings.Lines(string(listing)) {
		if sum, p, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "  "); ok {
			f(p, sum)
		}
	}
}

func listingMap(listing []byte) map[string]string {
	m := map[string]string{}
	listingLines(listing, func(p, sum string) { m[p] = sum })
	return m
}

func listingPaths(listing []byte) []string {
	var out []string
	listingLines(listing, func(p, _ string) { out = append(out, p) })
	return out
}

// listed returns the sha256 an integrity listing gives the file at path
// (slash-separated, relative), or "".
func listed(listing []byte, path string) string {
	sum := ""
	listingLines(listing, func(p, s string) {
		if p == path {
			sum = s
		}
	})
	return sum
}
