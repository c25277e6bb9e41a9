package kilnserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/kilnhq/kiln/core"
)

// threadURI is the prefix of a thread's resource URI, kiln://threads/{id}.
const threadURI = "kiln://threads/"

// addResources serves the threads as resources: resources/list pages
// through them (newest first), resources/read of kiln://threads/{id} (the
// template) returns the thread's title and its messages as markdown.
//
// mcp-go lists only resources registered up front, so the list is filled
// from b in an after-list hook, with b's cursor (base64, as mcp-go expects
// a cursor to be) as the MCP cursor.
func addResources(s *server.MCPServer, hooks *server.Hooks, b Backend) {
	s.AddResourceTemplate(mcp.NewResourceTemplate(threadURI+"{id}", "thread",
		mcp.WithTemplateDescription("A Kiln thread: its title, then its messages (role and text, tool calls and results)."),
		mcp.WithTemplateMIMEType("text/markdown")),
		func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			id, ok := strings.CutPrefix(req.Params.URI, threadURI)
			if !ok || id == "" || strings.Contains(id, "/") {
				return nil, errors.New("not a thread's URI: want " + threadURI + "{id}")
			}
			th, err := b.GetThread(ctx, id)
			if err != nil {
				return nil, errors.New(core.ErrorMessage(err))
			}
			msgs, err := b.Messages(ctx, id)
			if err != nil {
				return nil, errors.New(core.ErrorMessage(err))
			}
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/markdown",
				Text: "# " + th.Title + "\n\n" + transcript(msgs)}}, nil
		})
	hooks.AddAfterListResources(func(ctx context.Context, _ any, req *mcp.ListResourcesRequest, res *mcp.ListResourcesResult) {
		cursor, _ := base64.StdEncoding.DecodeString(string(req.Params.Cursor))
		page, err := b.ListThreads(ctx, string(cursor))
		if err != nil {
			return // an empty list: mcp-go's hooks cannot answer an error
		}
		res.Resources = make([]mcp.Resource, 0, len(page.Threads))
		for _, th := range page.Threads {
			res.Resources = append(res.Resources, mcp.NewResource(threadURI+th.ID, titleOrID(th),
				mcp.WithMIMEType("text/markdown"), mcp.WithResourceDescription("Kiln thread "+th.ID+", updated "+th.UpdatedAt.UTC().Format("2006-01-02 15:04 UTC"))))
		}
		res.NextCursor = ""
		if page.NextCursor != "" {
			res.NextCursor = mcp.Cursor(base64.StdEncoding.EncodeToString([]byte(page.NextCursor)))
		}
	})
}

func titleOrID(th *core.Thread) string {
	if th.Title != "" {
		return th.Title
	}
	return th.ID
}

// addPrompts serves the skills as prompts: each skill's name and
// description, with an optional task argument; prompts/get returns the
// skill's instructions (its SKILL.md body) as a user message, the task
// after them. The prompts are synced with b's skills before each list and
// get, so a skill added or removed on the server shows at once.
func addPrompts(s *server.MCPServer, hooks *server.Hooks, b Backend) {
	refresh := func(ctx context.Context) {
		list, err := b.Skills(ctx)
		if err != nil {
			return
		}
		prompts := make([]server.ServerPrompt, 0, len(list))
		for _, sk := range list {
			prompts = append(prompts, server.ServerPrompt{
				Prompt: mcp.NewPrompt(sk.Name, mcp.WithPromptDescription(sk.Description),
					mcp.WithArgument("task", mcp.ArgumentDescription("What to do with the skill; added after its instructions."))),
				Handler: func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					sk, err := b.Skill(ctx, req.Params.Name)
					if err != nil {
						return nil, errors.New(core.ErrorMessage(err))
					}
					text := sk.Body
					if task := strings.TrimSpace(req.Params.Arguments["task"]); task != "" {
						text = strings.TrimRight(text, "\n") + "\n\nTask: " + task
					}
					return mcp.NewGetPromptResult(sk.Description, []mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(text))}), nil
				},
			})
		}
		s.SetPrompts(prompts...)
	}
	hooks.AddBeforeListPrompts(func(ctx context.Context, _ any, _ *mcp.ListPromptsRequest) { refresh(ctx) })
	hooks.AddBeforeGetPrompt(func(ctx context.Context, _ any, _ *mcp.GetPromptRequest) { refresh(ctx) })
}

// addLogging sends the server log to the sessions that set a level:
// logging/setLevel (re)starts following b's log at that level for the
// session, and each record (redacted, as the log holds it) becomes a
// notifications/message with the record as its data and its component as
// the logger. Following stops when the session ends or a record cannot be
// sent to it. It returns the follows, for tests.
func addLogging(s *server.MCPServer, hooks *server.Hooks, b Backend) *logFollows {
	f := &logFollows{m: map[string]*logFollow{}}
	hooks.AddAfterSetLevel(func(ctx context.Context, _ any, req *mcp.SetLevelRequest, _ *mcp.EmptyResult) {
		sess := server.ClientSessionFromContext(ctx)
		if sess == nil {
			return
		}
		id := sess.SessionID()
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		lf := &logFollow{cancel: cancel}
		f.mu.Lock()
		f.stop(id)
		f.m[id] = lf
		f.mu.Unlock()
		go func() {
			defer f.end(id, lf)
			b.FollowLogs(fctx, kilnLevel(req.Params.Level), func(rec json.RawMessage) error {
				var head struct{ Level, Component string }
				json.Unmarshal(rec, &head)
				err := s.SendNotificationToSpecificClient(id, string(mcp.MethodNotificationMessage), map[string]any{
					"level": mcpLevel(head.Level), "logger": head.Component, "data": rec,
				})
				if errors.Is(err, server.ErrNotificationChannelBlocked) {
					return nil // a client that reads too slowly misses records
				}
				return err
			})
		}()
	})
	hooks.AddOnUnregisterSession(func(_ context.Context, sess server.ClientSession) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.stop(sess.SessionID())
	})
	return f
}

// logFollows is the log follow of each session that set a level, by
// session ID. A follow leaves it when it ends, whether its session
// unregistered or not.
type logFollows struct {
	mu sync.Mutex
	m  map[string]*logFollow
}

type logFollow struct{ cancel context.CancelFunc }

// stop ends the follow of session id, if any; f.mu is held.
func (f *logFollows) stop(id string) {
	if lf := f.m[id]; lf != nil {
		lf.cancel()
		delete(f.m, id)
	}
}

// end removes lf, which has ended, unless a later follow replaced it.
func (f *logFollows) end(id string, lf *logFollow) {
	lf.cancel()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m[id] == lf {
		delete(f.m, id)
	}
}

// kilnLevel is the least level of Kiln's log (debug, info, warn, error)
// that an MCP level asks for.
func kilnLevel(l mcp.LoggingLevel) string {
	switch l {
	case mcp.LoggingLevelDebug:
		return "debug"
	case mcp.LoggingLevelInfo, mcp.LoggingLevelNotice:
		return "info"
	case mcp.LoggingLevelWarning:
		return "warn"
	}
	return "error"
}

// mcpLevel is the MCP level of a Kiln log record's level.
func mcpLevel(l string) mcp.LoggingLevel {
	switch strings.ToUpper(l) {
	case "DEBUG":
		return mcp.LoggingLevelDebug
	case "INFO":
		return mcp.LoggingLevelInfo
	case "WARN":
		return mcp.LoggingLevelWarning
	}
	return mcp.LoggingLevelError
}
