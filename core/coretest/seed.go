package coretest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// SeedWords is the vocabulary of Seed's texts: 2,000 made-up words of two
// syllables ("kato", "rimelu" is not one), so any of them is in about one
// thread in 300 of a seeded store and "zzzz" in none.
var SeedWords = func() []string {
	var out []string
	for _, c1 := range "bdfgklmnprstvz" {
		for _, v1 := range "aeiou" {
			for _, c2 := range "bdfgklmnprstvz" {
				for _, v2 := range "aeiou" {
					if len(out) < 2000 && (c1+v1+c2+v2)%5 != 0 {
						out = append(out, string([]rune{c1, v1, c2, v2}))
					}
				}
			}
		}
	}
	return out
}()

// seedText is n words of SeedWords chosen by the generator state x.
func seedText(x *uint64, n int) string {
	ws := make([]string, n)
	for i := range ws {
		*x = *x*6364136223846793005 + 1442695040888963407
		ws[i] = SeedWords[(*x>>33)%uint64(len(SeedWords))]
	}
	return strings.Join(ws, " ")
}

// Seed stores n threads for owner "local" in one Update, for benchmarks of
// lists, queues and search at scale: each with a title of three words, a
// user message of 12 and an assistant reply of 20 (SeedWords); every 20th
// unread (with a finished run), every 100th with an open interrupt (and an
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
		x := uint64(42)
		for i := range n {
			when := base.Add(time.Duration(i) * time.Second)
			reply := seedText(&x, 20)
			th := &core.Thread{ID: fmt.Sprintf("thr_%06d", i), Title: seedText(&x, 3),
				Pinned: i%1000 == 0, Source: core.SourceUser, OwnerID: "local", Status: core.ThreadIdle,
				LastMessage: reply, CreatedAt: when, UpdatedAt: when}
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
			if err := tx.AppendMessages(
				&core.Message{ThreadID: th.ID, Role: core.RoleUser, Text: seedText(&x, 12), CreatedAt: when},
				&core.Message{ThreadID: th.ID, Role: core.RoleAssistant, Text: reply, CreatedAt: when},
			); err != nil {
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
