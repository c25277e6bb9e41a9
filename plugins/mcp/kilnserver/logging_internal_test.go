package kilnserver

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// followBackend is a Backend whose log has one record.
type followBackend struct{ Backend }

func (followBackend) FollowLogs(ctx context.Context, _ string, fn func(json.RawMessage) error) error {
	if err := fn(json.RawMessage(`{"level":"WARN","component":"test","msg":"x"}`)); err != nil {
		return err
	}
	<-ctx.Done()
	return ctx.Err()
}

// gone is a session the server does not know (it went away without
// unregistering), so no notification reaches it.
type gone struct{}

func (gone) Initialize()       {}
func (gone) Initialized() bool { return true }
func (gone) NotificationChannel() chan<- mcp.JSONRPCNotification {
	return make(chan mcp.JSONRPCNotification)
}
func (gone) SessionID() string { return "gone-1" }

// TestLogFollowEnds: a session's log follow that ends because a record
// cannot be sent leaves the follows, though the session never
// unregistered.
func TestLogFollowEnds(t *testing.T) {
	hooks := &server.Hooks{}
	s := server.NewMCPServer("kiln-test", "1", server.WithHooks(hooks), server.WithLogging())
	f := addLogging(s, hooks, followBackend{})
	ctx := s.WithContext(context.Background(), gone{})
	if len(hooks.OnAfterSetLevel) != 1 {
		t.Fatalf("%d setLevel hooks", len(hooks.OnAfterSetLevel))
	}
	for _, hook := range hooks.OnAfterSetLevel {
		hook(ctx, 1, &mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelWarning}}, &mcp.EmptyResult{})
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.mu.Lock()
		n := len(f.m)
		f.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d follows left after the session's follow ended", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
