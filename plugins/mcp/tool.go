package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/kilnhq/kiln/core"
)

// tool is one MCP tool of one session, as a core.Tool. It calls the
// session it was listed by: a reconnect lists the tools again and
// registers new ones.
type tool struct {
	spec core.ToolSpec
	sess *session
}

func (t *tool) Spec() core.ToolSpec { return t.spec }

// Call sends tools/call, with a progress token: the server's progress
// notifications for the call become tool.progress events of the run
// (core.ReportProgress). The call has the session's deadline. The
// server's own failure (isError, or a JSON-RPC error answer such as
// unknown tool or bad arguments) is a failed result the model reads, and
// so are a call that outlives its deadline (it is cancelled with
// notifications/cancelled, and the supervisor pings the server to see
// whether it is still there) and a call cut off because the server sent a
// malformed message (the session is dropped and reconnects). Another
// transport failure is a returned error: it wraps core.ErrEffectUnknown
// once the request may have reached the server, and the session is
// reported lost so the manager reconnects. When ctx ends, Call cancels
// the request and returns ctx.Err().
func (t *tool) Call(ctx context.Context, args json.RawMessage) (core.ToolResult, error) {
	sess := t.sess
	var req mcp.CallToolRequest
	req.Params.Name = t.spec.Name
	if len(args) > 0 && string(args) != "null" {
		req.Params.Arguments = args
	}
	if sess.isClosed() {
		return core.ToolResult{}, fmt.Errorf("mcp server %q: not connected", sess.server)
	}
	token, done := sess.watchProgress(func(p json.RawMessage) { core.ReportProgress(ctx, p) })
	defer done()
	req.Params.Meta = &mcp.Meta{ProgressToken: token}
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-sess.lostCh:
			cancel(errSessionLost)
		case <-lctx.Done():
		}
	}()
	cctx, cancelTimeout := context.WithTimeoutCause(lctx, sess.timeout, errCallTimeout)
	defer cancelTimeout()
	res, err := sess.client.CallTool(cctx, req)
	if err == nil {
		return core.CapResult(convertResult(res), maxResult(ctx)), nil
	}
	var me *MalformedError
	switch {
	case ctx.Err() != nil:
		return core.ToolResult{}, ctx.Err()
	case errors.Is(context.Cause(cctx), errCallTimeout):
		select {
		case sess.suspect <- struct{}{}:
		default:
		}
		return core.ErrorResult(fmt.Sprintf("mcp server %q did not answer the call of %q within %s (its timeout): the call was cancelled, and it may or may not have taken effect", sess.server, req.Params.Name, sess.timeout)), nil
	case sess.isClosed() && errors.As(sess.lostErr, &me):
		return core.ErrorResult(redact(fmt.Sprintf("mcp server %q: %v; the call of %q failed (it may or may not have taken effect) and the server is being reconnected", sess.server, me, req.Params.Name), sess.secrets)), nil
	}
	var te *transport.Error
	if errors.As(err, &te) {
		sess.lost(err)
		return core.ToolResult{}, fmt.Errorf("mcp server %q: tool %q: %v: %w", sess.server, req.Params.Name, err, core.ErrEffectUnknown)
	}
	return core.ErrorResult(err.Error()), nil
}

// maxResult is how many bytes of text the engine keeps of a call's result:
// the bridge caps a result as it converts it, so the server's answer,
// however large, is garbage once Call returns.
func maxResult(ctx context.Context) int {
	if env := core.CallEnvFrom(ctx); env != nil && env.MaxResult > 0 {
		return env.MaxResult
	}
	return core.DefaultMaxToolResult
}

var (
	errCallTimeout = errors.New("the call's deadline passed")
	errSessionLost = errors.New("the session was lost")
)

