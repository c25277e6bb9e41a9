package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/kilnhq/kiln/core"
)

// MaxGlobResults is the most paths glob returns.
const MaxGlobResults = 1000

var globSpec = core.ToolSpec{
	Name: "glob",
	Description: "Finds files whose path matches a glob pattern and returns their paths, sorted, one per line. " +
		"`*` matches within one path segment, `**` any number of folders (`**/*.go` is every Go file at any depth), " +
		"`?` one character, `[abc]` a class and `{a,b}` either alternative. " +
		"A relative pattern is matched against paths relative to path; an absolute pattern (/grants/docs/**/*.md) is matched from /, and path is then ignored. " +
		"Only files are returned, not folders; symbolic links to folders are not followed. " +
		fmt.Sprintf("At most %d paths are returned. ", MaxGlobResults) + viewHelp,
	Schema: json.RawMessage(`{"type":"object","properties":{` +
		`"pattern":{"type":"string","description":"The glob pattern, e.g. **/*.md or src/**/*_test.go."},` +
		`"path":{"type":"string","description":"The folder to search. Default: the working folder, or / (everything) without one."}},` +
		`"required":["pattern"],"additionalProperties":false}`),
	Idempotent: true,
}

func runGlob(ctx context.Context, env *view, args json.RawMessage) (string, error) {
	var a struct {
		Pattern string `json:"pattern"`
		Path    string `json:"path"`
	}
	if err := decode("glob", args, &a); err != nil {
		return "", err
	}
	if a.Pattern == "" {
		return "", core.Errorf(core.EINVALID, "glob needs a pattern, such as **/*.md")
	}
	base, pattern := globBase(a.Path, a.Pattern)
	if !doublestar.ValidatePattern(pattern) {
		return "", core.Errorf(core.EINVALID, "%q is not a valid glob pattern (check its brackets and braces)", a.Pattern)
	}
	t, err := resolve(env, base)
	if err != nil {
		return "", err
	}
	var matches []string
	err = walk(ctx, env, t, func(f found) error {
		if doublestar.MatchUnvalidated(pattern, relTo(t.path, f.path)) {
			matches = append(matches, f.path)
		}
		return nil
	})
	limited := errors.Is(err, errWalkLimit)
	if err != nil && !limited {
		return "", err
	}
	var notes []string
	if limited {
		notes = append(notes, fmt.Sprintf("[stopped after visiting %d files and folders; give a narrower path or pattern]", MaxWalk))
	}
	if len(matches) == 0 {
		return strings.Join(append([]string{fmt.Sprintf("no files match %q in %s", a.Pattern, t.path)}, notes...), "\n"), nil
	}
	slices.Sort(matches)
	if len(matches) > MaxGlobResults {
		notes = append(notes, fmt.Sprintf("[showing the first %d of %d matches, in path order; narrow the pattern]", MaxGlobResults, len(matches)))
		matches = matches[:MaxGlobResults]
	}
	return strings.Join(append(matches, notes...), "\n"), nil
}

// globBase splits a pattern into the folder to walk and the pattern to
// match below it: an absolute pattern from /, a relative one from dir;
// the pattern's literal leading folders join the folder, so that
// "src/**/*.go" walks src only.
func globBase(dir, pattern string) (string, string) {
	if strings.HasPrefix(pattern, "/") {
		dir, pattern = "/", strings.TrimLeft(pattern, "/")
	}
	lit, rest := doublestar.SplitPattern(pattern)
	if lit == "." || lit == "" {
		return dir, pattern
	}
	if dir == "" {
		return lit, rest
	}
	return path.Join(dir, lit), rest
}
