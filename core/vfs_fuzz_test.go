package core_test

import (
	"path"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
)

// FuzzCheckFilePath checks that every accepted virtual path is absolute,
// clean, a single line of UTF-8 and not the root, and that CheckFilePath
// never panics.
func FuzzCheckFilePath(f *testing.F) {
	for _, s := range []string{"/a", "/a/b.md", "/", "a", "/a/../b", "/a//b", "/a/", "/a\\b", "/a\nb", "/\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if core.CheckFilePath(p) != nil {
			return
		}
		if !strings.HasPrefix(p, "/") || p == "/" || path.Clean(p) != p || !utf8.ValidString(p) || strings.ContainsAny(p, "\\\n\r\x00") {
			t.Fatalf("accepted %q", p)
		}
	})
}
