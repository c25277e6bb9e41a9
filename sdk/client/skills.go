package client

import (
	"bytes"
	"context"
	"mime/multipart"
	"net/http"
	"net/url"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// SkillLayer is one copy of a skill: where it comes from (custom, plugin
// or builtin) and, for a plugin's, the plugin's ID.
type SkillLayer struct {
	Origin string `json:"origin"`
	Source string `json:"source,omitempty"`
}

// Skill is a skill as GET /api/v1/skills shows it: its frontmatter, its
// body (in Skill only), where it comes from, what it shadows and whether
// the tools it names are connected.
type Skill struct {
	Name          string            `json:"name"`
	Description   string            `json:"description"`
	License       string            `json:"license,omitempty"`
	Compatibility string            `json:"compatibility,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	Tools         []string          `json:"tools,omitempty"`
	InterruptOn   core.Policy       `json:"interrupt_on,omitempty"`
	Model         string            `json:"model,omitempty"`
	Body          string            `json:"body,omitempty"`
	Extra         map[string]any    `json:"extra,omitempty"`
	SkillLayer
	Shadows  []SkillLayer  `json:"shadows,omitempty"`
	Warnings []SkillNotice `json:"warnings,omitempty"`
	Ready    bool          `json:"ready"`
	NotReady string        `json:"not_ready,omitempty"`
}

// SkillNotice is a warning about a SKILL.md, at a line.
type SkillNotice struct {
	Line    int    `json:"line"`
	Message string `json:"message"`
}

// SkillProblem is a SKILL.md the server skipped, and why.
type SkillProblem struct {
	SkillLayer
	Name  string `json:"name"`
	Error struct {
		File   string `json:"file"`
		Line   int    `json:"line"`
		Reason string `json:"reason"`
	} `json:"error"`
}

// SkillList is GET /api/v1/skills: the skills (without bodies) and the
// skipped ones.
type SkillList struct {
	Skills   []Skill        `json:"skills"`
	Problems []SkillProblem `json:"problems"`
}

// Skills lists the server's skills.
func (c *Client) Skills(ctx context.Context) (*SkillList, error) {
	var out SkillList
	return &out, c.do(ctx, "GET", "/api/v1/skills", nil, nil, &out)
}

// Skill returns one skill with its body.
func (c *Client) Skill(ctx context.Context, name string) (*Skill, error) {
	var out Skill
	return &out, c.do(ctx, "GET", "/api/v1/skills/"+url.PathEscape(name), nil, nil, &out)
}

// MCPServers lists the MCP servers the server connects to, with their
// state and tools.
func (c *Client) MCPServers(ctx context.Context) ([]pluginapi.MCPServerStatus, error) {
	var out struct {
		Servers []pluginapi.MCPServerStatus `json:"servers"`
	}
	return out.Servers, c.do(ctx, "GET", "/api/v1/mcp-servers", nil, nil, &out)
}

// MCPServerAction reconnects, enables or disables an MCP server (action
// "reconnect", "enable" or "disable") and returns its state after.
func (c *Client) MCPServerAction(ctx context.Context, id, action string) (*pluginapi.MCPServerStatus, error) {
	var out pluginapi.MCPServerStatus
	return &out, c.do(ctx, "POST", "/api/v1/mcp-servers/"+url.PathEscape(id)+"/"+url.PathEscape(action), nil, nil, &out)
}

// AddMCPServer adds a server to the user's .mcp.json and connects it in
// the background; it returns the server's status. A bad definition is a
// 400 with the reason, an ID that is taken (by the user's server or a
// plugin's) a 409.
func (c *Client) AddMCPServer(ctx context.Context, cfg pluginapi.MCPServerConfig) (*pluginapi.MCPServerStatus, error) {
	var out pluginapi.MCPServerStatus
	return &out, c.do(ctx, "POST", "/api/v1/mcp-servers", nil, cfg, &out)
}

// RemoveMCPServer disconnects a server of the user's .mcp.json and
// removes it from the file. A plugin's server is a 409: it goes with its
// plugin.
func (c *Client) RemoveMCPServer(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/api/v1/mcp-servers/"+url.PathEscape(id), nil, nil, nil)
}

// PutSkill creates or replaces the custom skill name with the SKILL.md
// content; a content that does not parse is a 400 naming the line.
func (c *Client) PutSkill(ctx context.Context, name, content string) (*Skill, error) {
	var out Skill
	in := map[string]string{"content": content}
	return &out, c.do(ctx, "PUT", "/api/v1/skills/"+url.PathEscape(name), nil, in, &out)
}

// DeleteSkill deletes the custom skill name, revealing the one beneath.
func (c *Client) DeleteSkill(ctx context.Context, name string) error {
	return c.do(ctx, "DELETE", "/api/v1/skills/"+url.PathEscape(name), nil, nil, nil)
}

// ImportSkill adds a custom skill from a zip archive (SKILL.md at its
// root or in one folder named as the skill); replace overwrites a custom
// skill of the name.
func (c *Client) ImportSkill(ctx context.Context, archive []byte, replace bool) (*Skill, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("file", "skill.zip")
	if err != nil {
		return nil, err
	}
	if _, err := fw.Write(archive); err != nil {
		return nil, err
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	var q url.Values
	if replace {
		q = url.Values{"replace": {"true"}}
	}
	req, err := c.newRequest(ctx, http.MethodPost, apiPrefix+"/skills/import", q, &body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", mw.FormDataContentType())
	var out Skill
	return &out, c.send(req, &out)
}
