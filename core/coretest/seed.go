package coretest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// Seed stores n threads for owner "local" in one Update, for benchmarks of
// lists and queues at scale: every 20th unread
// (with a finished run), every 100th with an open interrupt (and an
// interrupted run), every 10th in one of ten folders, every 1000th pinned.
func Seed(t testing.TB, s core.Store, n int) {
	t.Helper()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := s.Update(context.Background(), func(tx core.Tx) error {
		for f := range 10 {
			if err := tx.PutFolder(&core.Folder{ID: fmt.Sprintf("fld_%d", f), Name: fmt.Sprint(f), Position: f,
				OwnerID: "local", CreatedAt: base, UpdatedAt: base}); err != nil {
				return err
			}
		}
		for i := range n {
			when := base.Add(time.Duration(i) * time.Second)
			th := &core.Thread{ID: fmt.Sprintf("thr_%06d", i), Title: fmt.Sprintf("Thread number %d", i),
				Pinned: i%1000 == 0, Source: core.SourceUser, OwnerID: "local", Status: core.ThreadIdle,
				LastMessage: "The answer is 42.", CreatedAt: when, UpdatedAt: when}
			if i%10 == 0 {
				th.FolderID = fmt.Sprintf("fld_%d", (i/10)%10)
			}
			var run *core.Run
			if i%20 == 1 || i%100 == 3 {
				run = &core.Run{ID: fmt.Sprintf("run_%06d", i), ThreadID: th.ID, OwnerID: "local",
					Status: core.RunSucceeded, Model: "scripted", CreatedAt: when, UpdatedAt: when}
				if i%20 == 1 {
					th.UnreadRunID = run.ID
				} else {
					run.Status = core.RunInterrupted
					th.ActiveRunID, th.Status, th.OpenActions = run.ID, core.ThreadInterrupted, 1
				}
			}
			if err := tx.PutThread(th); err != nil {
				return err
			}
			if run == nil {
				continue
			}
			if err := tx.PutRun(run); err != nil {
				return err
			}
			if i%100 == 3 {
				if err := tx.PutInterrupt(&core.Interrupt{ID: fmt.Sprintf("int_%06d", i), RunID: run.ID,
					ThreadID: th.ID, OwnerID: "local", Kind: core.InterruptApproval, ToolCallID: "call_1",
					Tool: "shell", Args: json.RawMessage(`{"cmd":"ls"}`), AllowedDecisions: core.AllDecisions,
					Status: core.InterruptOpen, CreatedAt: when}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
}
