package web

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/skills"
)

func TestSkillsAPI(t *testing.T) {
	dir := t.TempDir()
	cat, err := skills.NewCatalog(filepath.Join(dir, "skills"), skills.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Options{Skills: cat})
	body := func(name, content string) string {
		b, _ := json.Marshal(map[string]string{"name": name, "content": content})
		return string(b)
	}
	md := "---\nname: notes\ndescription: Takes notes.\ntools: echo append_file\nversion: 3\n---\nTake notes.\n"
	var sk map[string]any
	e.call("POST", "/api/v1/skills", body("notes", md), http.StatusCreated, &sk)
	if sk["origin"] != "custom" || sk["ready"] != true {
		t.Fatalf("created %v", sk)
	}
	e.wantError("POST", "/api/v1/skills", body("notes", md), nil, http.StatusConflict, core.ECONFLICT)
	r := e.wantError("PUT", "/api/v1/skills/notes", body("", "---\nname: notes\n---\nno description\n"), nil, http.StatusBadRequest, core.EINVALID)
	if !strings.Contains(string(r.body), "SKILL.md:") {
		t.Fatalf("parse error without a line: %s", r.body)
	}
	e.call("PUT", "/api/v1/skills/notes", body("", strings.Replace(md, "Takes notes.", "Takes better notes.", 1)), http.StatusOK, &sk)
	if sk["description"] != "Takes better notes." {
		t.Fatalf("replaced %v", sk)
	}
	// A custom kiln-guide shadows the built-in one; deleting it reveals it.
	guide := "---\nname: kiln-guide\ndescription: Mine.\n---\nx\n"
	e.call("PUT", "/api/v1/skills/kiln-guide", body("", guide), http.StatusCreated, &sk)
	if sh, _ := sk["shadows"].([]any); len(sh) != 1 {
		t.Fatalf("shadows %v", sk)
	}
	e.call("DELETE", "/api/v1/skills/kiln-guide", "", http.StatusNoContent, nil)
	e.call("GET", "/api/v1/skills/kiln-guide", "", http.StatusOK, &sk)
	if sk["origin"] != "builtin" {
		t.Fatalf("after delete %v", sk)
	}
	e.wantError("DELETE", "/api/v1/skills/kiln-guide", "", nil, http.StatusNotFound, core.ENOTFOUND)

	var v map[string]any
	e.call("POST", "/api/v1/skills/validate", body("x", "---\nname: x\ndescription: ok\nfoo: 1\n---\nbody\n"), http.StatusOK, &v)
	if v["valid"] != true || len(v["warnings"].([]any)) != 1 {
		t.Fatalf("validate ok %v", v)
	}
	e.call("POST", "/api/v1/skills/validate", body("x", "---\nname: x\ndescription: [\n---\n"), http.StatusOK, &v)
	if errv, _ := v["error"].(map[string]any); v["valid"] != false || errv["line"] == nil {
		t.Fatalf("validate bad %v", v)
	}
	var list struct {
		Skills []map[string]any
	}
	e.call("GET", "/api/v1/skills", "", http.StatusOK, &list)
	if len(list.Skills) != 2 || list.Skills[1]["body"] != nil && list.Skills[1]["body"] != "" {
		t.Fatalf("list %v", list.Skills)
	}
}

func TestSkillImportAPI(t *testing.T) {
	cat, err := skills.NewCatalog(filepath.Join(t.TempDir(), "skills"), nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Options{Skills: cat})
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	w, _ := zw.Create("pdf/SKILL.md")
	w.Write([]byte("---\nname: pdf\ndescription: PDFs.\n---\nx\n"))
	w, _ = zw.Create("pdf/references/spec.md")
	w.Write([]byte("spec"))
	zw.Close()
	post := func(query string) response {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, _ := mw.CreateFormFile("file", "pdf.zip")
		fw.Write(zbuf.Bytes())
		mw.Close()
		return e.raw("POST", "/api/v1/skills/import"+query, buf.String(), map[string]string{"Content-Type": mw.FormDataContentType()})
	}
	if r := post(""); r.status != http.StatusCreated || !strings.Contains(string(r.body), `"origin":"custom"`) {
		t.Fatalf("import: %d %s", r.status, r.body)
	}
	if r := post(""); r.status != http.StatusConflict {
		t.Fatalf("second import: %d %s", r.status, r.body)
	}
	if r := post("?replace=true"); r.status != http.StatusCreated {
		t.Fatalf("replace: %d %s", r.status, r.body)
	}
	e.wantError("POST", "/api/v1/skills/import", `{}`, nil, http.StatusUnsupportedMediaType, codeUnsupportedMedia)
}
