package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/sdk/client"
)

func TestSandboxPath(t *testing.T) {
	for _, tc := range []struct {
		in     string
		id, p  string
		remote bool
	}{
		{"sbx-1:/tmp/a", "sbx-1", "/tmp/a", true},
		{"sbx-1:/", "sbx-1", "/", true},
		{"./a:/b", "", "", false},
		{"a:b", "", "", false},
		{":/b", "", "", false},
		{"/abs/file", "", "", false},
		{"file.txt", "", "", false},
	} {
		id, p, ok := sandboxPath(tc.in)
		if id != tc.id || p != tc.p || ok != tc.remote {
			t.Errorf("sandboxPath(%q) = %q %q %v", tc.in, id, p, ok)
		}
	}
}

func TestCommandLine(t *testing.T) {
	if got := commandLine([]string{"echo a | cat"}); got != "echo a | cat" {
		t.Errorf("one word: %q", got)
	}
	if got := commandLine([]string{"echo", "it's", "a b", "$HOME"}); got != `echo 'it'\''s' 'a b' '$HOME'` {
		t.Errorf("words: %q", got)
	}
}

func TestParseLifetime(t *testing.T) {
	if d, err := parseLifetime("none", true); err != nil || d != 0 {
		t.Errorf("none: %v %v", d, err)
	}
	if d, err := parseLifetime("90m", false); err != nil || d != 90*time.Minute {
		t.Errorf("90m: %v %v", d, err)
	}
	for _, s := range []string{"500ms", "-1h", "soon"} {
		if _, err := parseLifetime(s, true); err == nil {
			t.Errorf("%q is taken", s)
		}
	}
	if _, err := parseLifetime("none", false); err == nil {
		t.Error("none is taken where a duration is needed")
	}
}

func TestExpiresIn(t *testing.T) {
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	soon, past := now.Add(29*time.Minute+10*time.Second), now.Add(-time.Second)
	for _, tc := range []struct {
		at   *time.Time
		want string
	}{{nil, "never"}, {&soon, "in 29m10s"}, {&past, "expired"}} {
		if got := expiresIn(tc.at, now); got != tc.want {
			t.Errorf("expiresIn(%v) = %q, want %q", tc.at, got, tc.want)
		}
	}
}

func TestTransferLine(t *testing.T) {
	var b strings.Builder
	clock := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	line := transferLine(&b, "Uploading x", now)
	clock = clock.Add(time.Second)
	line(1<<20, 4<<20)
	line(2<<20, 4<<20) // within a tenth of a second: not drawn
	clock = clock.Add(time.Second)
	line(4<<20, 4<<20)
	want := "\rUploading x: 1 MiB of 4 MiB (25%), 1 MiB/s\x1b[K\rUploading x: 4 MiB of 4 MiB (100%), 2 MiB/s\x1b[K\n"
	if b.String() != want {
		t.Errorf("progress:\n%q\nwant\n%q", b.String(), want)
	}
	// Unknown size: no total, ended by (-1, -1).
	b.Reset()
	line = transferLine(&b, "Uploading stdin", now)
	clock = clock.Add(time.Second)
	line(512, -1)
	line(-1, -1)
	if want := "\rUploading stdin: 512 B, 512 B/s\x1b[K\n"; b.String() != want {
		t.Errorf("unknown size: %q", b.String())
	}
}

func TestElapsedLine(t *testing.T) {
	var b lockedBuffer
	clock := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	stop := elapsedLine(&b, "Starting a wasm sandbox", func() time.Time { return clock })
	stop()
	stop() // twice is harmless
	if want := "\rStarting a wasm sandbox… 0s\x1b[K\r\x1b[K"; b.String() != want {
		t.Errorf("elapsed line: %q, want %q", b.String(), want)
	}
}

// TestSandboxRow: an agent's sandbox (created without an image) shows
// "(default)", not "-"; a failed or terminated one no countdown.
func TestSandboxRow(t *testing.T) {
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	later := now.Add(29 * time.Minute)
	agent := &client.Sandbox{ID: "sbx_1", Runtime: "docker", ExpiresAt: &later, Metadata: map[string]string{client.MetaThread: "thr_1"}}
	agent.Status.State = client.SandboxRunning
	failed := &client.Sandbox{ID: "sbx_2", Runtime: "docker", Image: &client.SandboxImage{URI: "python:3.12-slim"}, ExpiresAt: &later}
	failed.Status.State = client.SandboxFailed
	for _, tc := range []struct {
		sb   *client.Sandbox
		want []string
	}{
		{agent, []string{"sbx_1", "Running", "docker", "(default)", "in 29m00s", "thr_1"}},
		{failed, []string{"sbx_2", "Failed", "docker", "python:3.12-slim", "-", "-"}},
	} {
		if got := sandboxRow(style{}, tc.sb, now); !slices.Equal(got, tc.want) {
			t.Errorf("sandboxRow(%s) = %q, want %q", tc.sb.ID, got, tc.want)
		}
	}
}
