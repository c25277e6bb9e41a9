package providers

import (
	"strconv"
	"strings"

	"github.com/kilnhq/kiln/core"
)

// ToolNames maps Kiln's tool names ("calc.add") to names every model API
// accepts (^[a-zA-Z0-9_-]{1,64}$: "calc__add") and back, for one request.
type ToolNames struct {
	toAPI  map[string]string
	toKiln map[string]string
}

// NewToolNames builds the mapping for a request's tools and for the tool
// names used in its conversation (which may name tools no longer offered).
func NewToolNames(tools []core.ToolSpec, msgs []*core.Message) *ToolNames {
	n := &ToolNames{toAPI: map[string]string{}, toKiln: map[string]string{}}
	for _, t := range tools {
		n.add(t.Name)
	}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			n.add(c.Name)
		}
		if m.Role == core.RoleTool && m.Name != "" {
			n.add(m.Name)
		}
	}
	return n
}

func (n *ToolNames) add(name string) {
	if _, ok := n.toAPI[name]; ok {
		return
	}
	base := sanitize(name)
	api := base
	for i := 2; ; i++ {
		if _, taken := n.toKiln[api]; !taken {
			break
		}
		suffix := "_" + strconv.Itoa(i)
		api = base[:min(len(base), 64-len(suffix))] + suffix
	}
	n.toAPI[name], n.toKiln[api] = api, name
}

func sanitize(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r == '.':
			b.WriteString("__")
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" {
		s = "tool"
	}
	return s[:min(len(s), 64)]
}

// API returns the API name of a Kiln tool name.
func (n *ToolNames) API(kiln string) string {
	if a, ok := n.toAPI[kiln]; ok {
		return a
	}
	return sanitize(kiln)
}

// Kiln returns the Kiln name of a tool name the model used; a name the
// request never offered comes back as it is (the engine answers it as an
// unknown tool).
func (n *ToolNames) Kiln(api string) string {
	if k, ok := n.toKiln[api]; ok {
		return k
	}
	return api
}
