package gemini

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
)

// request is a GenerateContentRequest. SystemInstruction carries the
// system prompt, as a content of one text part and no role.
type request struct {
	SystemInstruction *content  `json:"systemInstruction,omitempty"`
	Contents          []content `json:"contents"`
	Tools             []toolSet `json:"tools,omitempty"`
}

type toolSet struct {
	FunctionDeclarations []functionDeclaration `json:"functionDeclarations"`
}

type functionDeclaration struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters,omitempty"`
}

// content is one turn of the conversation, in a request or a response.
type content struct {
	Role  string `json:"role,omitempty"`
	Parts []part `json:"parts"`
}

// part is one piece of a content: text, an inline image, a function call
// or a function response. Thought marks a thought summary, never part of
// the answer.
type part struct {
	Text             string            `json:"text,omitempty"`
	InlineData       *blob             `json:"inlineData,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
}

// blob is inline bytes of a media type; Data is sent as base64.
type blob struct {
	MIMEType string `json:"mimeType"`
	Data     []byte `json:"data"`
}

// imageTypes are the image types the API takes; other images stand in as
// a line (providers.StandIn).
var imageTypes = []string{"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"}

type functionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

// functionResponse carries a tool result. Response must be an object: the
// result goes under "output", a failure under "error" (the keys the API
// documents).
type functionResponse struct {
	ID       string            `json:"id,omitempty"`
	Name     string            `json:"name"`
	Response map[string]string `json:"response"`
}

// A Kiln tool-call ID made by this provider is the call's id — the API's,
// or one made up from syntheticPrefix when the API gave none — followed,
// when the call came with a thought signature, by sigSep and the
// signature (base64, so it never contains sigSep).
const (
	syntheticPrefix = "kiln-gemini-"
	sigSep          = "~sig~"
)

// callID makes the Kiln ID of a call.
func callID(id, signature string) string {
	if signature == "" {
		return id
	}
	return id + sigSep + signature
}

// splitCallID returns the id to send back to the API ("" for a synthetic
// one, which the API never issued) and the thought signature of a Kiln
// tool-call ID. IDs made by other providers come back whole.
func splitCallID(kiln string) (apiID, signature string) {
	apiID, signature, _ = strings.Cut(kiln, sigSep)
	if strings.HasPrefix(apiID, syntheticPrefix) {
		apiID = ""
	}
	return apiID, signature
}

// syntheticIDPrefix is the prefix of the synthetic call IDs of req's turn:
// the run and the turn's number (its assistant messages so far, plus one),
// so that a retried turn names its calls the same way.
func syntheticIDPrefix(req core.ModelRequest) string {
	turn := 1
	for _, m := range req.Messages {
		if m.Role == core.RoleAssistant {
			turn++
		}
	}
	return syntheticPrefix + req.RunID + "-" + strconv.Itoa(turn) + "-"
}

// buildRequest turns a Kiln model request into a GenerateContentRequest:
// the system prompt is the systemInstruction, user messages (their text
// and inline images) and tool results are "user" contents, assistant
// messages "model" contents, consecutive contents of one role are merged
// (a step's function responses must share one content), and tool results
// are put in the order of the calls they answer, which is how Gemini pairs
// them when calls have no id.
func buildRequest(req core.ModelRequest, names *providers.ToolNames) request {
	var r request
	if req.System != "" {
		r.SystemInstruction = &content{Parts: []part{{Text: req.System}}}
	}
	var turns []providers.Turn[part]
	var calls []core.ToolCall // of the latest assistant message
	msgs := req.Messages
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		switch m.Role {
		case core.RoleAssistant:
			calls = m.ToolCalls
			turns = providers.AppendTurn(turns, "model", modelParts(m, names)...)
		case core.RoleTool:
			j := i + 1
			for j < len(msgs) && msgs[j].Role == core.RoleTool {
				j++
			}
			turns = providers.AppendTurn(turns, "user", responseParts(msgs[i:j], calls, names)...)
			i = j - 1
		default:
			turns = providers.AppendTurn(turns, "user", userParts(m)...)
		}
	}
	for _, t := range turns {
		r.Contents = append(r.Contents, content{Role: t.Role, Parts: t.Parts})
	}
	if len(req.Tools) > 0 {
		decls := make([]functionDeclaration, 0, len(req.Tools))
		for _, t := range req.Tools {
			decls = append(decls, functionDeclaration{Name: names.API(t.Name), Description: t.Description, Parameters: parameters(t.Schema)})
		}
		r.Tools = []toolSet{{FunctionDeclarations: decls}}
	}
	return r
}

// userParts is a user message's content as text and inlineData parts.
func userParts(m *core.Message) []part {
	text := func(s string) part { return part{Text: s} }
	image := func(p core.Part) part { return part{InlineData: &blob{MIMEType: p.MIME, Data: p.Data}} }
	return providers.Blocks(m, text, image, imageTypes...)
}

func modelParts(m *core.Message, names *providers.ToolNames) []part {
	var parts []part
	if m.Text != "" {
		parts = append(parts, part{Text: m.Text})
	}
	for _, c := range m.ToolCalls {
		id, sig := splitCallID(c.ID)
		parts = append(parts, part{ThoughtSignature: sig, FunctionCall: &functionCall{ID: id, Name: names.API(c.Name), Args: providers.ObjectArgs(c.Args)}})
	}
	return parts
}

// responseParts turns a run of tool results into function responses in the
// order of calls; results for calls not in calls keep their order, last.
func responseParts(results []*core.Message, calls []core.ToolCall, names *providers.ToolNames) []part {
	pos := make(map[string]int, len(calls))
	for i, c := range calls {
		pos[c.ID] = i
	}
	order := func(m *core.Message) int {
		if i, ok := pos[m.ToolCallID]; ok {
			return i
		}
		return len(calls)
	}
	results = slices.Clone(results)
	slices.SortStableFunc(results, func(a, b *core.Message) int { return order(a) - order(b) })
	parts := make([]part, 0, len(results))
	for _, m := range results {
		name := m.Name
		if i, ok := pos[m.ToolCallID]; ok && name == "" {
			name = calls[i].Name
		}
		key := "output"
		if m.IsError {
			key = "error"
		}
		id, _ := splitCallID(m.ToolCallID)
		parts = append(parts, part{FunctionResponse: &functionResponse{ID: id, Name: names.API(name), Response: map[string]string{key: providers.ContentText(m)}}})
	}
	return parts
}
