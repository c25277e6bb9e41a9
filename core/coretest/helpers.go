package coretest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// t0 has nanoseconds and a non-UTC zone, so a store that drops either fails.
var t0 = time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.FixedZone("CET", 3600))

// at returns t0 plus i seconds and i nanoseconds.
func at(i int) time.Time { return t0.Add(time.Duration(i)*time.Second + time.Duration(i)) }

func ptr[T any](v T) *T { return &v }

const (
	alice = "usr_alice"
	bob   = "usr_bob"
)

func update(t *testing.T, s core.Store, fn func(tx core.Tx) error) []core.Event {
	t.Helper()
	evs, err := s.Update(context.Background(), fn)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	return evs
}

func view(t *testing.T, s core.Store, fn func(tx core.ReadTx) error) {
	t.Helper()
	if err := s.View(context.Background(), fn); err != nil {
		t.Fatalf("View: %v", err)
	}
}

// put stores objects in one Update, in the order given.
func put(t *testing.T, s core.Store, objs ...any) {
	t.Helper()
	update(t, s, func(tx core.Tx) error {
		for _, o := range objs {
			var err error
			switch o := o.(type) {
			case *core.Folder:
				err = tx.PutFolder(o)
			case *core.Thread:
				err = tx.PutThread(o)
			case *core.Run:
				err = tx.PutRun(o)
			case *core.Message:
				err = tx.AppendMessages(o)
			case *core.Checkpoint:
				err = tx.PutCheckpoint(o)
			case *core.Interrupt:
				err = tx.PutInterrupt(o)
			case core.Event:
				err = tx.Emit(o)
			case *core.Grant:
				err = tx.PutGrant(o)
			case *core.Settings:
				err = tx.PutSettings(o)
			case *core.Attachment:
				err = tx.PutAttachment(o)
			case *core.File:
				err = tx.PutFile(o)
			case *core.Trigger:
				err = tx.PutTrigger(o)
			case *core.Occurrence:
				err = tx.PutOccurrence(o)
			default:
				err = fmt.Errorf("coretest: cannot put %T", o)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := core.ErrorCode(err); got != code {
		t.Errorf("%s: error %v (code %q), want code %q", what, err, got, code)
	}
}

func mustNil(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

var timeType = reflect.TypeOf(time.Time{})

// normalize rewrites every time.Time reachable from v (through pointers,
// structs and slices) to UTC without a monotonic reading, so equal instants
// compare equal with reflect.DeepEqual.
func normalize(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			normalize(v.Elem())
		}
	case reflect.Struct:
		if v.Type() == timeType {
			if v.CanSet() {
				tm := v.Interface().(time.Time)
				if tm.IsZero() {
					v.Set(reflect.Zero(timeType))
				} else {
					v.Set(reflect.ValueOf(tm.UTC()))
				}
			}
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				normalize(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			normalize(v.Index(i))
		}
	}
}

// same fails t unless got and want are deeply equal once their times are
// normalized. Pass pointers or slices.
func same(t *testing.T, what string, got, want any) {
	t.Helper()
	normalize(reflect.ValueOf(got))
	normalize(reflect.ValueOf(want))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got  %s\n want %s", what, dump(got), dump(want))
	}
}

func dump(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

func threadIDs(ts []*core.Thread) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func runIDs(rs []*core.Run) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func interruptIDs(is []*core.Interrupt) []string {
	out := make([]string, len(is))
	for i, x := range is {
		out[i] = x.ID
	}
	return out
}

func itemKeys(items []*core.InboxItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		if it.Queue == core.QueueAction {
			out[i] = it.InterruptID
		} else {
			out[i] = it.ThreadID
		}
	}
	return out
}

func sameStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got  %q\n want %q", what, got, want)
	}
}

// sortThreads sorts by the contract's order: pinned first, UpdatedAt
// descending, ID descending.
func sortThreads(ts []*core.Thread) {
	sort.Slice(ts, func(i, j int) bool {
		a, b := ts[i], ts[j]
		if a.Pinned != b.Pinned {
			return a.Pinned
		}
		if !a.UpdatedAt.Equal(b.UpdatedAt) {
			return a.UpdatedAt.After(b.UpdatedAt)
		}
		return a.ID > b.ID
	})
}

func newThread(id, owner string, updated time.Time) *core.Thread {
	return &core.Thread{
		ID: id, Title: "Thread " + id, Source: core.SourceUser, OwnerID: owner,
		Status: core.ThreadIdle, CreatedAt: t0, UpdatedAt: updated,
	}
}

func newRun(id, threadID, owner string, status core.RunStatus, created time.Time) *core.Run {
	return &core.Run{
		ID: id, ThreadID: threadID, OwnerID: owner, Status: status, Model: "scripted",
		Input: core.RunInput{Text: "hi"}, CreatedAt: created, UpdatedAt: created,
	}
}

func newInterrupt(id, runID, threadID, owner, status string, created time.Time) *core.Interrupt {
	return &core.Interrupt{
		ID: id, RunID: runID, ThreadID: threadID, OwnerID: owner, Kind: core.InterruptApproval,
		ToolCallID: "call_" + id, Tool: "shell", Args: json.RawMessage(`{"cmd":"ls"}`),
		AllowedDecisions: []string{core.DecisionApprove, core.DecisionReject}, Reason: "policy",
		Status: status, CreatedAt: created,
	}
}

func newGrant(id, owner, name string, created time.Time) *core.Grant {
	return &core.Grant{ID: id, Name: name, Path: "/home/" + owner + "/" + name, OwnerID: owner, CreatedAt: created}
}

func newAttachment(id, owner, threadID, sha string, created time.Time) *core.Attachment {
	return &core.Attachment{ID: id, OwnerID: owner, ThreadID: threadID, Name: id + ".png", MIME: "image/png",
		Size: 1234, SHA256: sha, CreatedAt: created}
}

// newFile is a version of path holding data.
func newFile(threadID, path string, seq int, data string, updated time.Time) *core.File {
	return &core.File{ThreadID: threadID, Path: path, Seq: seq, Data: []byte(data), Size: len(data), UpdatedAt: updated}
}

// deletedFile is a version that deletes path.
func deletedFile(threadID, path string, seq int, updated time.Time) *core.File {
	return &core.File{ThreadID: threadID, Path: path, Seq: seq, Deleted: true, UpdatedAt: updated}
}

func grantIDs(gs []*core.Grant) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.ID
	}
	return out
}

func attachmentIDs(as []*core.Attachment) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.ID
	}
	return out
}

func filePaths(fs []*core.File) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Path
	}
	return out
}

func textMessage(threadID, runID, role, text string, created time.Time) *core.Message {
	return &core.Message{ThreadID: threadID, RunID: runID, Role: role, Text: text, CreatedAt: created}
}
