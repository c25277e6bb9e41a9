package files

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
)

// snippetContext is how many lines edit_file shows around its change.
const snippetContext = 3

// maxSnippet is the most lines of edit_file's snippet.
const maxSnippet = 40

var writeSpec = core.ToolSpec{
	Name: "write_file",
	Description: "Creates a file, or replaces all of an existing one, with content; missing parent folders are created. " +
		fmt.Sprintf("content is at most %d MiB. ", core.MaxFileSize>>20) +
		"Use it for new files and complete rewrites; for a change inside an existing file, prefer edit_file. " +
		"A granted folder must be writable; attachments and skill files are read-only; " +
		fmt.Sprintf("a memory file is at most %d KiB. ", MaxMemoryFile>>10) + viewHelp,
	Schema: json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"The file to write, e.g. /notes/plan.md or /grants/docs/summary.md."},` +
		`"content":{"type":"string","description":"The file's whole new content."}},` +
		`"required":["path","content"],"additionalProperties":false}`),
	Idempotent: false,
}

var editSpec = core.ToolSpec{
	Name: "edit_file",
	Description: "Replaces an exact string in a text file with another. old_string must occur exactly once in the file, " +
		"so give enough surrounding text to make it unique, or set replace_all to replace every occurrence. " +
		"It matches exactly, whitespace and indentation included: copy it from read_file's output without the line numbers and the tab after them. " +
		"old_string and new_string must differ. Returns the changed lines with their numbers. " +
		fmt.Sprintf("Files over %d MiB cannot be edited. ", MaxTextFile>>20) + viewHelp,
	Schema: json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"The file to edit."},` +
		`"old_string":{"type":"string","description":"The exact text to replace; it must occur exactly once unless replace_all is set."},` +
		`"new_string":{"type":"string","description":"The text to put in its place (different from old_string)."},` +
		`"replace_all":{"type":"boolean","description":"Replace every occurrence of old_string instead of exactly one. Default false."}},` +
		`"required":["path","old_string","new_string"],"additionalProperties":false}`),
	Idempotent: false,
}

func runWrite(ctx context.Context, env *view, args json.RawMessage) (string, error) {
	var a struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
	}
	if err := decode("write_file", args, &a); err != nil {
		return "", err
	}
	switch {
	case a.Path == "":
		return "", core.Errorf(core.EINVALID, "write_file needs the path of a file")
	case a.Content == nil:
		return "", core.Errorf(core.EINVALID, `write_file needs content ("" for an empty file)`)
	case len(*a.Content) > core.MaxFileSize:
		return "", core.Errorf(core.ELIMIT, "content is %d bytes, over the limit of %d MiB", len(*a.Content), core.MaxFileSize>>20)
	}
	t, err := resolve(env, a.Path)
	if err != nil {
		return "", err
	}
	if err := writeFile(env, t, []byte(*a.Content)); err != nil {
		return "", err
	}
	return fmt.Sprintf("wrote %s (%s) to %s", sizeText(int64(len(*a.Content))), lineCount(*a.Content), t.path), nil
}

func runEdit(ctx context.Context, env *view, args json.RawMessage) (string, error) {
	var a struct {
		Path       string `json:"path"`
		OldString  string `json:"old_string"`
		NewString  string `json:"new_string"`
		ReplaceAll bool   `json:"replace_all"`
	}
	if err := decode("edit_file", args, &a); err != nil {
		return "", err
	}
	switch {
	case a.Path == "":
		return "", core.Errorf(core.EINVALID, "edit_file needs the path of a file")
	case a.OldString == "":
		return "", core.Errorf(core.EINVALID, "old_string is empty; to create a file or replace all of it, use write_file")
	case a.OldString == a.NewString:
		return "", core.Errorf(core.EINVALID, "old_string and new_string are the same; the edit would change nothing")
	}
	t, err := resolve(env, a.Path)
	if err != nil {
		return "", err
	}
	if err := readOnly(t); err != nil {
		return "", err
	}
	limit := int64(MaxTextFile)
	switch t.kind {
	case kindMemory:
		limit = MaxMemoryFile
	case kindVirtual:
		limit = core.MaxFileSize
	}
	data, err := readAll(env, t, limit)
	if err != nil {
		return "", err
	}
	if !core.IsText(data, true) {
		return "", core.Errorf(core.EINVALID, "%s", binaryMessage(t.path, int64(len(data)), "", data))
	}
	text := string(data)
	switch n := strings.Count(text, a.OldString); {
	case n == 0:
		hint := "read the file and copy the text exactly, without read_file's line numbers"
		if strings.Contains(text, "\r\n") && !strings.Contains(a.OldString, "\r\n") && strings.Contains(a.OldString, "\n") {
			hint = `the file's lines end in "\r\n"`
		}
		return "", core.Errorf(core.EINVALID, "old_string not found in %s (%s)", t.path, hint)
	case n > 1 && !a.ReplaceAll:
		return "", core.Errorf(core.EINVALID, "old_string occurs %d times in %s; give more context or set replace_all", n, t.path)
	}
	at := strings.Index(text, a.OldString)
	n := 1
	if a.ReplaceAll {
		n = strings.Count(text, a.OldString)
		text = strings.ReplaceAll(text, a.OldString, a.NewString)
	} else {
		text = text[:at] + a.NewString + text[at+len(a.OldString):]
	}
	if int64(len(text)) > limit {
		return "", core.Errorf(core.ELIMIT, "%s would be %d bytes after the edit, over the limit of %d", t.path, len(text), limit)
	}
	if err := writeFile(env, t, []byte(text)); err != nil {
		return "", err
	}
	what := "1 occurrence"
	if n > 1 {
		what = fmt.Sprintf("%d occurrences (the first shown)", n)
	}
	return fmt.Sprintf("edited %s: replaced %s. The lines around the change now read:\n%s", t.path, what, snippet(text, at, len(a.NewString))), nil
}

// snippet returns the lines of text around the n bytes at offset at,
// numbered like read_file's output.
func snippet(text string, at, n int) string {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	first := strings.Count(text[:at], "\n")            // 0-based line of the change's start
	last := first + strings.Count(text[at:at+n], "\n") // and of its end
	from := max(0, first-snippetContext)
	to := min(len(lines)-1, last+snippetContext, from+maxSnippet-1)
	var b strings.Builder
	for i := from; i <= to; i++ {
		line := lines[i]
		if utf8.RuneCountInString(line) > MaxLineChars {
			line = firstRunes(line, MaxLineChars) + cutMarker
		}
		b.WriteString(numbered(i+1, strings.TrimSuffix(line, "\r")))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// lineCount says how many lines s has: "3 lines", "1 line".
func lineCount(s string) string {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	if n == 1 {
		return "1 line"
	}
	return fmt.Sprintf("%d lines", n)
}
