package bedrock

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
)

// The Converse request body (the fields Kiln uses). System is the system
// prompt, as one text block.
type converseRequest struct {
	Messages   []message     `json:"messages"`
	System     []systemBlock `json:"system,omitempty"`
	ToolConfig *toolConfig   `json:"toolConfig,omitempty"`
}

type systemBlock struct {
	Text string `json:"text"`
}

type message struct {
	Role    string         `json:"role"` // "user" or "assistant"
	Content []contentBlock `json:"content"`
}

// contentBlock is a union: exactly one field is set.
type contentBlock struct {
	Text       string      `json:"text,omitempty"`
	Image      *image      `json:"image,omitempty"`
	ToolUse    *toolUse    `json:"toolUse,omitempty"`
	ToolResult *toolResult `json:"toolResult,omitempty"`
}

type toolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type toolResult struct {
	ToolUseID string            `json:"toolUseId"`
	Content   []toolResultBlock `json:"content"`
	Status    string            `json:"status,omitempty"` // "error" for a failed tool
}

// toolResultBlock is a union too: text or an image.
type toolResultBlock struct {
	Text  string `json:"text,omitempty"`
	Image *image `json:"image,omitempty"`
}

// image is an image block: its format (the media type's subtype) and its
// bytes, sent as base64.
type image struct {
	Format string `json:"format"`
	Source struct {
		Bytes []byte `json:"bytes"`
	} `json:"source"`
}

// imageTypes are the image types Converse takes; other images stand in
// as a line (providers.StandIn).
var imageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// imageOf is an image part as an image block.
func imageOf(p core.Part) *image {
	img := &image{Format: strings.TrimPrefix(p.MIME, "image/")}
	img.Source.Bytes = p.Data
	return img
}

type toolConfig struct {
	Tools []tool `json:"tools"`
}

type tool struct {
	ToolSpec toolSpec `json:"toolSpec"`
}

type toolSpec struct {
	Name        string      `json:"name"`
	Description string      `json:"description,omitempty"`
	InputSchema inputSchema `json:"inputSchema"`
}

type inputSchema struct {
	JSON json.RawMessage `json:"json"`
}

// emptyObject is the input of a call without arguments.
var emptyObject = json.RawMessage(`{}`)

// emptyResult stands in for a tool's empty output: Bedrock refuses blank
// text blocks.
const emptyResult = "(no output)"

// buildRequest turns a Kiln model request into a Converse body. The
// system prompt is the top-level system; user messages and tool results
// carry their text and image blocks. Bedrock wants user and assistant
// turns to alternate, so consecutive messages of the same Bedrock role (a
// tool result is a user turn) are merged into one turn; blank text is left
// out, since Bedrock refuses blank text blocks.
func buildRequest(req core.ModelRequest, names *providers.ToolNames) converseRequest {
	var out converseRequest
	if req.System != "" {
		out.System = []systemBlock{{Text: req.System}}
	}
	var turns []providers.Turn[contentBlock]
	for _, m := range req.Messages {
		role, blocks := "user", []contentBlock(nil)
		switch m.Role {
		case core.RoleUser:
			text := func(s string) contentBlock { return contentBlock{Text: s} }
			image := func(p core.Part) contentBlock { return contentBlock{Image: imageOf(p)} }
			blocks = providers.Blocks(m, text, image, imageTypes...)
		case core.RoleAssistant:
			role = "assistant"
			if m.Text != "" {
				blocks = append(blocks, contentBlock{Text: m.Text})
			}
			for _, c := range m.ToolCalls {
				blocks = append(blocks, contentBlock{ToolUse: &toolUse{ToolUseID: c.ID, Name: names.API(c.Name), Input: objectArgs(c.Args)}})
			}
		case core.RoleTool:
			text := func(s string) toolResultBlock { return toolResultBlock{Text: s} }
			image := func(p core.Part) toolResultBlock { return toolResultBlock{Image: imageOf(p)} }
			content := providers.Blocks(m, text, image, imageTypes...)
			if len(content) == 0 {
				content = []toolResultBlock{{Text: emptyResult}}
			}
			r := &toolResult{ToolUseID: m.ToolCallID, Content: content}
			if m.IsError {
				r.Status = "error"
			}
			blocks = append(blocks, contentBlock{ToolResult: r})
		}
		turns = providers.AppendTurn(turns, role, blocks...)
	}
	for _, t := range turns {
		out.Messages = append(out.Messages, message{Role: t.Role, Content: t.Parts})
	}
	if len(req.Tools) > 0 {
		out.ToolConfig = &toolConfig{}
		for _, t := range req.Tools {
			out.ToolConfig.Tools = append(out.ToolConfig.Tools, tool{ToolSpec: toolSpec{Name: names.API(t.Name), Description: t.Description, InputSchema: inputSchema{JSON: providers.ToolSchema(t.Schema)}}})
		}
	}
	return out
}

// objectArgs returns args as a JSON object: Bedrock's toolUse input is a
// document, and a call without arguments has {}.
func objectArgs(args json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(args)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) || !json.Valid(t) {
		return emptyObject
	}
	return t
}
