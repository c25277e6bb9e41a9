package web

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/skills"
)

// skillRoutes registers the /api/v1/skills routes.
func (s *server) skillRoutes(r chi.Router) {
	r.Get("/skills", s.api(s.listSkills))
	r.Get("/skills/{name}", s.api(s.getSkill))
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
