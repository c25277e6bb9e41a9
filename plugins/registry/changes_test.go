package registry

import "testing"

func TestChangeSummary(t *testing.T) {
	for _, c := range []struct {
		changed, added, removed int
		want                    string
	}{
		{0, 0, 0, "no files changed"},
		{3, 1, 0, "3 files changed, 1 added"},
		{1, 0, 0, "1 file changed"},
		{0, 1, 2, "1 file added, 2 removed"},
		{0, 0, 1, "1 file removed"},
		{2, 2, 1, "2 files changed, 2 added, 1 removed"},
	} {
		if got := changeSummary(c.changed, c.added, c.removed); got != c.want {
			t.Errorf("changeSummary(%d, %d, %d) = %q, want %q", c.changed, c.added, c.removed, got, c.want)
		}
	}
}
