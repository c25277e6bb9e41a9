package shscript

import (
	"io/fs"
	"strings"
	"testing"
)

func TestTest(t *testing.T) {
	files := map[string]File{
		"file":  {Mode: 0o644, Size: 1},
		"empty": {Mode: 0o644},
		"exe":   {Mode: 0o755, Size: 1},
		"ro":    {Mode: 0o444, Size: 1},
		"dir":   {Mode: fs.ModeDir | 0o755},
	}
	stat := func(name string) (File, bool) {
		f, ok := files[name]
		return f, ok
	}
	for _, c := range []struct {
		argv string
		code int
		msg  string
	}{
		{"test", 1, ""},
		{"test -n", 0, ""},
		{"test -e file", 0, ""},
		{"test -w ro", 1, ""},
		{"test -r ro", 0, ""},
		{"test -x dir", 0, ""},
		{"test ! -f dir", 0, ""},
		{"test ! ! -f dir", 1, ""},
		{"test -n a -a -z b -o -e exe", 0, ""},
		{"test -n a -o -z b -a -e missing", 0, ""},
		{"test ( -n a -o -z b ) -a -e missing", 1, ""},
		{"test ( -e missing )", 1, ""},
		{"test ( -e file", 2, "test: closing paren expected"},
		{"test = = =", 0, ""},
		{"test -f file -a", 2, "test: argument expected"},
		{"test a b", 2, "test: a: unary operator expected"},
		{"test a b c d e", 2, "test: b: unexpected operator"},
		{"test 1 -gt x", 2, "test: x: integer expression expected"},
		{"test  7  -eq 7", 0, ""},
		{"[ -d dir ]", 0, ""},
		{"[ -d dir", 2, "[: missing ]"},
		{"[", 2, "[: missing ]"},
		{"[ ]", 1, ""},
	} {
		code, msg := Test(strings.Fields(c.argv), stat)
		if code != c.code || msg != c.msg {
			t.Errorf("%s = %d, %q; want %d, %q", c.argv, code, msg, c.code, c.msg)
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, c := range []struct {
		s    string
		old  fs.FileMode
		want fs.FileMode
		bad  bool
	}{
		{s: "755", want: 0o755},
		{s: "0700", old: 0o777, want: 0o700},
		{s: "1777", want: fs.ModeSticky | 0o777},
		{s: "4755", want: fs.ModeSetuid | 0o755},
		{s: "u+x", old: 0o644, want: 0o744},
		{s: "+x", old: 0o644, want: 0o755},
		{s: "+w", old: 0o444, want: 0o644},
		{s: "go-rwx", old: 0o755, want: 0o700},
		{s: "a=r,u+w", old: 0o777, want: 0o644},
		{s: "a+X", old: fs.ModeDir | 0o600, want: 0o711},
		{s: "a+X", old: 0o600, want: 0o600},
		{s: "o+t", old: fs.ModeDir | 0o777, want: fs.ModeSticky | 0o777},
		{s: "u=rwx,g=rx,o=", old: 0o000, want: 0o750},
		{s: "", bad: true}, {s: "bogus", bad: true}, {s: "8", bad: true}, {s: "17777", bad: true},
		{s: "u", bad: true}, {s: "u+q", bad: true}, {s: "75x", bad: true},
	} {
		got, err := ParseMode(c.s, c.old)
		if c.bad {
			if err == nil {
				t.Errorf("ParseMode(%q) = %v; want an error", c.s, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseMode(%q, %v) = %v, %v; want %v", c.s, c.old, got, err, c.want)
		}
	}
}
