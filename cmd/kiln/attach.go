package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/client"
)

// progressMin is the size from which an upload shows its progress.
const progressMin = 1 << 20

// stderrIsTerminal reports whether w, the command's standard error, is a
// terminal that progress can be drawn on. Tests replace it.
var stderrIsTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// uploadFiles uploads the files at paths as attachments, in order. Every
// file is opened first, so a missing one fails before anything is sent.
// Files of progressMin bytes or more show their progress on errw when it
// is a terminal. On failure the attachments uploaded so far are deleted.
func uploadFiles(ctx context.Context, c *client.Client, paths []string, errw io.Writer) ([]*client.Attachment, error) {
	files := make([]*os.File, 0, len(paths))
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, localError{err: fmt.Errorf("--attach: %w", err)}
		}
		files = append(files, f)
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			return nil, localError{err: fmt.Errorf("--attach %s: not a regular file", p)}
		}
	}
	var done []*client.Attachment
	for i, f := range files {
		name := filepath.Base(paths[i])
		var opts []client.UploadOption
		if fi, err := f.Stat(); err == nil && fi.Size() >= progressMin && stderrIsTerminal(errw) {
			opts = append(opts, client.WithProgress(progressLine(errw, name, time.Now)))
		}
		a, err := c.UploadAttachment(ctx, name, f, opts...)
		if err != nil {
			deleteAttachments(ctx, c, done)
			if !strings.Contains(err.Error(), name) {
				err = fmt.Errorf("%s: %w", paths[i], err)
			}
			return nil, err
		}
		done = append(done, a)
	}
	return done, nil
}

// deleteAttachments deletes uploads no run took, as well as it can.
func deleteAttachments(ctx context.Context, c *client.Client, as []*client.Attachment) {
	for _, a := range as {
		_ = c.DeleteAttachment(context.WithoutCancel(ctx), a.ID)
	}
}

// attachmentIDs returns the attachments' IDs.
func attachmentIDs(as []*client.Attachment) []string {
	ids := make([]string, len(as))
	for i, a := range as {
		ids[i] = a.ID
	}
	return ids
}

// progressLine returns an upload progress callback that redraws one line
// on w, a terminal, at most every tenth of a second, and ends it when the
// upload is complete.
func progressLine(w io.Writer, name string, now func() time.Time) func(sent, total int64) {
	var last time.Time
	return func(sent, total int64) {
		complete := sent == total
		if t := now(); complete || t.Sub(last) >= 100*time.Millisecond {
			last = t
			line := fmt.Sprintf("Uploading %s: %s", name, core.FormatBytes(sent))
			if total > 0 {
				line += fmt.Sprintf(" of %s (%d%%)", core.FormatBytes(total), sent*100/total)
			}
			fmt.Fprintf(w, "\r%s\x1b[K", line)
			if complete {
				fmt.Fprintln(w)
			}
		}
	}
}
