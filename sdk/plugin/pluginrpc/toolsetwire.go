package pluginrpc

import (
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/toolsetpb"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// FromToolResult returns r as protocol 3 carries it: its parts and error
// flag in a CallResponse.
func FromToolResult(r wire.ToolResult) *toolsetpb.CallResponse {
	resp := &toolsetpb.CallResponse{IsError: r.IsError, Parts: make([]*toolsetpb.Part, len(r.Parts))}
	for i, p := range r.Parts {
		resp.Parts[i] = &toolsetpb.Part{Type: p.Type, Text: p.Text, MimeType: p.MIME, Name: p.Name, Data: p.Data, Uri: p.URI, Json: p.JSON}
	}
	return resp
}

// ToolResult returns the tool result a protocol 3 CallResponse carries,
// unchecked (wire.ToolResult.Check says what is wrong with it).
func ToolResult(resp *toolsetpb.CallResponse) wire.ToolResult {
	r := wire.ToolResult{V: wire.Version, IsError: resp.GetIsError(), Parts: make([]wire.Part, len(resp.GetParts()))}
	for i, p := range resp.GetParts() {
		r.Parts[i] = wire.Part{Type: p.GetType(), Text: p.GetText(), MIME: p.GetMimeType(), Name: p.GetName(), Data: p.GetData(), URI: p.GetUri(), JSON: p.GetJson()}
	}
	return r
}
