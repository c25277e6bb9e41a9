package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers/hub"
	"github.com/kilnhq/kiln/sdk/client"
)

// TestDestructiveCommandsConfirm: every command that deletes something
// asks on a terminal, requires --yes on a pipe and refuses without it,
// changing nothing.
func TestDestructiveCommandsConfirm(t *testing.T) {
	s := startServer(t, t.TempDir(), "")
	ctx := context.Background()
	c := sdk(t, s)
	newThread := func(title string) string {
		th, err := c.CreateThread(ctx, core.ThreadInput{Title: title})
		if err != nil {
			t.Fatal(err)
		}
		return th.ID
	}
	exists := func(id string) bool {
		_, err := c.GetThread(ctx, id)
		if err != nil && !client.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	one, two := newThread("one"), newThread("two")
	folder, err := c.CreateFolder(ctx, core.FolderInput{Name: "Work"})
	if err != nil {
		t.Fatal(err)
	}
	folderExists := func() bool {
		_, err := c.GetFolder(ctx, folder.ID)
		return err == nil
	}

	// On a pipe, without --yes: refused, with what to do, and nothing deleted.
	stdinIsTerminal = func(io.Reader) bool { return false }
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"threads", "rm", one}, "error: deleting thread " + one + " needs confirmation, and standard input is not a terminal to ask on: rerun with --yes\n"},
		{[]string{"threads", "rm", one, two}, "error: deleting 2 threads (" + one + ", " + two + ") needs confirmation"},
		{[]string{"threads", "rm", one, "-o", "json"}, "rerun with --yes"},
		{[]string{"folders", "rm", "work"}, "error: deleting folder Work (" + folder.ID + ") needs confirmation"},
	} {
		r := kilnIn(t, "y\n", tt.args...)
		if r.code != exitFailure || r.stdout != "" || !strings.HasPrefix(r.stderr, tt.want) && !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%v on a pipe: exit %d, stdout %q, stderr %q; want %q", tt.args, r.code, r.stdout, r.stderr, tt.want)
		}
	}
	if !exists(one) || !exists(two) || !folderExists() {
		t.Fatal("a refused command deleted something")
	}

	// On a terminal: asked on standard error; anything but y keeps it.
	withTerminal(t)
	for _, answer := range []string{"\n", "n\n", "no\n", ""} {
		r := kilnIn(t, answer, "threads", "rm", one)
		if r.code != exitFailure || r.stdout != "" || r.stderr != "Delete thread "+one+" with its runs and messages? [y/N] Not deleted.\n" {
			t.Errorf("threads rm answered %q: exit %d, stdout %q, stderr %q", answer, r.code, r.stdout, r.stderr)
		}
	}
	r := kilnIn(t, "\n", "folders", "rm", "Work")
	if r.code != exitFailure || r.stderr != "Delete folder Work ("+folder.ID+")? Its threads are kept, in no folder. [y/N] Not deleted.\n" {
		t.Errorf("folders rm declined: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if !exists(one) || !folderExists() {
		t.Fatal("a declined command deleted something")
	}
	r = kilnIn(t, "y\n", "threads", "rm", one, two)
	if r.code != 0 || r.stdout != "Deleted thread "+one+".\nDeleted thread "+two+".\n" ||
		r.stderr != "Delete 2 threads ("+one+", "+two+") with their runs and messages? [y/N] " {
		t.Errorf("threads rm confirmed: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = kilnIn(t, "YES\n", "folders", "rm", "Work")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "Deleted folder Work") || exists(one) || folderExists() {
		t.Errorf("folders rm confirmed: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// --yes (or -y) deletes without asking, on a pipe too.
	stdinIsTerminal = func(io.Reader) bool { return false }
	three, four := newThread("three"), newThread("four")
	if r = kiln(t, "threads", "rm", "--yes", three); r.code != 0 || r.stdout != "Deleted thread "+three+".\n" || r.stderr != "" {
		t.Errorf("threads rm --yes: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r = kiln(t, "threads", "rm", "-y", four, "-o", "json"); r.code != 0 || r.stdout != "" || r.stderr != "" || exists(four) {
		t.Errorf("threads rm -y -o json: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, cmd := range [][]string{{"threads", "rm"}, {"folders", "rm"}, {"plugin", "rm"}, {"providers", "reset"}} {
		r := kiln(t, append(cmd, "--help")...)
		mustContain(t, strings.Join(cmd, " ")+" --help", r.stdout, "-y, --yes", "standard input is not a terminal")
	}
}

func TestProvidersResetConfirms(t *testing.T) {
	fake := newFakeProviderHub()
	startProvidersServer(t, fake)
	stored := hub.ConfigInput{Settings: map[string]string{"api": "responses", "api_key": "sk-pasted"}}
	if _, err := fake.Configure(context.Background(), "openai", stored); err != nil {
		t.Fatal(err)
	}

	// On a pipe it is refused, before the server is asked anything.
	r := kilnFails(t, "", []string{"providers", "reset", "openai"},
		"error: resetting provider openai (forgetting its stored settings) needs confirmation, and standard input is not a terminal to ask on: rerun with --yes\n")
	if r.stdout != "" || len(fake.resetIDs()) != 0 {
		t.Fatalf("a refused reset: stdout %q, resets %v", r.stdout, fake.resetIDs())
	}

	withTerminal(t)
	r = kilnIn(t, "n\n", "providers", "reset", "openai")
	if r.code != exitFailure || r.stdout != "" || r.stderr != "Forget the settings stored for openai (api_key, api)? The pasted api_key cannot be recovered. [y/N] Not reset.\n" || len(fake.resetIDs()) != 0 {
		t.Fatalf("reset declined: exit %d, stdout %q, stderr %q, resets %v", r.code, r.stdout, r.stderr, fake.resetIDs())
	}
	r = kilnIn(t, "y\n", "providers", "reset", "openai")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "Forgot the stored configuration of openai.\n") || len(fake.resetIDs()) != 1 {
		t.Fatalf("reset confirmed: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// Nothing stored, nothing to lose: no question.
	r = kilnIn(t, "", "providers", "reset", "bedrock")
	if r.code != 0 || r.stderr != "" || len(fake.resetIDs()) != 2 {
		t.Fatalf("reset of nothing: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	kilnFails(t, "y\n", []string{"providers", "reset", "nope"}, `error: no provider "nope"`)
}
