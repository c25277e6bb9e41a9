package builtin

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/kilnhq/kiln/core"
)

var lineErrRe = regexp.MustCompile(`^script line ([0-9]+): .`)

// FuzzParseScript checks that ParseScript never panics, that every error is
// EINVALID and names a line of the script, and that accepted scripts
// survive a render/parse round trip.
func FuzzParseScript(f *testing.F) {
	for _, seed := range []string{
		"",
		"\n\n",
		"# only a comment",
		sampleScript,
		"text hello world",
		"text  spaced   out  \r\n",
		"tool echo {}",
		"tool echo {\"a\": [1, {\"b\": null}], \"c\": \"x y\"}",
		"tool a {}\ntool b {\"ms\": 5}\ntext done",
		"parallel\n  tool a {}\n  tool b {}\nend",
		"parallel\ntool a {}\nend\nparallel\n# c\ntool b {}\nend\ntext bye",
		"parallel\nend",
		"parallel\ntool a {}",
		"end",
		"text hi\ntool a {}",
		"tool echo []",
		"tool echo {\"a\":1} trailing",
		"tool ec\u00e9ho {}",
		"tool a:b.c-d_e {\"s\": \"\u2028\"}",
		"text \u00a0nbsp\u00a0",
		"\ttool\ta\t{}\t",
		"tool x {\"a\":\"\\u0000\"}",
		"\xff\xfe",
		"unknown directive here",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, script string) {
		lines, err := ParseScript(script)
		if err != nil {
			if core.ErrorCode(err) != core.EINVALID {
				t.Fatalf("error %v has code %s, want EINVALID", err, core.ErrorCode(err))
			}
			m := lineErrRe.FindStringSubmatch(core.ErrorMessage(err))
			if m == nil {
				t.Fatalf("error %q does not start with a line number", core.ErrorMessage(err))
			}
			n, _ := strconv.Atoi(m[1])
			if total := strings.Count(script, "\n") + 1; n < 1 || n > total {
				t.Fatalf("error names line %d of a %d-line script", n, total)
			}
			return
		}
		for _, l := range lines {
			if (l.Text == "") == (len(l.Calls) == 0) {
				t.Fatalf("turn %+v must have text or calls, not both or neither", l)
			}
			if l.Text != strings.TrimFunc(l.Text, unicode.IsSpace) {
				t.Fatalf("text %q has surrounding space", l.Text)
			}
			for _, c := range l.Calls {
				if !validToolName(c.Name) || len(c.Args) == 0 || c.Args[0] != '{' {
					t.Fatalf("bad call %+v", c)
				}
				var buf bytes.Buffer
				if err := json.Compact(&buf, c.Args); err != nil || !bytes.Equal(buf.Bytes(), c.Args) {
					t.Fatalf("args %q are not compact JSON", c.Args)
				}
			}
		}
		rendered := RenderScript(lines)
		again, err := ParseScript(rendered)
		if err != nil {
			t.Fatalf("rendered script %q does not parse: %v", rendered, err)
		}
		if !reflect.DeepEqual(withoutLines(lines), withoutLines(again)) {
			t.Fatalf("round trip changed the script:\n%q\n%+v\n%+v", rendered, lines, again)
		}
		if RenderScript(again) != rendered {
			t.Fatalf("rendering is not stable: %q vs %q", RenderScript(again), rendered)
		}
	})
}

func withoutLines(lines []ScriptLine) []ScriptLine {
	out := make([]ScriptLine, len(lines))
	for i, l := range lines {
		l.Line = 0
		out[i] = l
	}
	return out
}

// FuzzCountWords checks that the token estimate counts the words
// strings.Fields finds, for any bytes, valid UTF-8 or not.
func FuzzCountWords(f *testing.F) {
	for _, seed := range []string{"", " ", "one", " two  words ", "a\u00a0b\u0085c\td\ne", "\xff x \xfe", "日本 語"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := countWords(s), len(strings.Fields(s)); got != want {
			t.Fatalf("countWords(%q) = %d, strings.Fields finds %d", s, got, want)
		}
	})
}
