package files

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kilnhq/kiln/core"
)

var readSpec = core.ToolSpec{
	Name: "read_file",
	Description: "Reads a text file and returns its lines numbered like `cat -n`: the line number, a tab, the line. " +
		fmt.Sprintf("offset is the 1-based number of the first line to return (default 1); limit is how many lines (default %d). ", DefaultLimit) +
		fmt.Sprintf("Lines longer than %d characters are cut with a marker, and one call returns at most %d KiB; ", MaxLineChars, MaxReadOutput>>10) +
		"when more lines follow, a note at the end gives the offset to read on from, so files of any size can be read in pages. " +
		"Binary files (with NUL bytes, or not UTF-8) are refused with their type and size. " +
		"The line numbers are not part of the file: leave them out of edit_file's old_string. " + viewHelp,
	Schema: json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"The file to read, e.g. /grants/docs/README.md or notes/plan.md (relative to the working folder)."},` +
		`"offset":{"type":"integer","minimum":1,"description":"The 1-based number of the first line to return. Default 1."},` +
		fmt.Sprintf(`"limit":{"type":"integer","minimum":1,"description":"How many lines to return. Default %d."}},`, DefaultLimit) +
		`"required":["path"],"additionalProperties":false}`),
	Idempotent: true,
}

func runRead(ctx context.Context, env *view, args json.RawMessage) (string, error) {
	var a struct {
		Path   string `json:"path"`
		Offset *int   `json:"offset"`
		Limit  *int   `json:"limit"`
	}
	if err := decode("read_file", args, &a); err != nil {
		return "", err
	}
	offset, limit := 1, DefaultLimit
	if a.Offset != nil {
		offset = *a.Offset
	}
	if a.Limit != nil {
		limit = *a.Limit
	}
	switch {
	case a.Path == "":
		return "", core.Errorf(core.EINVALID, "read_file needs the path of a file")
	case offset < 1:
		return "", core.Errorf(core.EINVALID, "offset is the 1-based number of the first line: 1 or more, not %d", offset)
	case limit < 1:
		return "", core.Errorf(core.EINVALID, "limit is a number of lines: 1 or more, not %d", limit)
	}
	t, err := resolve(env, a.Path)
	if err != nil {
		return "", err
	}
	f, err := openFile(env, t)
	if err != nil {
		return "", err
	}
	defer f.Close()
	txt, head, ok, err := newText(f)
	if err != nil {
		return "", pathErr(t.path, err)
	}
	if !ok {
		return "", core.Errorf(core.EINVALID, "%s", binaryMessage(t.path, f.size, f.mime, head))
	}
	if len(head) == 0 {
		return t.path + " is empty (0 bytes)", nil
	}
	size := core.PageSize(ctx, MaxReadOutput)
	p, err := readPage(txt, offset, limit, size)
	if err != nil {
		return "", pathErr(t.path, err)
	}
	if p.last < p.first {
		return "", core.Errorf(core.EINVALID, "offset %d is past the end of %s, which has %d lines", offset, t.path, p.total)
	}
	switch {
	case p.full:
		return p.text + fmt.Sprintf("[output cut at %s after line %d; read on with offset=%d]", core.FormatBytes(int64(size)), p.last, p.last+1), nil
	case p.more:
		return p.text + fmt.Sprintf("[lines %d-%d shown; more follow: read on with offset=%d]", p.first, p.last, p.last+1), nil
	}
	return strings.TrimSuffix(p.text, "\n"), nil
}
