package core

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// DefaultMaxToolResult is how many bytes of text a tool result keeps when
// the server sets no limit of its own (Config.MaxToolResult).
const DefaultMaxToolResult = 256 << 10

// MaxResultInline is how many bytes of inline image and file data one tool
// result keeps, all its parts together; a part past it stands as a line
// naming it.
const MaxResultInline = MaxImageBytes

// TextCap keeps the first and last Max/2 bytes of the text written to it
// and counts the bytes between, which it leaves out: output of any size
// costs at most Max bytes of memory, and String makes room for the line
// that states the cut within Max. It is safe for concurrent use.
type TextCap struct {
	Max int

	mu         sync.Mutex
	head, tail []byte
	cut        int64
}

// Write adds p; it never fails.
func (c *TextCap) Write(p []byte) (int, error) { return capWrite(c, p) }

// WriteString adds s; it never fails.
func (c *TextCap) WriteString(s string) (int, error) { return capWrite(c, s) }

func capWrite[T string | []byte](c *TextCap, p T) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	half := c.Max / 2
	if k := min(half-len(c.head), len(p)); k > 0 {
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) >= half {
		c.cut += int64(len(c.tail) + len(p) - half)
		c.tail = append(c.tail[:0], p[len(p)-half:]...)
		return n, nil
	}
	c.tail = append(c.tail, p...)
	if over := len(c.tail) - half; over > 0 {
		c.cut += int64(over)
		c.tail = append(c.tail[:0], c.tail[over:]...)
	}
	return n, nil
}

// Cut returns how many bytes were left out so far.
func (c *TextCap) Cut() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cut
}

// String returns what was kept, as valid UTF-8 and at most Max bytes
// long: the whole text when nothing was left out, else its head, a line
// saying how many bytes were left out, and its tail. A character the cut
// split is left out whole.
func (c *TextCap) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut == 0 {
		return strings.ToValidUTF8(string(c.head)+string(c.tail), "\uFFFD")
	}
	head, tail, cut := c.head, c.tail, c.cut
	for {
		// Drop a character split at the end of head or the start of tail.
		for i := 1; i < utf8.UTFMax && i <= len(head); i++ {
			if utf8.RuneStart(head[len(head)-i]) {
				if !utf8.FullRune(head[len(head)-i:]) {
					cut += int64(i)
					head = head[:len(head)-i]
				}
				break
			}
		}
		for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
			tail = tail[1:]
			cut++
		}
		// Make room for the marker, within Max.
		over := len(head) + len(CutMarker(cut)) + len(tail) - c.Max
		if over <= 0 || len(head)+len(tail) == 0 {
			break
		}
		h := min(len(head), (over+1)/2)
		t := min(len(tail), over-h)
		head, tail = head[:len(head)-h], tail[t:]
		cut += int64(h + t)
	}
	return strings.ToValidUTF8(string(head)+CutMarker(cut)+string(tail), "\uFFFD")
}

// CutMarker is the line that stands for the cut bytes left out between
// the head and the tail of a capped output.
func CutMarker(cut int64) string {
	return fmt.Sprintf("\n[... %d bytes of output left out ...]\n", cut)
}

// CapText returns s when it is at most max bytes long, else its head
// and tail with a line saying how many bytes were left out between, in at
// most max bytes (see TextCap). The result never shares s's memory when s is cut.
func CapText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	c := TextCap{Max: max}
	c.WriteString(s)
	return c.String()
}

// CapResult bounds a tool result as the engine stores it: its text parts
// together keep at most max bytes (joined as one text part where the
// first was, capped with CapText), and its inline image and file data at
// most MaxResultInline bytes (a part past it stands as a line naming it).
// A result within both limits comes back as it is; a capped one holds
// none of res's memory, so the original can be freed.
func CapResult(res ToolResult, max int) ToolResult {
	text, inline := 0, 0
	for _, p := range res.Content {
		text += len(p.Text)
		inline += len(p.Data)
	}
	if text <= max && inline <= MaxResultInline {
		return res
	}
	out := ToolResult{IsError: res.IsError}
	capText := text > max
	var c *TextCap
	at := -1 // where the capped text goes
	inline = 0
	for _, p := range res.Content {
		switch {
		case p.Type == PartText && capText:
			if c == nil {
				c, at = &TextCap{Max: max}, len(out.Content)
				out.Content = append(out.Content, Part{Type: PartText})
			} else {
				c.WriteString("\n")
			}
			c.WriteString(p.Text)
		case len(p.Data) > 0 && inline+len(p.Data) > MaxResultInline:
			out.Content = append(out.Content, LeftOut(p, int64(len(p.Data))))
		default:
			inline += len(p.Data)
			out.Content = append(out.Content, p)
		}
	}
	if c != nil {
		out.Content[at].Text = c.String()
	}
	return out
}

// LeftOut is the text part that stands for the image or file part p, of
// size bytes, when a tool result cannot keep its data (see
// MaxResultInline).
func LeftOut(p Part, size int64) Part {
	what := "file"
	if p.Type == PartImage {
		what = "image"
	}
	if p.Name != "" {
		what += " " + p.Name
	}
	return TextPart(fmt.Sprintf("[%s (%s, %s) left out: a tool result keeps %s of inline images and files]",
		what, p.MIME, FormatBytes(size), FormatBytes(MaxResultInline)))
}
