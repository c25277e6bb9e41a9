package marketplace

import (
	"slices"
	"strings"
)

// searchDoc is a plugin prepared for search: its fields lowercased once,
// when its index is loaded, so that a query only compares strings.
type searchDoc struct {
	name, desc, author string
	tags, kinds        []string
}

func newSearchDoc(p *Plugin) searchDoc {
	d := searchDoc{
		name:   strings.ToLower(p.Name),
		desc:   strings.ToLower(p.Description),
		author: strings.ToLower(p.Author),
	}
	for _, t := range p.Tags {
		d.tags = append(d.tags, strings.ToLower(t))
	}
	for _, k := range p.Kinds {
		d.kinds = append(d.kinds, strings.ToLower(k))
	}
	return d
}

// score ranks a plugin for a query of lowercase terms: every term must
// match somewhere (0 otherwise). A term scores most as the whole name,
// then as a prefix of it, a part of it, a tag or kind, the author, and
// least inside the description. An empty query matches every plugin
// with 1.
func (d searchDoc) score(terms []string) int {
	if len(terms) == 0 {
		return 1
	}
	total := 0
	for _, t := range terms {
		s := 0
		switch {
		case d.name == t:
			s = 100
		case strings.HasPrefix(d.name, t):
			s = 60
		case strings.Contains(d.name, t):
			s = 40
		case slices.Contains(d.tags, t) || slices.Contains(d.kinds, t):
			s = 30
		case containsPart(d.tags, t) || containsPart(d.kinds, t):
			s = 20
		case strings.Contains(d.author, t):
			s = 15
		case strings.Contains(d.desc, t):
			s = 10
		}
		if s == 0 {
			return 0
		}
		total += s
	}
	return total
}

func containsPart(list []string, t string) bool {
	for _, s := range list {
		if strings.Contains(s, t) {
			return true
		}
	}
	return false
}

// queryTerms splits a search text into lowercase terms.
func queryTerms(q string) []string {
	return strings.Fields(strings.ToLower(q))
}
