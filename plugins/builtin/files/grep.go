package files

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/grantfs"
)

// Limits of grep's output.
const (
	// MaxGrepMatches is the most matching lines grep returns.
	MaxGrepMatches = 200
	// maxGrepLine is the most characters of a matching line grep shows.
	maxGrepLine = 500
)

// errGrepFull ends a grep that found MaxGrepMatches lines.
var errGrepFull = errors.New("grep: enough matches")

var grepSpec = core.ToolSpec{
	Name: "grep",
	Description: "Searches text files for lines matching a regular expression (RE2 syntax, as in Go: no backreferences or lookaround) " +
		"and returns them as `path:line: text`, with 1-based line numbers, file by file in path order. " +
		"path is a folder to search recursively, or one file; glob keeps only the files it matches " +
		"(a pattern without / matches the file name, e.g. *.go; one with / the path relative to path, e.g. src/**/*.go). " +
		fmt.Sprintf("At most %d matching lines are returned, each cut to %d characters around the match. ", MaxGrepMatches, maxGrepLine) +
		fmt.Sprintf("Binary files, files over %d MiB and files Kiln refuses (several hard links, links out of a granted folder) are skipped and counted in a note. ", MaxTextFile>>20) +
		viewHelp,
	Schema: json.RawMessage(`{"type":"object","properties":{` +
		`"pattern":{"type":"string","description":"The regular expression (RE2), e.g. func \\w+Handler or TODO|FIXME."},` +
		`"path":{"type":"string","description":"The folder or file to search. Default: the working folder, or / (everything) without one."},` +
		`"glob":{"type":"string","description":"Only search files matching this glob, e.g. *.md or src/**/*.ts."},` +
		`"case_insensitive":{"type":"boolean","description":"Match regardless of case. Default false."}},` +
		`"required":["pattern"],"additionalProperties":false}`),
	Idempotent: true,
}

// skipped counts the files grep did not search, by reason.
type skipped struct {
	binary, large, linked, unreadable int
}

func (s skipped) String() string {
	var parts []string
	add := func(n int, one, many string) {
		switch {
		case n == 1:
			parts = append(parts, "1 "+one)
		case n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", n, many))
		}
	}
	add(s.binary, "binary file", "binary files")
	add(s.large, fmt.Sprintf("file over %d MiB", MaxTextFile>>20), fmt.Sprintf("files over %d MiB", MaxTextFile>>20))
	add(s.linked, "file with several hard links", "files with several hard links")
	add(s.unreadable, "file that could not be read", "files that could not be read")
	if len(parts) == 0 {
		return ""
	}
	return "[skipped " + strings.Join(parts, ", ") + "]"
}

func runGrep(ctx context.Context, env *view, args json.RawMessage) (string, error) {
	var a struct {
		Pattern         string `json:"pattern"`
		Path            string `json:"path"`
		Glob            string `json:"glob"`
		CaseInsensitive bool   `json:"case_insensitive"`
	}
	if err := decode("grep", args, &a); err != nil {
		return "", err
	}
	if a.Pattern == "" {
		return "", core.Errorf(core.EINVALID, "grep needs a pattern")
	}
	expr := a.Pattern
	if a.CaseInsensitive {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return "", core.Errorf(core.EINVALID, "the pattern is not a valid RE2 regular expression: %v", err)
	}
	if a.Glob != "" && !doublestar.ValidatePattern(a.Glob) {
		return "", core.Errorf(core.EINVALID, "%q is not a valid glob pattern (check its brackets and braces)", a.Glob)
	}
	t, err := resolve(env, a.Path)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	var skip skipped
	matches := 0
	err = walk(ctx, env, t, func(f found) error {
		if a.Glob != "" {
			name := relTo(t.path, f.path)
			if !strings.Contains(a.Glob, "/") {
				name = path.Base(f.path)
			}
			if !doublestar.MatchUnvalidated(a.Glob, name) {
				return nil
			}
		}
		if f.size > MaxTextFile {
			skip.large++
			return nil
		}
		data, err := readFound(f)
		switch {
		case errors.Is(err, grantfs.ErrLinked):
			skip.linked++
			return nil
		case err != nil:
			skip.unreadable++
			return nil
		case int64(len(data)) > MaxTextFile:
			skip.large++
			return nil
		case !core.IsText(data, true):
			skip.binary++
			return nil
		}
		for n := 1; len(data) > 0; n++ {
			line := data
			if i := bytes.IndexByte(data, '\n'); i >= 0 {
				line, data = data[:i], data[i+1:]
			} else {
				data = nil
			}
			line = bytes.TrimSuffix(line, []byte("\r"))
			loc := re.FindIndex(line)
			if loc == nil {
				continue
			}
			fmt.Fprintf(&out, "%s:%d: %s\n", f.path, n, excerpt(line, loc[0]))
			if matches++; matches == MaxGrepMatches {
				return errGrepFull
			}
		}
		return nil
	})
	full := errors.Is(err, errGrepFull)
	limited := errors.Is(err, errWalkLimit)
	if err != nil && !full && !limited {
		return "", err
	}
	var notes []string
	if full {
		notes = append(notes, fmt.Sprintf("[stopped at %d matching lines; narrow the pattern, path or glob]", MaxGrepMatches))
	}
	if limited {
		notes = append(notes, fmt.Sprintf("[stopped after visiting %d files and folders; give a narrower path]", MaxWalk))
	}
	if s := skip.String(); s != "" {
		notes = append(notes, s)
	}
	text := strings.TrimSuffix(out.String(), "\n")
	if matches == 0 {
		text = fmt.Sprintf("no lines match %q in %s", a.Pattern, t.path)
		if a.Glob != "" {
			text += fmt.Sprintf(" (files matching %q)", a.Glob)
		}
	}
	return strings.Join(append([]string{text}, notes...), "\n"), nil
}

// readFound reads a file a walk found, up to one byte over MaxTextFile.
func readFound(f found) ([]byte, error) {
	rc, err := f.open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, MaxTextFile+1))
}

// excerpt returns line as grep shows it: all of it when short, else
// maxGrepLine characters from a little before at (the match's start),
// marked where cut.
func excerpt(line []byte, at int) string {
	s := string(line)
	if utf8.RuneCountInString(s) <= maxGrepLine {
		return s
	}
	start := max(0, at-maxGrepLine/5)
	for start > 0 && !utf8.RuneStart(line[start]) {
		start--
	}
	out := firstRunes(s[start:], maxGrepLine)
	if len(out) < len(s)-start {
		out += "…"
	}
	if start > 0 {
		out = "…" + out
	}
	return out
}
