package pluginapi

import (
	"encoding/json"
	"strings"
	"testing"
)

var (
	sumA = strings.Repeat("a", 64)
	sumB = strings.Repeat("b", 64)
)

const goodLock = `{
  "version": 1,
  "plugins": [
    {"id": "calc", "version": "1.0.0", "runtime": "wasm", "sha256": "` + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" + `", "digest": "` + "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" + `", "pinned": true},
    {"id": "team.review", "version": "2.0.0-rc.1+build.5", "runtime": "data", "sha256": "` + "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" + `", "digest": "` + "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" + `", "pinned": false,
     "source": {"marketplace": "example", "archive_sha256": "` + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" + `", "index_version": 7}}
  ]
}`

func TestParseLock(t *testing.T) {
	l, err := ParseLock([]byte(goodLock))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Plugins) != 2 || l.Plugins[0].ID != "calc" || !l.Plugins[0].Pinned || l.Plugins[0].Digest != sumB ||
		l.Plugins[1].Source == nil || l.Plugins[1].Source.IndexVersion != 7 || l.Plugins[1].Source.ArchiveSHA256 != sumA {
		t.Errorf("parsed %+v", l)
	}
	if l, err := ParseLock([]byte(`{"version":1}`)); err != nil || l.Plugins == nil || len(l.Plugins) != 0 {
		t.Errorf("a lock of nothing: %+v, %v", l, err)
	}
}

func TestParseLockRefusals(t *testing.T) {
	plugin := func(fields string) string {
		return `{"version":1,"plugins":[{"id":"calc","version":"1.0.0","runtime":"wasm","sha256":"` + sumA + `","digest":"` + sumB + `"` + fields + `}]}`
	}
	for _, c := range []struct {
		name, data, text string
	}{
		{"not JSON", `{`, "lock file: unexpected end of JSON input"},
		{"newer", `{"version":2,"plugins":[]}`, "version 2, written by a newer Kiln"},
		{"no version", `{"plugins":[]}`, "version 0 is not a lock file version"},
		{"unknown field", `{"version":1,"plugins":[],"extra":1}`, `unknown field "extra"`},
		{"trailing data", `{"version":1,"plugins":[]} {}`, "after top-level value"},
		{"bad id", strings.Replace(plugin(""), `"calc"`, `"Calc"`, 1), `plugins[0] ("Calc"): id must be`},
		{"bad version", strings.Replace(plugin(""), `"1.0.0"`, `"1.0.0 "`, 1), `version "1.0.0 " is not a semantic version`},
		{"no runtime", strings.Replace(plugin(""), `"wasm"`, `""`, 1), "runtime is missing"},
		{"bad sha256", strings.Replace(plugin(""), sumA, "AB", 1), "sha256 must be 64 lowercase hex digits"},
		{"bad digest", strings.Replace(plugin(""), sumB, "x", 1), "digest must be 64 lowercase hex digits"},
		{"source without marketplace", plugin(`,"source":{"archive_sha256":"` + sumA + `","index_version":1}`), "source has no marketplace"},
		{"source bad archive", plugin(`,"source":{"marketplace":"m","archive_sha256":"","index_version":1}`), "source archive_sha256 must be"},
		{"source bad commit", plugin(`,"source":{"marketplace":"m","archive_sha256":"` + sumA + `","index_version":0,"commit":"HEAD"}`), "source commit must be a git commit id"},
		{"unsorted", `{"version":1,"plugins":[{"id":"b","version":"1.0.0","runtime":"wasm","sha256":"` + sumA + `","digest":""},{"id":"a","version":"1.0.0","runtime":"wasm","sha256":"` + sumA + `","digest":""}]}`, `plugins[1] ("a"): not sorted by id`},
		{"twice", `{"version":1,"plugins":[{"id":"a","version":"1.0.0","runtime":"wasm","sha256":"` + sumA + `","digest":""},{"id":"a","version":"1.0.0","runtime":"wasm","sha256":"` + sumA + `","digest":""}]}`, "listed twice"},
		{"too large", `{"version":1,"plugins":[]}` + strings.Repeat(" ", MaxLockSize), "larger than 4 MiB"},
	} {
		l, err := ParseLock([]byte(c.data))
		if err == nil || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %+v, %v; want an error mentioning %q", c.name, l, err, c.text)
		}
	}
}

// FuzzParseLock: ParseLock never panics, and what it accepts it writes
// back as a lock it accepts again, the same.
func FuzzParseLock(f *testing.F) {
	f.Add([]byte(goodLock))
	f.Add([]byte(`{"version":1,"plugins":[]}`))
	f.Add([]byte(`{"version":1,"plugins":[{"id":"a","version":"1.0.0","runtime":"data","sha256":"` + sumA + `","digest":"","pinned":false,"source":null}]}`))
	f.Add([]byte(`{"version":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseLock(data)
		if err != nil {
			return
		}
		out, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseLock(out)
		if err != nil {
			t.Fatalf("ParseLock accepted %q but not its own rewrite %s: %v", data, out, err)
		}
		if out2, _ := json.Marshal(again); string(out2) != string(out) {
			t.Fatalf("rewrite changed: %s then %s", out, out2)
		}
	})
}
