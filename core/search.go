package core

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Search semantics, shared by every Store and by Highlight: a text is a
// sequence of words (runs of letters and digits); a word matches a term
// when it starts with it, ignoring case and diacritics ("Café" matches
// "cafe" and "caf"), or, for a term shorter than MinPrefix, when it is
// the term (so "ka" finds the word "ka", not the half of all words that
// start with it); a search matches a thread when its title or the text of
// one of its user or assistant messages has a matching word for every
// term.

// MinPrefix is the length, in characters, from which a term also matches
// the words it starts.
const MinPrefix = 3

// MaxSearchTerms bounds the words of a search that count; the rest are
// ignored.
const MaxSearchTerms = 16

// SearchTerms returns the terms of a search: its words, folded (lower
// case, no diacritics), each once, at most MaxSearchTerms. A search
// without letters or digits has none, and matches nothing.
func SearchTerms(q string) []string {
	var out []string
	for _, w := range words(q) {
		t := fold(q[w[0]:w[1]])
		if t == "" || slices.Contains(out, t) {
			continue
		}
		out = append(out, t)
		if len(out) == MaxSearchTerms {
			break
		}
	}
	return out
}

// words returns the byte ranges of the words of s.
func words(s string) [][2]int {
	var out [][2]int
	start := -1
	for i, r := range s {
		in := unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
		switch {
		case in && start < 0:
			start = i
		case !in && start >= 0:
			out = append(out, [2]int{start, i})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, [2]int{start, len(s)})
	}
	return out
}

// SearchWords returns the words of text as a search sees them: folded
// (lower case, no diacritics), in order, with repeats. A Store that keeps
// its own index of texts (core/postgres) indexes these, and matches them
// with TermMatches's rule.
func SearchWords(text string) []string {
	ws := words(text)
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		if f := fold(text[w[0]:w[1]]); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// TermMatches reports whether a folded word matches a term.
func TermMatches(word, term string) bool {
	if utf8.RuneCountInString(term) < MinPrefix {
		return word == term
	}
	return strings.HasPrefix(word, term)
}

// TextMatches reports whether every one of terms matches a word of text
// (TermMatches), as a search matches a title or a message text: the
// rule of a store without a full-text index. No terms match nothing.
func TextMatches(text string, terms []string) bool {
	if len(terms) == 0 {
		return false
	}
	found := make([]bool, len(terms))
	left := len(terms)
	for _, w := range words(text) {
		f := fold(text[w[0]:w[1]])
		for i, t := range terms {
			if !found[i] && TermMatches(f, t) {
				found[i] = true
				if left--; left == 0 {
					return true
				}
			}
		}
	}
	return false
}

// fold lowers a word and drops its diacritics.
func fold(w string) string {
	ascii := true
	for i := 0; i < len(w) && ascii; i++ {
		ascii = w[i] < utf8.RuneSelf
	}
	if ascii {
		return strings.ToLower(w)
	}
	var b strings.Builder
	for _, r := range norm.NFD.String(w) {
		if unicode.Is(unicode.Mn, r) {
			continue
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// SnippetPart is a run of a snippet's text; Match marks a run of words
// that matched the search.
type SnippetPart struct {
	Text  string `json:"text"`
	Match bool   `json:"match,omitempty"`
}

// SearchMatch says where a search result matched: in its title or in one
// of its messages, with a snippet of that text around the first match.
type SearchMatch struct {
	In           string        `json:"in"` // SearchInTitle or SearchInMessage
	MessageIndex int           `json:"message_index,omitempty"`
	Snippet      []SnippetPart `json:"snippet"`
}

// Where a search matched.
const (
	SearchInTitle   = "title"
	SearchInMessage = "message"
)

// Snippet sizes, in words around the first match and in runes at most.
const (
	snippetBefore = 8
	snippetAfter  = 24
	snippetRunes  = 240
)

// Highlight returns the snippet of text for terms: from about
// snippetBefore words before the first matching word to snippetAfter
// after it, at most snippetRunes runes, with "…" where it cuts, white
// space as single spaces, and the matching words marked. Without a match
// it is the start of the text.
func Highlight(text string, terms []string) []SnippetPart {
	ws := words(text)
	match := make([]bool, len(ws))
	first := -1
	for i, w := range ws {
		f := fold(text[w[0]:w[1]])
		for _, t := range terms {
			if TermMatches(f, t) {
				match[i] = true
				break
			}
		}
		if match[i] && first < 0 {
			first = i
		}
	}
	var parts []SnippetPart
	push := func(s string, m bool) {
		if s == "" {
			return
		}
		if n := len(parts); n > 0 && parts[n-1].Match == m {
			parts[n-1].Text += s
			return
		}
		parts = append(parts, SnippetPart{Text: s, Match: m})
	}
	lo, hi := max(first-snippetBefore, 0), min(max(first, 0)+snippetAfter, len(ws))
	pos := 0
	if lo > 0 {
		push("… ", false)
		pos = ws[lo][0]
	}
	for i := lo; i < hi; i++ {
		push(spaceRun(text[pos:ws[i][0]]), false)
		push(text[ws[i][0]:ws[i][1]], match[i])
		pos = ws[i][1]
	}
	if hi == len(ws) {
		push(spaceRun(text[pos:]), false)
	} else {
		push(" …", false)
	}
	if len(parts) > 0 {
		parts[0].Text = strings.TrimLeftFunc(parts[0].Text, unicode.IsSpace)
		parts[len(parts)-1].Text = strings.TrimRightFunc(parts[len(parts)-1].Text, unicode.IsSpace)
	}
	parts = slices.DeleteFunc(parts, func(p SnippetPart) bool { return p.Text == "" })
	return clipParts(parts, snippetRunes)
}

// spaceRun turns the text between two words into what the snippet shows:
// its punctuation, with any run of white space as one space.
func spaceRun(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	if space {
		b.WriteByte(' ')
	}
	return b.String()
}

// clipParts cuts parts to at most n runes, ending with "…" when it cuts.
func clipParts(parts []SnippetPart, n int) []SnippetPart {
	for i, p := range parts {
		r := []rune(p.Text)
		if len(r) <= n {
			n -= len(r)
			continue
		}
		parts[i].Text = string(r[:n]) + "…"
		return parts[:i+1]
	}
	return parts
}
