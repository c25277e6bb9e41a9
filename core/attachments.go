package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// MaxAttachments is how many attachments one message may carry.
const MaxAttachments = 10

// Blobs stores attachment bytes by content.
type Blobs interface {
	// Put stores what r yields, at most max bytes, and returns its SHA-256
	// (lowercase hex) and size. More than max bytes is ELIMIT, and nothing
	// is left behind.
	Put(r io.Reader, max int64) (sum string, size int64, err error)
	// Open reads the bytes stored under sum; ENOTFOUND when there are none.
	Open(sum string) (io.ReadCloser, error)
	// Remove deletes the bytes stored under sum; none is not an error.
	Remove(sum string) error
}

// DirBlobs keeps blobs as files <dir>/<first two hex digits>/<sum>,
// readable by the owner only.
type DirBlobs struct{ Dir string }

var reSum = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (d DirBlobs) path(sum string) (string, error) {
	if !reSum.MatchString(sum) {
		return "", Errorf(EINVALID, "bad blob sum %q", sum)
	}
	return filepath.Join(d.Dir, sum[:2], sum), nil
}

// Put writes r to a temporary file while hashing it, then renames it into
// place (or drops it when the content is there already).
func (d DirBlobs) Put(r io.Reader, max int64) (string, int64, error) {
	if err := os.MkdirAll(d.Dir, 0o700); err != nil {
		return "", 0, err
	}
	tmp, err := os.CreateTemp(d.Dir, ".upload-*")
	if err != nil {
		return "", 0, err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, max+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, err
	}
	if n > max {
		return "", 0, Errorf(ELIMIT, "the file is over the limit of %s", FormatBytes(max))
	}
	sum := hex.EncodeToString(h.Sum(nil))
	dst, _ := d.path(sum)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return "", 0, err
	}
	if _, err := os.Stat(dst); err == nil {
		return sum, n, nil
	}
	return sum, n, os.Rename(tmp.Name(), dst)
}

// Open opens the blob's file.
func (d DirBlobs) Open(sum string) (io.ReadCloser, error) {
	p, err := d.path(sum)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Errorf(ENOTFOUND, "attachment content %s is missing", sum[:12])
	}
	return f, err
}

// Remove deletes the blob's file.
func (d DirBlobs) Remove(sum string) error {
	p, err := d.path(sum)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// FormatBytes renders a size for people: 512 B, 1.5 KiB, 25 MiB.
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	s := fmt.Sprintf("%.1f", float64(n)/float64(div))
	return strings.TrimSuffix(s, ".0") + " " + "KMGTPE"[exp:exp+1] + "iB"
}

// AttachmentInput describes an upload. MIME is the type the server
// sniffed from the content, never the client's claim. The attachment is
// no thread's until a run's input takes it.
type AttachmentInput struct {
	Name string
	MIME string
}

// AddAttachment stores r's bytes (at most max) and records them as an
// attachment of p. ELIMIT over max, with nothing kept.
func (s *Service) AddAttachment(ctx context.Context, p Principal, in AttachmentInput, r io.Reader, max int64) (*Attachment, error) {
	if s.cfg.Blobs == nil {
		return nil, Errorf(EUNAVAIL, "attachments are not configured")
	}
	name := filepath.Base(strings.ReplaceAll(strings.TrimSpace(in.Name), `\`, "/"))
	if name == "" || name == "." || name == "/" {
		name = "attachment"
	}
	name, err := cleanName("file name", name, 255, true)
	if err != nil {
		return nil, err
	}
	if in.MIME == "" {
		return nil, Errorf(EINVALID, "attachment needs a media type")
	}
	s.blobMu.Lock()
	defer s.blobMu.Unlock()
	sum, size, err := s.cfg.Blobs.Put(r, max)
	if err != nil {
		return nil, err
	}
	now := s.now()
	a := &Attachment{ID: NewID("att", now), OwnerID: p.ID, Name: name, MIME: in.MIME, Size: size, SHA256: sum, CreatedAt: now}
	err = s.update(ctx, func(tx Tx) error { return tx.PutAttachment(a) })
	if err != nil {
		s.dropBlobLocked(ctx, sum)
		return nil, err
	}
	return a, nil
}

// GetAttachment returns one of p's attachments.
func (s *Service) GetAttachment(ctx context.Context, p Principal, id string) (*Attachment, error) {
	var a *Attachment
	err := s.view(ctx, func(tx ReadTx) (err error) {
		a, err = ownAttachment(tx, p, id)
		return err
	})
	return a, err
}

func ownAttachment(tx ReadTx, p Principal, id string) (*Attachment, error) {
	a, err := tx.Attachment(id)
	if err == nil && a.OwnerID != p.ID {
		err = Errorf(ENOTFOUND, "attachment %q not found", id)
	}
	return a, err
}

// OpenAttachment reads an attachment's bytes.
func (s *Service) OpenAttachment(a *Attachment) (io.ReadCloser, error) {
	if s.cfg.Blobs == nil {
		return nil, Errorf(EUNAVAIL, "attachments are not configured")
	}
	return s.cfg.Blobs.Open(a.SHA256)
}

// DeleteAttachment deletes one of p's attachments that no thread has
// taken yet; one a run's input took belongs to its thread (ECONFLICT) and
// goes with it.
func (s *Service) DeleteAttachment(ctx context.Context, p Principal, id string) error {
	var sum string
	err := s.update(ctx, func(tx Tx) error {
		a, err := ownAttachment(tx, p, id)
		if err != nil {
			return err
		}
		if a.ThreadID != "" {
			return Errorf(ECONFLICT, "attachment %q belongs to thread %q now; it is deleted with the thread", id, a.ThreadID)
		}
		sum = a.SHA256
		return tx.DeleteAttachment(id)
	})
	if err != nil {
		return err
	}
	s.dropBlobs(ctx, sum)
	return nil
}

// dropBlobs removes the blobs no attachment record refers to any more.
func (s *Service) dropBlobs(ctx context.Context, sums ...string) {
	if s.cfg.Blobs == nil {
		return
	}
	s.blobMu.Lock()
	defer s.blobMu.Unlock()
	for _, sum := range sums {
		s.dropBlobLocked(ctx, sum)
	}
}

func (s *Service) dropBlobLocked(ctx context.Context, sum string) {
	var left []*Attachment
	err := s.view(ctx, func(tx ReadTx) (err error) {
		left, err = tx.Attachments(AttachmentQuery{SHA256: sum})
		return err
	})
	if err != nil || len(left) > 0 {
		return
	}
	if err := s.cfg.Blobs.Remove(sum); err != nil {
		s.log.Warn("remove attachment content", "sum", sum, "err", err)
	}
}

// attachmentPart is the message part that refers to a.
func attachmentPart(a *Attachment) Part {
	typ := PartFile
	if strings.HasPrefix(a.MIME, "image/") {
		typ = PartImage
	}
	return Part{Type: typ, MIME: a.MIME, Name: a.Name, URI: AttachmentURI(a.ID)}
}

// AttachmentPath is where the file tools show an attachment.
func AttachmentPath(a *Attachment) string { return "/attachments/" + a.ID + "/" + a.Name }
