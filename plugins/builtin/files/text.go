package files

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
)

// Limits of read_file's output.
const (
	// DefaultLimit is how many lines read_file returns when the call
	// gives no limit.
	DefaultLimit = 2000
	// MaxLineChars is the longest line read_file and grep show, in
	// characters; longer lines are cut with a marker.
	MaxLineChars = 2000
	// MaxReadOutput is the most text one read_file call returns, in
	// bytes; the note at its end says where to go on. With the note it
	// stays within core.DefaultMaxToolResult; a server that keeps less of
	// a result gets smaller pages (core.PageSize).
	MaxReadOutput = 248 << 10
)

// sniffLen is how much of a file decides whether it is text.
const sniffLen = 8 << 10

// cutMarker ends a line cut at MaxLineChars.
var cutMarker = fmt.Sprintf(" [… line cut at %d characters]", MaxLineChars)

// binaryMessage says a file is not text, with its size and media type
// (mime when known, else sniffed from head).
func binaryMessage(path string, size int64, mime string, head []byte) string {
	if mime == "" {
		mime = http.DetectContentType(head)
	}
	return fmt.Sprintf("%s is a binary file (%s, %s); the file tools read text only", path, mime, sizeText(size))
}

// sizeText is a size for people and models: "512 bytes", "3.4 KiB".
func sizeText(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// text is a file read as text, by lines.
type text struct {
	br *bufio.Reader
}

// newText sniffs the start of r and returns it as text, or ok false with
// the start when it is binary.
func newText(r io.Reader) (t *text, head []byte, ok bool, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err = br.Peek(sniffLen)
	complete := err == io.EOF
	if err != nil && !complete && err != bufio.ErrBufferFull {
		return nil, nil, false, err
	}
	if !core.IsText(head, complete) {
		return nil, head, false, nil
	}
	return &text{br: br}, head, true, nil
}

// maxLineBytes is how much of a line is kept: MaxLineChars runes of any
// width, and the line's end.
const maxLineBytes = MaxLineChars*utf8.UTFMax + 2

// next returns the next line without its end ("\n" or "\r\n"), cut at
// MaxLineChars characters (cut says so), with invalid UTF-8 replaced by
// U+FFFD. It returns io.EOF after the last line; a last line without a
// newline counts, an empty rest after the last newline does not. With
// keep false it only skips the line.
func (t *text) next(keep bool) (line string, cut bool, err error) {
	var buf []byte
	n := 0
	for {
		chunk, err := t.br.ReadSlice('\n')
		n += len(chunk)
		if keep && len(buf) < maxLineBytes {
			buf = append(buf, chunk[:min(len(chunk), maxLineBytes-len(buf))]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && n == 0 {
			return "", false, io.EOF
		}
		if err != nil && err != io.EOF {
			return "", false, err
		}
		break
	}
	if !keep {
		return "", false, nil
	}
	cut = n > len(buf)
	if !cut {
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		buf = bytes.TrimSuffix(buf, []byte("\r"))
	}
	line = strings.ToValidUTF8(string(buf), "\uFFFD")
	if utf8.RuneCountInString(line) > MaxLineChars {
		line, cut = firstRunes(line, MaxLineChars), true
	}
	return line, cut, nil
}

// firstRunes returns the first n runes of s.
func firstRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// page is what read_file shows of a file.
type page struct {
	text        string // the numbered lines
	first, last int    // the line numbers shown; last < first when none
	more        bool   // lines follow last
	full        bool   // the output cap cut the page short
	total       int    // when !more, the file's number of lines
}

// readPage returns the lines offset (1-based) to offset+limit-1 of t,
// numbered like cat -n, within size bytes. A first line longer than size
// is cut to fit, with a marker.
func readPage(t *text, offset, limit, size int) (page, error) {
	p := page{first: offset, last: offset - 1}
	for n := 1; n < offset; n++ {
		if _, _, err := t.next(false); err == io.EOF {
			p.total = n - 1
			return p, nil
		} else if err != nil {
			return p, err
		}
	}
	var b strings.Builder
	for n := offset; ; n++ {
		line, cut, err := t.next(n < offset+limit)
		if err == io.EOF {
			p.total = n - 1
			break
		}
		if err != nil {
			return p, err
		}
		if n == offset+limit {
			p.more = true
			break
		}
		if cut {
			line += cutMarker
		}
		entry := numbered(n, line)
		if b.Len()+len(entry) > size {
			if n > offset {
				p.more, p.full = true, true
				break
			}
			entry = fitLine(entry, size)
		}
		b.WriteString(entry)
		p.last = n
	}
	p.text = b.String()
	return p, nil
}

// fitLine cuts a numbered line longer than size bytes to fit in them,
// before a UTF-8 character, with a marker that says so (the marker alone
// when even it does not fit).
func fitLine(entry string, size int) string {
	marker := fmt.Sprintf(" [… line cut at %d bytes to fit the result]\n", size)
	n := max(0, size-len(marker))
	for n > 0 && !utf8.RuneStart(entry[n]) {
		n--
	}
	return entry[:n] + marker
}

// numbered is one line as cat -n shows it.
func numbered(n int, line string) string {
	return fmt.Sprintf("%6d\t%s\n", n, line)
}
