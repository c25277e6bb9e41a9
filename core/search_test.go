package core_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
)

func TestSearchTerms(t *testing.T) {
	for q, want := range map[string][]string{
		"Deploy the API":       {"deploy", "the", "api"},
		"  café, CAFÉ! naïve ": {"cafe", "naive"},
		`"quoted" OR NOT*`:     {"quoted", "or", "not"},
		"100% a_c":             {"100", "a", "c"},
		"!!! ***":              nil,
		"":                     nil,
		"日本語 テスト":              {"日本語", "テスト"},
	} {
		if got := core.SearchTerms(q); !slices.Equal(got, want) {
			t.Errorf("SearchTerms(%q) = %q, want %q", q, got, want)
		}
	}
	many := strings.Repeat("w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15 w16 w17 w18 ", 3)
	if n := len(core.SearchTerms(many)); n != core.MaxSearchTerms {
		t.Errorf("%d terms, want at most %d", n, core.MaxSearchTerms)
	}
}

func show(parts []core.SnippetPart) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Match {
			fmt.Fprintf(&b, "[%s]", p.Text)
		} else {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

func TestHighlight(t *testing.T) {
	long := strings.Repeat("filler ", 40) + "the Deployment failed:\n\n  rollback   done " + strings.Repeat("tail ", 40)
	for _, tc := range []struct {
		text  string
		terms []string
		want  string
	}{
		{"Deploy the API", []string{"deploy"}, "[Deploy] the API"},
		{"Please DEPLOY them, deploy!", []string{"dep"}, "Please [DEPLOY] them, [deploy]!"},
		{"Café au lait", []string{"cafe", "lait"}, "[Café] au [lait]"},
		{"  spaced\n\nout\ttext  ", []string{"out"}, "spaced [out] text"},
		{"no match here", []string{"zebra"}, "no match here"},
		{"de Deploy a b", []string{"de"}, "[de] Deploy a b"}, // short terms are whole words
		{long, []string{"deploy", "rollback"}, "… filler filler filler filler filler filler filler the [Deployment] failed: [rollback] done tail tail tail tail tail tail tail tail tail tail tail tail tail tail tail tail tail tail tail tail …"},
	} {
		if got := show(core.Highlight(tc.text, tc.terms)); got != tc.want {
			t.Errorf("Highlight(%q, %q)\n got %q\nwant %q", tc.text, tc.terms, got, tc.want)
		}
	}
	huge := strings.Repeat("x", 1000)
	if got := []rune(show(core.Highlight(huge, nil))); len(got) > 241 || got[len(got)-1] != '…' {
		t.Errorf("a 1000-rune word: %d runes", len(got))
	}
}

func FuzzHighlight(f *testing.F) {
	for _, s := range []string{"Deploy the API", "café", "", "\x00\xff", "a b c d e f g"} {
		f.Add(s, "dep caf")
	}
	f.Fuzz(func(t *testing.T, text, q string) {
		parts := core.Highlight(text, core.SearchTerms(q))
		n := 0
		for i, p := range parts {
			if p.Text == "" {
				t.Fatalf("empty part %d of %+v", i, parts)
			}
			if i > 0 && parts[i-1].Match == p.Match {
				t.Fatalf("parts %d and %d of %+v are of one kind", i-1, i, parts)
			}
			n += len([]rune(p.Text))
		}
		if n > 242 {
			t.Fatalf("snippet of %d runes", n)
		}
	})
}

func TestSearchWords(t *testing.T) {
	for text, want := range map[string][]string{
		"Deploy the API, deploy!": {"deploy", "the", "api", "deploy"},
		"Café naïve 100% a_c":     {"cafe", "naive", "100", "a", "c"},
		"!!! ***":                 {},
		"日本語 テスト":                 {"日本語", "テスト"},
	} {
		if got := core.SearchWords(text); !slices.Equal(got, want) {
			t.Errorf("SearchWords(%q) = %q, want %q", text, got, want)
		}
	}
}

// FuzzSearchWords: a text matches terms (TextMatches) exactly when each
// term matches one of its SearchWords, the rule an index of those words
// answers by.
func FuzzSearchWords(f *testing.F) {
	f.Add("Deploy the API", "dep api")
	f.Add("Café au lait", "CAFE")
	f.Add("de Deploy", "de")
	f.Fuzz(func(t *testing.T, text, q string) {
		terms := core.SearchTerms(q)
		ws := core.SearchWords(text)
		all := len(terms) > 0
		for _, term := range terms {
			all = all && slices.ContainsFunc(ws, func(w string) bool { return core.TermMatches(w, term) })
		}
		if got := core.TextMatches(text, terms); got != all {
			t.Fatalf("TextMatches(%q, %q) = %v; by its words %q: %v", text, terms, got, ws, all)
		}
	})
}
