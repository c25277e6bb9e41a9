package web

import (
	"unicode/utf8"
)

// checkJSONText refuses a JSON body that would not decode to exactly what
// it says: bytes that are not UTF-8, and \u escapes of unpaired UTF-16
// surrogates. encoding/json silently turns both into U+FFFD, so without
// this check "bad \xff" would be stored as "bad �". It looks at the text
// only; whether b is well-formed JSON is the decoder's business.
func checkJSONText(b []byte) error {
	if !utf8.Valid(b) {
		i := 0
		for i < len(b) {
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return errorf(codeInvalidJSON, "request body is not valid UTF-8 (at byte %d)", i)
	}
	inString := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\' && i+1 < len(b):
			if b[i+1] != 'u' {
				i++ // a one-character escape
				continue
			}
			r, ok := hex4(b, i+2)
			if !ok {
				continue // malformed: the decoder says so
			}
			switch {
			case r >= 0xD800 && r <= 0xDBFF: // high surrogate: a low one must follow
				if lo, ok := hex4(b, i+8); ok && i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' && lo >= 0xDC00 && lo <= 0xDFFF {
					i += 11
					continue
				}
				return errorf(codeInvalidJSON, "request body has an unpaired UTF-16 surrogate \\u%04x (at byte %d)", r, i)
			case r >= 0xDC00 && r <= 0xDFFF:
				return errorf(codeInvalidJSON, "request body has an unpaired UTF-16 surrogate \\u%04x (at byte %d)", r, i)
			}
			i += 5
		}
	}
	return nil
}

// hex4 decodes the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
