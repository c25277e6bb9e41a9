package skills

import (
	"embed"
	"io/fs"
)

//go:embed builtin
var builtinFS embed.FS

// Builtin is the skills that ship inside the kiln binary (kiln-guide), as
// NewCatalog takes them: <name>/SKILL.md at its root.
func Builtin() fs.FS {
	sub, err := fs.Sub(builtinFS, "builtin")
	if err != nil {
		panic("skills: the embedded built-in skills are missing: " + err.Error())
	}
	return sub
}
