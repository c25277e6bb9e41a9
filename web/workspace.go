package web

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/kilnhq/kiln/core"
)

// DefaultMaxAttachment is the default size limit of one upload (25 MiB).
const DefaultMaxAttachment = 25 << 20

// workspaceRoutes registers the routes of the agent's workspace: folder
// grants, settings, attachments, memories, a thread's virtual files and
// fork.
func (s *server) workspaceRoutes(r chi.Router) {
	r.Get("/grants", s.api(s.listGrants))
	r.Post("/grants", s.api(s.addGrant))
	r.Delete("/grants/{id}", s.api(s.removeGrant))

	r.Get("/settings", s.api(s.getSettings))
	r.Put("/settings", s.api(s.putSettings))

	r.Post("/attachments", s.api(s.uploadAttachment))
	r.Get("/attachments/{id}", s.api(s.getAttachment))
	r.Get("/attachments/{id}/content", s.attachmentContent)
	r.Delete("/attachments/{id}", s.api(s.deleteAttachment))

	r.Get("/memories", s.api(s.listMemories))
	r.Post("/memories", s.api(s.createMemory))
	r.Get("/memories/{name}", s.api(s.getMemory))
	r.Put("/memories/{name}", s.api(s.putMemory))
	r.Delete("/memories/{name}", s.api(s.deleteMemory))

	r.Get("/threads/{id}/files", s.api(s.listThreadFiles))
	r.Get("/threads/{id}/files/*", s.threadFileContent)
	r.Post("/threads/{id}/fork", s.api(s.forkThread))
}

func (s *server) listGrants(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	gs, err := s.svc.ListGrants(r.Context(), principal(r))
	return http.StatusOK, map[string]any{"grants": gs}, err
}

func (s *server) addGrant(w http.ResponseWriter, r *http.Request) (int, any, error) {
	in, err := decodeBody(w, r, true, func(b []byte) (core.GrantInput, error) {
		var in core.GrantInput
		return in, unmarshalStrict(b, &in)
	})
	if err != nil {
		return 0, nil, err
	}
	g, err := s.svc.AddGrant(r.Context(), principal(r), in)
	return http.StatusCreated, g, err
}

func (s *server) removeGrant(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	return http.StatusNoContent, nil, s.svc.RemoveGrant(r.Context(), principal(r), id(r))
}

func (s *server) getSettings(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	st, err := s.svc.Settings(r.Context(), principal(r))
	return http.StatusOK, st, err
}

// putSettings changes the fields the body names; the others keep their
// values.
func (s *server) putSettings(w http.ResponseWriter, r *http.Request) (int, any, error) {
	p, err := decodeBody(w, r, true, func(b []byte) (core.SettingsPatch, error) {
		var p core.SettingsPatch
		return p, unmarshalStrict(b, &p)
	})
	if err != nil {
		return 0, nil, err
	}
	st, err := s.svc.UpdateSettings(r.Context(), principal(r), p)
	return http.StatusOK, st, err
}

// uploadAttachment takes a multipart form with one part "file", streamed
// to the blob store: the size limit applies to the file, its type is
// sniffed from its bytes (the part's Content-Type is ignored) and only
// images and text are accepted.
func (s *server) uploadAttachment(w http.ResponseWriter, r *http.Request) (int, any, error) {
	limit := s.opts.MaxAttachment
	tooLarge := errorf(codeTooLarge, "the file exceeds the attachment limit of %s", core.FormatBytes(limit))
	part, err := formFile(w, r, limit, tooLarge, "upload an attachment as multipart/form-data with a part named \"file\"")
	if err != nil {
		return 0, nil, err
	}
	br := bufio.NewReaderSize(part, 4096)
	head, _ := br.Peek(512)
	name := part.FileName()
	kind, err := sniff(head, name)
	if err != nil {
		return 0, nil, err
	}
	a, err := s.svc.AddAttachment(r.Context(), principal(r), core.AttachmentInput{Name: name, MIME: kind}, br, limit)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe), core.ErrorCode(err) == core.ELIMIT:
		return 0, nil, tooLarge
	case err != nil:
		return 0, nil, err
	}
	return http.StatusCreated, attachmentBody(a), nil
}

// formFile returns the part "file" of a multipart/form-data body, whose
// file may be limit bytes (the envelope gets 64 KiB more): tooLarge for a
// bigger body, 415 with hint for another media type, 400 for a malformed
// form or one without the part. Reading the part may still fail with an
// *http.MaxBytesError, which the caller answers with tooLarge.
func formFile(w http.ResponseWriter, r *http.Request, limit int64, tooLarge error, hint string) (*multipart.Part, error) {
	if r.ContentLength > limit+64<<10 {
		return nil, tooLarge
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, errorf(codeUnsupportedMedia, "%s", hint)
	}
	mr := multipart.NewReader(http.MaxBytesReader(w, r.Body, limit+64<<10), params["boundary"])
	for {
		part, err := mr.NextPart()
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, tooLarge
		case errors.Is(err, io.EOF):
			return nil, errorf(core.EINVALID, "the form has no part named \"file\"")
		case err != nil:
			return nil, errorf(core.EINVALID, "malformed multipart body: %s", err)
		}
		if part.FormName() == "file" {
			return part, nil
		}
		part.Close()
	}
}

// attachmentBody is an attachment as the API shows it, with the URI a
// message part uses.
func attachmentBody(a *core.Attachment) map[string]any {
	return map[string]any{
		"id": a.ID, "name": a.Name, "mime_type": a.MIME, "size": a.Size, "sha256": a.SHA256,
		"thread_id": a.ThreadID, "uri": core.AttachmentURI(a.ID), "created_at": a.CreatedAt,
	}
}

