package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/kilnhq/kiln/core"
)

// The helpers below are the logic several providers' wire formats share;
// the wire types themselves stay in each provider's package.

// Turn is one turn of a conversation as an API takes it: a role and its
// parts (content blocks).
type Turn[P any] struct {
	Role  string
	Parts []P
}

// AppendTurn adds parts under role to turns, for the APIs that want the
// roles to alternate (Anthropic's Messages, Bedrock's Converse, Gemini's
// contents): the parts join the last turn when it has the same role (so
// the results of parallel tool calls travel together) and start a new turn
// otherwise. No parts add nothing: these APIs refuse an empty turn.
func AppendTurn[P any](turns []Turn[P], role string, parts ...P) []Turn[P] {
	if len(parts) == 0 {
		return turns
	}
	if n := len(turns); n > 0 && turns[n-1].Role == role {
		turns[n-1].Parts = append(turns[n-1].Parts, parts...)
		return turns
	}
	return append(turns, Turn[P]{Role: role, Parts: parts})
}

// ObjectArgs returns a tool call's arguments when they are a JSON object,
// else {} (missing, null or invalid arguments): the APIs that take a
// call's arguments as a document take only an object.
func ObjectArgs(args json.RawMessage) json.RawMessage {
	if a := bytes.TrimSpace(args); len(a) > 0 && a[0] == '{' && json.Valid(a) {
		return a
	}
	return json.RawMessage(`{}`)
}

// ToolSchema returns a tool's JSON Schema, or an empty object schema when
// the tool declares none (no schema, or null): the APIs require an object
// schema.
func ToolSchema(schema json.RawMessage) json.RawMessage {
	if s := bytes.TrimSpace(schema); len(s) == 0 || string(s) == "null" {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return schema
}

// ContentText is m's content as one text, for an API that takes a
// message's content or a tool's result as a string: its text parts and
// the StandIn line of each image or file part, joined with newlines. The
// images Inline with types are left out: the API takes them apart (as
// Ollama takes a message's images). It reads Message.Content, so a message
// stored before parts existed reads the same.
func ContentText(m *core.Message, types ...string) string {
	parts := m.Content()
	if len(parts) == 1 && parts[0].Type == core.PartText {
		return parts[0].Text
	}
	lines := make([]string, 0, len(parts))
	for _, p := range parts {
		switch {
		case p.Type == core.PartText:
			lines = append(lines, p.Text)
		case Inline(p, types...):
		default:
			lines = append(lines, StandIn(p))
		}
	}
	return strings.Join(lines, "\n")
}

// Blocks is m's content as an API's content blocks, in order: a text
// part made by text, an image Inline with types made by image, and any
// other image or file part made by text from its StandIn line. Empty text
// parts are left out: the APIs refuse blank text blocks.
func Blocks[B any](m *core.Message, text func(string) B, image func(core.Part) B, types ...string) []B {
	var out []B
	for _, p := range m.Content() {
		switch {
		case p.Type == core.PartText:
			if p.Text != "" {
				out = append(out, text(p.Text))
			}
		case Inline(p, types...):
			out = append(out, image(p))
		default:
			out = append(out, text(StandIn(p)))
		}
	}
	return out
}

// Inline reports whether an API whose accepted image media types are
// types carries p as an image of its own: p is an image part of one of
// those types with its bytes inline (Data). Any other image or file part
// is sent as its StandIn line.
func Inline(p core.Part, types ...string) bool {
	return p.Type == core.PartImage && len(p.Data) > 0 && slices.Contains(types, p.MIME)
}

// HasInline reports whether m has a part Inline with types.
func HasInline(m *core.Message, types ...string) bool {
	return slices.ContainsFunc(m.Parts, func(p core.Part) bool { return Inline(p, types...) })
}

// StandIn is the line that stands in for an image or a file part a
// request does not carry as such (an API that takes no images there, a
// media type it refuses, a file, bytes not inline): it names the part, its
// media type and, when its URI is a file: URI, the path the file is
// readable at, so that the model knows what it was given and where to
// read it.
func StandIn(p core.Part) string {
	what := p.Type
	if p.Name != "" {
		what += " " + strconv.Quote(p.Name)
	}
	if p.MIME != "" {
		what += " (" + p.MIME + ")"
	}
	what += " not shown"
	if path := filePath(p.URI); path != "" {
		what += ", readable at " + path
	}
	return "[" + what + "]"
}

// filePath is the local path a file: URI names, "" for any other URI.
func filePath(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") {
		return ""
	}
	return u.Path
}

// ToolResultText is a tool result's ContentText (no images), for an API
// that takes a tool's result as one string and has no error flag on it: a
// failed call says so.
func ToolResultText(m *core.Message) string {
	if m.IsError {
		return "Error: " + ContentText(m)
	}
	return ContentText(m)
}

// Do sends req with client and returns the 2xx response. No response at
// all is a TransportError; any other status is the error classify makes
// of the response (HTTPError, or the provider's refinement of it; it reads
// and closes the body).
func Do(ctx context.Context, client *http.Client, provider string, req *http.Request, classify func(*http.Response) *Error) (*http.Response, error) {
	resp, err := client.Do(req)
	if err != nil {
		return nil, TransportError(ctx, provider, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, classify(resp)
	}
	return resp, nil
}

// DecodeJSON decodes the JSON answer in body into v. When it cannot, the
// error is ctx's if ctx has ended (the read was cut short), else a
// KindUnavailable *Error of provider whose message is what, ": " and the
// decoding error.
func DecodeJSON(ctx context.Context, provider string, body io.Reader, v any, what string) error {
	if err := json.NewDecoder(body).Decode(v); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &Error{Provider: provider, Kind: KindUnavailable, Message: what + ": " + err.Error()}
	}
	return nil
}

// Pages gathers a list an API serves as pages of JSON. get(token) sends
// the request for the page after token ("" for the first) and returns the
// 2xx response; its body is decoded into a P as DecodeJSON does (what
// names the list in the error) and closed, and items gives the page's
// items and the next page's token ("" after the last). Pages follows at
// most maxPages pages and stops early when a page hands back the token it
// was fetched with. An error of any page is the result.
func Pages[P, T any](ctx context.Context, provider string, maxPages int, what string, get func(token string) (*http.Response, error), items func(P) ([]T, string)) ([]T, error) {
	var out []T
	token := ""
	for range maxPages {
		resp, err := get(token)
		if err != nil {
			return nil, err
		}
		var page P
		err = DecodeJSON(ctx, provider, resp.Body, &page, what)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		more, next := items(page)
		out = append(out, more...)
		if next == "" || next == token {
			break
		}
		token = next
	}
	return out, nil
}
