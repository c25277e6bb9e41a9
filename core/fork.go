package core

import (
	"context"
	"strings"
	"time"
)

// ForkInput forks a thread at one of its messages: MessageIndex is the
// index of an assistant message (as Messages lists them). Title "" names
// the fork after its parent.
type ForkInput struct {
	MessageIndex *int   `json:"message_index"`
	Title        string `json:"title,omitempty"`
}

// ForkThread copies one of p's threads up to a completed assistant turn
// into a new thread (source fork) that records its parent thread and
// message and keeps the folder, the model and the working folder: the
// messages up to the turn and the results of its tool calls, the turn's
// attachments and the virtual files as they were then. EINVALID without
// a message index or for one out of range; ECONFLICT while a run is
// active, at a message that is not an assistant's, or at a turn whose
// tool calls do not all have results.
func (s *Service) ForkThread(ctx context.Context, p Principal, id string, in ForkInput) (*Thread, error) {
	if in.MessageIndex == nil {
		return nil, Errorf(EINVALID, "message_index is required: the index of the assistant message to fork at")
	}
	title, err := cleanName("title", in.Title, MaxTitleLen, false)
	if err != nil {
		return nil, err
	}
	at := *in.MessageIndex
	var fork *Thread
	err = s.update(ctx, func(tx Tx) error {
		t, err := ownThread(tx, p, id)
		if err != nil {
			return err
		}
		if t.ActiveRunID != "" {
			return Errorf(ECONFLICT, "thread %q has an active run %q; fork it when the run has ended", id, t.ActiveRunID)
		}
		msgs, err := tx.Messages(id, 0, 0)
		if err != nil {
			return err
		}
		cut, err := forkCut(msgs, at)
		if err != nil {
			return err
		}
		now := s.now()
		if title == "" {
			title = forkTitle(t.Title)
		}
		parent := at
		fork = &Thread{
			ID: NewID("thr", now), Title: title, FolderID: t.FolderID, Source: SourceFork, OwnerID: p.ID,
			Model: t.Model, WorkingFolder: t.WorkingFolder, ParentThreadID: t.ID, ParentMessage: &parent,
			Status: ThreadIdle, CreatedAt: now, UpdatedAt: now,
		}
		if err := tx.PutThread(fork); err != nil {
			return err
		}
		uris, err := copyAttachments(tx, t.ID, fork.ID, msgs[:cut], now)
		if err != nil {
			return err
		}
		copies := make([]*Message, cut)
		last := ""
		for i, m := range msgs[:cut] {
			c := *m
			c.ThreadID, c.RunID, c.CreatedAt = fork.ID, "", now
			if m.Parts != nil {
				c.Parts = make([]Part, len(m.Parts))
				for j, part := range m.Parts {
					if u, ok := uris[part.URI]; ok {
						part.URI = u
					}
					c.Parts[j] = part
				}
			}
			if c.Text != "" && c.Role != RoleTool {
				last = c.Text
			}
			copies[i] = &c
		}
		if err := tx.AppendMessages(copies...); err != nil {
			return err
		}
		// The history up to the cut, versions and deletions as they were,
		// so a fork of the fork at an earlier turn sees what the parent had.
		versions, err := tx.FileVersions(id, cut)
		if err != nil {
			return err
		}
		for _, f := range versions {
			c := *f
			c.ThreadID, c.RunID = fork.ID, ""
			if err := tx.PutFile(&c); err != nil {
				return err
			}
		}
		settle(fork, threadChange{text: last}, now)
		if err := tx.PutThread(fork); err != nil {
			return err
		}
		return emit(tx, p.ID, fork.ID, "", EventThreadCreated, fork)
	})
	if err != nil {
		return nil, err
	}
	return fork, nil
}

// forkCut checks that msgs[at] is a completed assistant turn and returns
// how many messages a fork there copies: through the results of its tool
// calls.
func forkCut(msgs []*Message, at int) (int, error) {
	if at < 0 || at >= len(msgs) {
		return 0, Errorf(EINVALID, "message_index %d is out of range: the thread has %d messages", at, len(msgs))
	}
	m := msgs[at]
	switch {
	case m.Role != RoleAssistant:
		return 0, Errorf(ECONFLICT, "can only fork at a completed assistant turn; message %d is a %s message", at, m.Role)
	case m.Namespace != "":
		return 0, Errorf(ECONFLICT, "can only fork at a turn of the thread's own conversation; message %d is a subagent's", at)
	}
	cut := at + 1
	for _, call := range m.ToolCalls {
		found := false
		// A subagent's messages may lie between a call and its result.
		for j := at + 1; j < len(msgs) && (msgs[j].Role == RoleTool || msgs[j].Namespace != ""); j++ {
			if msgs[j].Namespace == "" && msgs[j].ToolCallID == call.ID {
				found = true
				cut = max(cut, j+1)
			}
		}
		if !found {
			return 0, Errorf(ECONFLICT, "cannot fork mid-tool-call: the tool call %s (%s) of message %d has no result", call.ID, call.Name, at)
		}
	}
	return cut, nil
}

func forkTitle(parent string) string {
	t := strings.TrimSuffix(parent, " (fork)") + " (fork)"
	if r := []rune(t); len(r) > MaxTitleLen {
		t = string(r[:MaxTitleLen])
	}
	return t
}

// copyAttachments gives the fork a record of each of the parent's
// attachments that the copied messages use (the bytes are shared by
// content) and returns the parent's URIs mapped to the fork's.
func copyAttachments(tx Tx, from, to string, msgs []*Message, now time.Time) (map[string]string, error) {
	atts, err := tx.Attachments(AttachmentQuery{ThreadID: from})
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, m := range msgs {
		for _, p := range m.Parts {
			used[p.URI] = true
		}
	}
	uris := make(map[string]string, len(atts))
	for _, a := range atts {
		if !used[AttachmentURI(a.ID)] {
			continue
		}
		c := *a
		c.ID, c.ThreadID, c.CreatedAt = NewID("att", now), to, now
		if err := tx.PutAttachment(&c); err != nil {
			return nil, err
		}
		uris[AttachmentURI(a.ID)] = AttachmentURI(c.ID)
	}
	return uris, nil
}
