package web

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/skills"
)

// skillRoutes registers the /api/v1/skills routes.
func (s *server) skillRoutes(r chi.Router) {
	r.Get("/skills", s.api(s.listSkills))
	r.Get("/skills/{name}", s.api(s.getSkill))
	r.Post("/skills", s.api(s.createSkill))
	r.Post("/skills/validate", s.api(s.validateSkill))
	r.Post("/skills/import", s.api(s.importSkill))
	r.Put("/skills/{name}", s.api(s.putSkill))
	r.Delete("/skills/{name}", s.api(s.deleteSkill))
}

// skillInput is the body of POST /skills (name and content), PUT
// /skills/{name} and POST /skills/validate (content, and the name the
// folder would have).
type skillInput struct {
	Name    string  `json:"name,omitempty"`
	Content *string `json:"content"`
}

func parseSkillInput(b []byte) (skillInput, error) {
	var in skillInput
	if err := unmarshalStrict(b, &in); err != nil {
		return in, err
	}
	if in.Content == nil {
		return in, errorf(core.EINVALID, "field \"content\" is required: the SKILL.md text")
	}
	return in, nil
}

// skillError turns a SKILL.md that does not parse into a 400 naming the
// line and the reason.
func skillError(err error) error {
	var pe *skills.ParseError
	if errors.As(err, &pe) {
		return errorf(core.EINVALID, "%s", pe.Error())
	}
	return err
}

// validateSkill parses a SKILL.md without storing it, for an editor that
// checks the frontmatter as the user types: 200 with valid, the error's
// file, line and reason, and the warnings.
func (s *server) validateSkill(w http.ResponseWriter, r *http.Request) (int, any, error) {
	in, err := decodeBody(w, r, true, parseSkillInput)
	if err != nil {
		return 0, nil, err
	}
	sk, warnings, err := skills.Check(in.Name, []byte(*in.Content))
	out := map[string]any{"valid": err == nil, "warnings": warnings}
	if warnings == nil {
		out["warnings"] = []skills.Warning{}
	}
	var pe *skills.ParseError
	switch {
	case errors.As(err, &pe):
		out["error"] = pe
	case err != nil:
		return 0, nil, err
	default:
		out["skill"] = sk
	}
	return http.StatusOK, out, nil
}

func (s *server) writeSkill(name string, content string, create bool) (int, any, error) {
	c, err := s.skillCatalog()
	if err != nil {
		return 0, nil, err
	}
	if create {
		if e, ok := c.Get(name); ok && e.Origin == skills.OriginCustom {
			return 0, nil, errorf(core.ECONFLICT, "a custom skill %q exists; change it with PUT", name)
		}
	}
	existed, err := c.WriteCustom(name, []byte(content))
	if err != nil {
		return 0, nil, skillError(err)
	}
	e, ok := c.Get(name)
	if !ok {
		return 0, nil, errorf(core.EINTERNAL, "skill %q vanished after it was written", name)
	}
	status := http.StatusOK
	if !existed {
		status = http.StatusCreated
	}
	return status, s.info(e, s.toolNames()), nil
}

// createSkill writes a new custom skill; ECONFLICT when one of that name
// exists (a plugin's or a built-in one of the name is shadowed, not a
// conflict).
func (s *server) createSkill(w http.ResponseWriter, r *http.Request) (int, any, error) {
	in, err := decodeBody(w, r, true, parseSkillInput)
	if err != nil {
		return 0, nil, err
	}
	return s.writeSkill(in.Name, *in.Content, true)
}

// putSkill creates or replaces the custom skill {name}.
func (s *server) putSkill(w http.ResponseWriter, r *http.Request) (int, any, error) {
	in, err := decodeBody(w, r, true, parseSkillInput)
	if err != nil {
		return 0, nil, err
	}
	name := chi.URLParam(r, "name")
	if in.Name != "" && in.Name != name {
		return 0, nil, errorf(core.EINVALID, "field \"name\" %q differs from the path's %q", in.Name, name)
	}
	return s.writeSkill(name, *in.Content, false)
}

// deleteSkill deletes a custom skill, revealing the one beneath.
func (s *server) deleteSkill(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	c, err := s.skillCatalog()
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, c.DeleteCustom(chi.URLParam(r, "name"))
}

// skillInfo is a skill as the API shows it: the effective copy of a name,
// where it comes from, what it shadows, and whether it is ready with the
// tools connected now.
type skillInfo struct {
	skills.Entry
	Ready    bool   `json:"ready"`
	NotReady string `json:"not_ready,omitempty"`
}

func (s *server) skillCatalog() (*skills.Catalog, error) {
	if s.opts.Skills == nil {
		return nil, errorf(core.ENOTFOUND, "skills are not available on this server")
	}
	return s.opts.Skills, nil
}

func (s *server) toolNames() []string {
	specs := s.svc.ToolSpecs()
	names := make([]string, len(specs))
	for i, sp := range specs {
		names[i] = sp.Name
	}
	return names
}

func (s *server) info(e skills.Entry, tools []string) skillInfo {
	ready, why := e.Ready(tools)
	return skillInfo{Entry: e, Ready: ready, NotReady: why}
}

// listSkills lists the effective skills by name, without their bodies,
// and the skills skipped with the reason (file, line).
func (s *server) listSkills(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	c, err := s.skillCatalog()
	if err != nil {
		return 0, nil, err
	}
	tools := s.toolNames()
	list := []skillInfo{}
	for _, e := range c.List() {
		lean := *e.Skill
		lean.Body = ""
		e.Skill = &lean
		list = append(list, s.info(e, tools))
	}
	problems := c.Problems()
	if problems == nil {
		problems = []skills.Problem{}
	}
	return http.StatusOK, map[string]any{"skills": list, "problems": problems}, nil
}

func (s *server) getSkill(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	c, err := s.skillCatalog()
	if err != nil {
		return 0, nil, err
	}
	name := chi.URLParam(r, "name")
	e, ok := c.Get(name)
	if !ok {
		return 0, nil, errorf(core.ENOTFOUND, "skill %q not found", name)
	}
	return http.StatusOK, s.info(e, s.toolNames()), nil
}

// importSkill adds a custom skill from a zip archive: a multipart form
// with one part "file" (at most skills.MaxImportBytes); ?replace=true
// overwrites a custom skill of the name.
func (s *server) importSkill(w http.ResponseWriter, r *http.Request) (int, any, error) {
	c, err := s.skillCatalog()
	if err != nil {
		return 0, nil, err
	}
	replace, err := queryBool(r, "replace")
	if err != nil {
		return 0, nil, err
	}
	const limit = skills.MaxImportBytes
	tooLarge := errorf(codeTooLarge, "the archive exceeds %s", core.FormatBytes(limit))
	part, err := formFile(w, r, limit, tooLarge, "upload the skill as a zip archive in multipart/form-data, part \"file\"")
	if err != nil {
		return 0, nil, err
	}
	data, err := io.ReadAll(io.LimitReader(part, limit+1))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe), len(data) > limit:
		return 0, nil, tooLarge
	case err != nil:
		return 0, nil, errorf(core.EINVALID, "could not read the upload: %s", err)
	}
	name, err := c.ImportZip(bytes.NewReader(data), int64(len(data)), replace)
	if err != nil {
		return 0, nil, skillError(err)
	}
	e, _ := c.Get(name)
	return http.StatusCreated, s.info(e, s.toolNames()), nil
}
