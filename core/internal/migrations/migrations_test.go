package migrations

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	ms, err := Load(fstest.MapFS{
		"m/0002_b.sql": {Data: []byte("B")},
		"m/0001_a.sql": {Data: []byte("A")},
		"m/README":     {Data: []byte("not a migration")},
	}, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0] != (Migration{1, "0001_a.sql", "A"}) || ms[1] != (Migration{2, "0002_b.sql", "B"}) {
		t.Fatalf("Load = %+v", ms)
	}
	for _, tc := range []struct {
		files []string
		want  string
	}{
		{[]string{"0001_a.sql", "0003_c.sql"}, "want version 2"},
		{[]string{"0002_b.sql"}, "want version 1"},
		{[]string{"a.sql"}, "NNNN_name.sql"},
		{[]string{"0000_z.sql"}, "NNNN_name.sql"},
		{nil, "no migrations"},
	} {
		fsys := fstest.MapFS{}
		for _, f := range tc.files {
			fsys["m/"+f] = &fstest.MapFile{Data: []byte("x")}
		}
		if _, err := Load(fsys, "m"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%v) = %v, want an error with %q", tc.files, err, tc.want)
		}
	}
}
