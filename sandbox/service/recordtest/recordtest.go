// Package recordtest is the conformance suite of the sandbox records a
// Store keeps for the sandbox service (service.RecordReader and
// service.RecordTx), the part of a Store that sandbox/service owns. A
// backend's test calls
//
//	recordtest.Run(t, func(t *testing.T) core.Store { ... })
//
// beside coretest.RunStore. The suite fails at once when the Store's
// transactions do not keep records.
package recordtest

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sandbox/service"
)

// Run runs the suite. newStore must return a new, empty Store and arrange
// for it to be closed when t ends (t.Cleanup). The suite runs its
// subtests one after another.
func Run(t *testing.T, newStore func(t *testing.T) core.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s core.Store)
	}{
		{"Sandboxes", testSandboxes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newStore(t))
		})
	}
}

// t0 has nanoseconds and a non-UTC zone, so a store that drops either fails.
var t0 = time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.FixedZone("CET", 3600))

// at returns t0 plus i seconds and i nanoseconds.
func at(i int) time.Time { return t0.Add(time.Duration(i)*time.Second + time.Duration(i)) }

func ptr[T any](v T) *T { return &v }

const (
	alice = "usr_alice"
	bob   = "usr_bob"
)

// update runs fn in an Update of s with its records.
func update(t *testing.T, s core.Store, fn func(tx service.RecordTx) error) {
	t.Helper()
	_, err := s.Update(context.Background(), func(tx core.Tx) error {
		rt, ok := tx.(service.RecordTx)
		if !ok {
			t.Fatalf("the Store's Tx (%T) keeps no sandbox records: it does not implement service.RecordTx", tx)
		}
		return fn(rt)
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
}

// view runs fn in a View of s with its records.
func view(t *testing.T, s core.Store, fn func(tx service.RecordReader) error) {
	t.Helper()
	err := s.View(context.Background(), func(tx core.ReadTx) error {
		rt, ok := tx.(service.RecordReader)
		if !ok {
			t.Fatalf("the Store's ReadTx (%T) keeps no sandbox records: it does not implement service.RecordReader", tx)
		}
		return fn(rt)
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
}

// put stores records in one Update, in the order given.
func put(t *testing.T, s core.Store, sbs ...*core.Sandbox) {
	t.Helper()
	update(t, s, func(tx service.RecordTx) error {
		for _, sb := range sbs {
			if err := tx.PutSandbox(sb); err != nil {
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

// same fails t unless the records are equal, their times compared as
// instants.
func same(t *testing.T, what string, got, want *core.Sandbox) {
	t.Helper()
	g, w := normalize(*got), normalize(*want)
	if !reflect.DeepEqual(g, w) {
		gj, _ := json.Marshal(g)
		wj, _ := json.Marshal(w)
		t.Errorf("%s:\n got  %s\n want %s", what, gj, wj)
	}
}

// normalize puts a record's times in UTC without a monotonic reading.
func normalize(sb core.Sandbox) core.Sandbox {
	sb.CreatedAt, sb.UpdatedAt, sb.TransitionAt = sb.CreatedAt.UTC(), sb.UpdatedAt.UTC(), sb.TransitionAt.UTC()
	if sb.ExpiresAt != nil {
		sb.ExpiresAt = ptr(sb.ExpiresAt.UTC())
	}
	return sb
}

func sandboxIDs(sbs []*core.Sandbox) []string {
	out := make([]string, len(sbs))
	for i, sb := range sbs {
		out[i] = sb.ID
	}
	return out
}

// testSandboxes: records round-trip whole (a nil ExpiresAt, Request and
// Handle stay nil), list newest first with every filter, replace and
// delete.
func testSandboxes(t *testing.T, s core.Store) {
	full := &core.Sandbox{
		ID: "sbx_full", OwnerID: alice, Runtime: "docker", Pool: "busybox-small", Replica: "host-1-4f2a",
		Request:  json.RawMessage(`{"image":{"uri":"busybox"},"entrypoint":["tail","-f","/dev/null"]}`),
		Metadata: map[string]string{"team": "infra", "note": "✓"},
		State:    "Running", Reason: "claimed", Message: "from the warm pool",
		Handle:    json.RawMessage(`{"version":1,"data":"eyJpZCI6ImFiYyJ9"}`),
		ExpiresAt: ptr(at(9)), CreatedAt: at(3), UpdatedAt: at(4), TransitionAt: at(4),
	}
	bare := &core.Sandbox{ID: "sbx_bare", OwnerID: alice, Runtime: "wasm", State: "Pending", CreatedAt: at(1), UpdatedAt: at(1), TransitionAt: at(1)}
	paused := &core.Sandbox{ID: "sbx_paused", OwnerID: alice, Runtime: "docker", State: "Paused", ExpiresAt: ptr(at(2)),
		CreatedAt: at(5), UpdatedAt: at(5), TransitionAt: at(5)}
	bobs := &core.Sandbox{ID: "sbx_bob", OwnerID: bob, Runtime: "js", State: "Running", ExpiresAt: ptr(at(1)),
		CreatedAt: at(2), UpdatedAt: at(2), TransitionAt: at(2)}
	put(t, s, full, bare, paused, bobs)
	view(t, s, func(tx service.RecordReader) error {
		for _, want := range []*core.Sandbox{full, bare} {
			got, err := tx.Sandbox(want.ID)
			mustNil(t, "Sandbox", err)
			same(t, "sandbox "+want.ID, got, want)
		}
		_, err := tx.Sandbox("sbx_nope")
		wantCode(t, "Sandbox of an unknown ID", err, core.ENOTFOUND)
		empty := ""
		for _, c := range []struct {
			q    core.SandboxQuery
			want []string
		}{
			{core.SandboxQuery{}, []string{"sbx_paused", "sbx_full", "sbx_bob", "sbx_bare"}},
			{core.SandboxQuery{OwnerID: alice}, []string{"sbx_paused", "sbx_full", "sbx_bare"}},
			{core.SandboxQuery{OwnerID: alice, States: []string{"Running", "Pending"}}, []string{"sbx_full", "sbx_bare"}},
			{core.SandboxQuery{Runtime: "docker"}, []string{"sbx_paused", "sbx_full"}},
			{core.SandboxQuery{Pool: &empty}, []string{"sbx_paused", "sbx_bob", "sbx_bare"}},
			{core.SandboxQuery{ExpiresBefore: ptr(at(3))}, []string{"sbx_paused", "sbx_bob"}},
			{core.SandboxQuery{OwnerID: "usr_nobody"}, []string{}},
		} {
			got, err := tx.Sandboxes(c.q)
			mustNil(t, "Sandboxes", err)
			if ids := sandboxIDs(got); !reflect.DeepEqual(ids, c.want) {
				t.Errorf("Sandboxes(%+v) = %q, want %q", c.q, ids, c.want)
			}
		}
		return nil
	})
	repl := *full
	repl.State, repl.Reason, repl.Message, repl.Metadata, repl.ExpiresAt, repl.Handle = "Paused", "", "", nil, nil, nil
	put(t, s, &repl)
	update(t, s, func(tx service.RecordTx) error {
		got, err := tx.Sandbox(full.ID)
		mustNil(t, "Sandbox", err)
		same(t, "replaced sandbox", got, &repl)
		mustNil(t, "DeleteSandbox", tx.DeleteSandbox(bare.ID))
		wantCode(t, "DeleteSandbox again", tx.DeleteSandbox(bare.ID), core.ENOTFOUND)
		_, err = tx.Sandbox(bare.ID)
		wantCode(t, "Sandbox after delete", err, core.ENOTFOUND)
		wantCode(t, "PutSandbox without a runtime", tx.PutSandbox(&core.Sandbox{ID: "sbx_x", OwnerID: alice, State: "Running"}), core.EINVALID)
		return nil
	})
}
