package main

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
)

// placeholder is an argument a footer tells to fill in from a column:
// INTERRUPT, THREAD, RUN.
var placeholder = regexp.MustCompile(`\b[A-Z]{3,}\b`)

// TestInboxFootersNameTheirColumns: the line under each queue's table
// tells what to run with values of the table, by the names of its
// columns, and names no column the table does not have.
func TestInboxFootersNameTheirColumns(t *testing.T) {
	s := startServer(t, t.TempDir(), "")
	ctx := context.Background()
	c := sdk(t, s)
	for _, text := range []string{"text Done.", `tool append_file {"path":"notes.txt","line":"hi"}`} {
		th, err := c.CreateThread(ctx, core.ThreadInput{Title: "Footers"})
		if err != nil {
			t.Fatal(err)
		}
		run, err := c.StartRun(ctx, th.ID, core.RunRequest{Input: core.RunInput{Text: text}})
		if err == nil {
			_, err = c.WaitRun(ctx, run.ID)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	r := kilnOK(t, "", "inbox")
	sections := strings.Split(strings.TrimSpace(r.stdout), "\n\n")
	if len(sections) != 2 || !strings.HasPrefix(sections[0], "Action (1)\n") || !strings.HasPrefix(sections[1], "Unread (1)\n") {
		t.Fatalf("inbox:\n%s", r.stdout)
	}
	for _, sec := range sections {
		lines := strings.Split(sec, "\n")
		if len(lines) != 4 {
			t.Fatalf("a queue of one item is a title, a header, a row and a footer:\n%s", sec)
		}
		header, footer := strings.Fields(lines[1]), lines[3]
		names := placeholder.FindAllString(footer, -1)
		if len(names) == 0 {
			t.Errorf("the footer %q names no column", footer)
		}
		for _, name := range names {
			if !slices.Contains(header, name) {
				t.Errorf("%s: the footer %q names %s, which is not a column of %v", lines[0], footer, name, header)
			}
		}
	}
	mustContain(t, "inbox", r.stdout, "Decide with: kiln approve|reject|edit|respond INTERRUPT")
}
