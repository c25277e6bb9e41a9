package coretest

import (
	"encoding/json"
	"testing"

	"github.com/kilnhq/kiln/core"
)

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
		ID: "sbx_full", OwnerID: alice, Runtime: "docker", Pool: "busybox-small",
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
	view(t, s, func(tx core.ReadTx) error {
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
			sameStrings(t, "Sandboxes", sandboxIDs(got), c.want)
		}
		return nil
	})
	repl := *full
	repl.State, repl.Reason, repl.Message, repl.Metadata, repl.ExpiresAt, repl.Handle = "Paused", "", "", nil, nil, nil
	put(t, s, &repl)
	update(t, s, func(tx core.Tx) error {
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