// convertResult maps MCP content to parts: text to text, images to image
// parts (inline bytes), everything else to a text line standing in for it.
func convertResult(res *mcp.CallToolResult) core.ToolResult {
	out := core.ToolResult{IsError: res.IsError}
	for _, c := range res.Content {
		out.Content = append(out.Content, convertContent(c))
	}
	if len(out.Content) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			out.Content = append(out.Content, core.TextPart(string(b)))
		}
	}
	if len(out.Content) == 0 {
		out.Content = []core.Part{core.TextPart("")}
	}
	return out
}

func convertContent(c mcp.Content) core.Part {
	if tc, ok := mcp.AsTextContent(c); ok {
		return core.TextPart(tc.Text)
	}
	if ic, ok := mcp.AsImageContent(c); ok {
		if n := base64.StdEncoding.DecodedLen(len(ic.Data)); n > core.MaxResultInline {
			return core.LeftOut(core.Part{Type: core.PartImage, MIME: ic.MIMEType}, int64(n))
		}
		data, err := base64.StdEncoding.DecodeString(ic.Data)
		if err == nil && len(data) > 0 && strings.HasPrefix(ic.MIMEType, "image/") {
			return core.Part{Type: core.PartImage, MIME: ic.MIMEType, Data: data}
		}
		return core.TextPart(fmt.Sprintf("[image %s: not decodable]", ic.MIMEType))
	}
	if ac, ok := mcp.AsAudioContent(c); ok {
		return core.TextPart(fmt.Sprintf("[audio %s, %d bytes of base64 left out]", ac.MIMEType, len(ac.Data)))
	}
	if er, ok := mcp.AsEmbeddedResource(c); ok {
		if tr, ok := mcp.AsTextResourceContents(er.Resource); ok {
			return core.TextPart(fmt.Sprintf("[resource %s]\n%s", tr.URI, tr.Text))
		}
		if br, ok := mcp.AsBlobResourceContents(er.Resource); ok {
			return core.TextPart(fmt.Sprintf("[resource %s (%s), %d bytes of base64 left out]", br.URI, br.MIMEType, len(br.Blob)))
		}
		return core.TextPart("[resource]")
	}
	if rl, ok := c.(mcp.ResourceLink); ok {
		return core.TextPart(fmt.Sprintf("[resource link %s %s]", rl.Name, rl.URI))
	}
	if rl, ok := c.(*mcp.ResourceLink); ok {
		return core.TextPart(fmt.Sprintf("[resource link %s %s]", rl.Name, rl.URI))
	}
	b, _ := json.Marshal(c)
	return core.TextPart(fmt.Sprintf("[content %s]", b))
}

// convertTools maps listed tools to core tools of sess, and the default
// policy: tools not annotated readOnlyHint are held unless trust is
// TrustAll.
func convertTools(sess *session, listed []mcp.Tool, trust string) ([]core.Tool, core.Policy) {
	var tools []core.Tool
	policy := core.Policy{}
	for _, lt := range listed {
		name := lt.Name
		if name == "" || strings.ContainsAny(name, " \t\n\r") {
			continue // core refuses it; the rest of the server's tools still work
		}
		var schema json.RawMessage
		if b, err := json.Marshal(lt); err == nil {
			var m struct {
				InputSchema json.RawMessage `json:"inputSchema"`
			}
			if json.Unmarshal(b, &m) == nil {
				schema = m.InputSchema
			}
		}
		a := lt.Annotations
		tools = append(tools, &tool{
			spec: core.ToolSpec{
				Name:        name,
				Description: lt.Description,
				Schema:      schema,
				Idempotent:  a.IdempotentHint != nil && *a.IdempotentHint,
			},
			sess: sess,
		})
		if trust != TrustAll && (a.ReadOnlyHint == nil || !*a.ReadOnlyHint) {
			policy[globEscape(name)] = core.Rule{Interrupt: true}
		}
	}
	return tools, policy
}

// globEscape quotes the path.Match metacharacters of a tool name, so a
// policy key matches that tool alone.
func globEscape(name string) string {
	var b strings.Builder
	for _, r := range name {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
