package core_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
)

// TestStartedRunClaim: the driver of a run that StartRun makes active on
// a new thread resumes from what the starting Update wrote, without
// reading it back; what it is given is exactly what ReadClaim reads (the
// stored copies, redacted, times as stored), for runs with a secret in
// their input and system text, with limits, a policy, a pinned model and
// an attachment. On a thread with earlier messages the driver is given
// the lease alone and reads the rest.
func TestStartedRunClaim(t *testing.T) {
	const secret = "hunter2-but-longer"
	red := core.NewRedactor()
	red.SetSecret("test", secret)
	e := newEnv(t, listModel{})
	svc := e.service(func(c *core.Config) {
		c.Redactor = red
		c.Blobs = core.DirBlobs{Dir: filepath.Join(t.TempDir(), "attachments")}
	})
	ctx := context.Background()
	att, err := svc.AddAttachment(ctx, owner, core.AttachmentInput{Name: "data.csv", MIME: "text/csv"}, strings.NewReader("a,b\n1,2\n"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		req  core.RunRequest
	}{
		{"plain", core.RunRequest{Input: core.RunInput{Text: "go"}}},
		{"secret", core.RunRequest{Input: core.RunInput{Text: "use " + secret}, System: "the key is " + secret}},
		{"limits and policy", core.RunRequest{Input: core.RunInput{Text: "go"}, Model: "fake",
			Limits: core.Limits{MaxSteps: 7, MaxToolCalls: 3}, InterruptOn: core.Policy{"w": {Interrupt: true}}}},
		{"attachment", core.RunRequest{Input: core.RunInput{Text: "read it", Attachments: []string{att.ID}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			th := e.thread(svc)
			run, claim, err := svc.StartRunClaim(ctx, owner, th.ID, c.req)
			if err != nil {
				t.Fatal(err)
			}
			if claim == nil || claim.Run == nil {
				t.Fatalf("a run started on a new thread: claim %+v, want the run to resume from", claim)
			}
			if claim.Run == run {
				t.Error("the driver's run is the one StartRun returns, not a copy")
			}
			stored := readClaim(t, e, claim.Lease)
			if !reflect.DeepEqual(claim, stored) {
				t.Errorf("claim given to the driver differs from ReadClaim's:\n%s\n%s", jsonOf(t, claim), jsonOf(t, stored))
			}
			if strings.Contains(jsonOf(t, claim), secret) {
				t.Errorf("claim holds the secret: %s", jsonOf(t, claim))
			}
		})
	}

	t.Run("thread with messages", func(t *testing.T) {
		th := e.thread(svc)
		waitRun(t, svc, start(t, svc, th.ID, core.RunRequest{Input: core.RunInput{Text: "one"}}).ID, core.RunSucceeded)
		_, claim, err := svc.StartRunClaim(ctx, owner, th.ID, core.RunRequest{Input: core.RunInput{Text: "two"}})
		if err != nil {
			t.Fatal(err)
		}
		if claim == nil || claim.Run != nil || claim.Lease.Token == 0 {
			t.Fatalf("a run on a thread with messages: claim %+v, want the lease alone", claim)
		}
		if stored := readClaim(t, e, claim.Lease); len(stored.Messages) != 3 {
			t.Errorf("ReadClaim: %d messages, want the thread's 3", len(stored.Messages))
		}
	})
}

func readClaim(t *testing.T, e *env, l core.Lease) *core.RunClaim {
	t.Helper()
	var c *core.RunClaim
	err := e.store.View(context.Background(), func(tx core.ReadTx) (err error) {
		c, err = core.ReadClaim(tx, l)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
