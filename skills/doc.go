// Package skills reads SKILL.md skills and keeps the catalog of them.
//
// A skill is a folder <name>/ holding a SKILL.md: YAML frontmatter between
// two --- lines, then a markdown body of instructions. Parse reads one,
// following the open Agent Skills specification (name, description,
// license, compatibility, metadata, allowed-tools) plus Kiln's optional
// fields (tools, interruptOn, model); allowed-tools in Claude Code's form
// (Bash, Read, Bash(python:*) ...) maps to Kiln's tools (AllowedTool) and
// joins tools. Errors are *ParseError values that
// carry the line of the offending field; unknown fields are kept in
// Skill.Extra and reported as warnings.
//
// A Catalog merges three sources by name, custom (a folder on disk) over
// plugin (skills a plugin ships; Catalog implements the skillbundle.Host
// interface) over builtin (an fs.FS given at construction), and reports
// what each entry shadows and which skills were skipped and why.
//
// The package is a library: it serves no HTTP and links no plugin host.
package skills
