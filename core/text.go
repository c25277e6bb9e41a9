package core

import (
	"bytes"
	"unicode/utf8"
)

// IsText reports whether b, the start of a file (all of it when
// complete), is text: no NUL byte and valid UTF-8, but for a rune cut at
// the end of an incomplete b. The upload sniffer and the file tools use
// this one rule.
func IsText(b []byte, complete bool) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return false
	}
	if !complete {
		for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.Valid(b); i++ {
			b = b[:len(b)-1]
		}
	}
	return utf8.Valid(b)
}