// imageTypes are the image types models take.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// textTypes name text files by extension; any other text is text/plain.
var textTypes = map[string]string{
	".csv": "text/csv", ".md": "text/markdown", ".markdown": "text/markdown", ".json": "application/json",
	".html": "text/html", ".htm": "text/html", ".xml": "text/xml", ".yaml": "text/yaml", ".yml": "text/yaml",
	".tsv": "text/tab-separated-values",
}

// sniff decides an upload's media type from its first bytes (and, for
// text, its name's extension): an image models take, or UTF-8 text.
// Anything else is refused with 415.
func sniff(head []byte, name string) (string, error) {
	detected, _, _ := strings.Cut(http.DetectContentType(head), ";")
	if imageTypes[detected] {
		return detected, nil
	}
	if core.IsText(head, false) {
		if t, ok := textTypes[strings.ToLower(path.Ext(name))]; ok {
			return t, nil
		}
		return "text/plain", nil
	}
	return "", errorf(codeUnsupportedMedia, "%s is %s; attachments are images (PNG, JPEG, GIF, WebP) or UTF-8 text files", clip(name, 100), detected)
}

func (s *server) getAttachment(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	a, err := s.svc.GetAttachment(r.Context(), principal(r), id(r))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, attachmentBody(a), nil
}

// attachmentContent serves an attachment's bytes with its sniffed type,
// as a download unless it is an image, never sniffed again by the browser.
func (s *server) attachmentContent(w http.ResponseWriter, r *http.Request) {
	a, err := s.svc.GetAttachment(r.Context(), principal(r), id(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rc, err := s.svc.OpenAttachment(a)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", a.MIME)
	w.Header().Set("Content-Length", strconv.FormatInt(a.Size, 10))
	w.Header().Set("Cache-Control", "private, max-age=31536000, immutable")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; sandbox")
	disposition := "attachment"
	if imageTypes[a.MIME] {
		disposition = "inline"
	}
	w.Header().Set("Content-Disposition", mime.FormatMediaType(disposition, map[string]string{"filename": a.Name}))
	io.Copy(w, rc)
}

func (s *server) deleteAttachment(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	return http.StatusNoContent, nil, s.svc.DeleteAttachment(r.Context(), principal(r), id(r))
}

func (s *server) listMemories(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	ms, err := s.svc.Memories(r.Context(), principal(r))
	return http.StatusOK, map[string]any{"memories": ms}, err
}

// memoryInput is the body of POST /memories (name and content) and PUT
// /memories/{name} (content).
type memoryInput struct {
	Name    string  `json:"name,omitempty"`
	Content *string `json:"content"`
}

func parseMemoryInput(b []byte) (memoryInput, error) {
	var in memoryInput
	if err := unmarshalStrict(b, &in); err != nil {
		return in, err
	}
	if in.Content == nil {
		return in, errorf(core.EINVALID, "field \"content\" is required")
	}
	return in, nil
}

// createMemory creates a memory; ECONFLICT when the name is taken.
func (s *server) createMemory(w http.ResponseWriter, r *http.Request) (int, any, error) {
	in, err := decodeBody(w, r, true, parseMemoryInput)
	if err != nil {
		return 0, nil, err
	}
	if err := core.CheckMemoryName(in.Name); err != nil {
		return 0, nil, err
	}
	if _, err := s.svc.ReadMemory(r.Context(), principal(r), in.Name); err == nil {
		return 0, nil, errorf(core.ECONFLICT, "memory %q exists; change it with PUT", in.Name)
	}
	m, err := s.svc.WriteMemory(r.Context(), principal(r), in.Name, []byte(*in.Content))
	return http.StatusCreated, m, err
}

func (s *server) getMemory(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	m, err := s.svc.ReadMemory(r.Context(), principal(r), chi.URLParam(r, "name"))
	return http.StatusOK, m, err
}

func (s *server) putMemory(w http.ResponseWriter, r *http.Request) (int, any, error) {
	in, err := decodeBody(w, r, true, parseMemoryInput)
	if err != nil {
		return 0, nil, err
	}
	name := chi.URLParam(r, "name")
	if in.Name != "" && in.Name != name {
		return 0, nil, errorf(core.EINVALID, "field \"name\" %q differs from the path's %q", in.Name, name)
	}
	m, err := s.svc.WriteMemory(r.Context(), principal(r), name, []byte(*in.Content))
	return http.StatusOK, m, err
}

func (s *server) deleteMemory(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	return http.StatusNoContent, nil, s.svc.DeleteMemory(r.Context(), principal(r), chi.URLParam(r, "name"))
}

func (s *server) listThreadFiles(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	fs, err := s.svc.ThreadFiles(r.Context(), principal(r), id(r))
	return http.StatusOK, map[string]any{"files": fs}, err
}

// threadFileContent serves one virtual file's bytes as text when they are
// UTF-8, else as a download.
func (s *server) threadFileContent(w http.ResponseWriter, r *http.Request) {
	f, err := s.svc.ThreadFile(r.Context(), principal(r), id(r), "/"+chi.URLParam(r, "*"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ct := "application/octet-stream"
	if utf8.Valid(f.Data) {
		ct = "text/plain; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", fmt.Sprint(len(f.Data)))
	w.Header().Set("Content-Security-Policy", "default-src 'none'; sandbox")
	w.Write(f.Data)
}

func (s *server) forkThread(w http.ResponseWriter, r *http.Request) (int, any, error) {
	in, err := decodeBody(w, r, true, func(b []byte) (core.ForkInput, error) {
		var in core.ForkInput
		return in, unmarshalStrict(b, &in)
	})
	if err != nil {
		return 0, nil, err
	}
	t, err := s.svc.ForkThread(r.Context(), principal(r), id(r), in)
	return http.StatusCreated, t, err
}
