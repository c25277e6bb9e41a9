package plugins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
)

// APIVersion is the only manifest apiVersion this Kiln reads.
const APIVersion = "kiln.dev/v1"

// ManifestFile is the manifest's file name inside a plugin folder.
const ManifestFile = "kiln-plugin.json"

// MaxManifestSize is the largest manifest ParseManifest and LoadManifest
// read, in bytes (256 KiB).
const MaxManifestSize = 256 << 10

// Runtime is how a plugin runs.
type Runtime string

// Runtimes.
const (
	RuntimeWASM    Runtime = "wasm"    // a WASM module run by wazero, deny by default
	RuntimeProcess Runtime = "process" // a go-plugin subprocess; permissions not enforceable
)

// Capability is a kind of extension a plugin provides: the name of a
// Kind. The kinds' packages define them (toolset.Name, ...); a manifest
// may list the kinds registered with RegisterKind.
type Capability string

var runtimes = []Runtime{RuntimeWASM, RuntimeProcess}

// presentOf names which of runtime, entry and sha256 a manifest has.
func presentOf(runtime, entry, sum bool) string {
	var have []string
	for _, f := range []struct {
		name string
		has  bool
	}{{"runtime", runtime}, {"entry", entry}, {"sha256", sum}} {
		if f.has {
			have = append(have, f.name)
		}
	}
	return strings.Join(have, " and ")
}

// Manifest is a plugin's kiln-plugin.json. A *Manifest returned by
// ParseManifest or LoadManifest satisfies every rule in doc.go: its
// slices and maps are nil rather than empty, SettingsSchema is compact
// JSON, and Permissions.TimeoutMS (except for a data-only bundle, which
// runs nothing) and MemoryMiB (for wasm) hold the defaults when the file
// left them out.
type Manifest struct {
	// Schema is the optional "$schema" URI editors use; Kiln ignores it.
	Schema         string          `json:"$schema,omitempty"`
	APIVersion     string          `json:"apiVersion"`
	ID             string          `json:"id"`
	Version        string          `json:"version"`
	Description    string          `json:"description"`
	Provides       []Capability    `json:"provides"`
	Runtime        Runtime         `json:"runtime,omitempty"`
	Entry          string          `json:"entry,omitempty"`
	SHA256         string          `json:"sha256,omitempty"`
	Permissions    Permissions     `json:"permissions"`
	InterruptOn    core.Policy     `json:"interruptOn,omitempty"`
	SettingsSchema json.RawMessage `json:"settingsSchema,omitempty"`
}

// FieldError is one problem in a manifest. Field is the path of the
// offending value ("version", "permissions.network[2]",
// `interruptOn["docker_*"]`), or "" for the document as a whole.
type FieldError struct {
	Field  string
	Reason string
}

func (e FieldError) String() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// ManifestError lists every problem found in a manifest, in a stable
// order. It unwraps to a *core.Error with code EINVALID carrying the same
// message, so core.ErrorCode reports EINVALID.
type ManifestError struct {
	Errors []FieldError
}

func (e *ManifestError) Error() string {
	if len(e.Errors) == 1 {
		return "invalid plugin manifest: " + e.Errors[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "invalid plugin manifest (%d problems):", len(e.Errors))
	for _, fe := range e.Errors {
		b.WriteString("\n  ")
		b.WriteString(fe.String())
	}
	return b.String()
}

// Unwrap returns the error as a *core.Error with code EINVALID.
func (e *ManifestError) Unwrap() error {
	return &core.Error{Code: core.EINVALID, Message: e.Error()}
}

// ErrChecksumMismatch is wrapped by every check that finds a plugin's
// bytes are not the ones its manifest or its install recorded
// (plugins/integrity).
var ErrChecksumMismatch = errors.New("sha256 mismatch")

// LoadManifest reads and parses dir/kiln-plugin.json. The file must be a
// regular file inside dir (a symlink may point elsewhere inside dir, not
// out of it) of at most MaxManifestSize bytes. A manifest that breaks the
// rules yields an error wrapping *ManifestError; I/O failures are returned
// wrapped with the file name.
func LoadManifest(dir string) (*Manifest, error) {
	name := filepath.Join(dir, ManifestFile)
	data, err := readContained(dir, ManifestFile, MaxManifestSize)
	if err != nil {
		return nil, fmt.Errorf("load plugin manifest %s: %w", name, err)
	}
	m, err := ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

// readContained reads the regular file rel inside dir, refusing symlinks
// that leave dir and files larger than limit bytes.
func readContained(dir, rel string, limit int64) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// Stat before Open so a FIFO or device is refused without blocking.
	fi, err := root.Stat(rel)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", rel)
	}
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("larger than %d KiB", limit>>10)
	}
	return data, nil
}

// ConsentSummary returns the lines of the install consent prompt:
// ConsentOf(m).Lines().
func (m *Manifest) ConsentSummary() []string { return ConsentOf(m).Lines() }

// More patterns shared with specs/kiln-plugin.schema.json (see permissions.go).
const (
	patternID          = `^[a-z][a-z0-9-]*(?:\.[a-z0-9-]+)*$`
	patternSemver      = `^(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)(?:-(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*)?(?:\+[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*)?$`
	patternSHA256      = `^[0-9a-f]{64}$`
	patternEntry       = `^` + reSeg + `(?:/` + reSeg + `)*$`
	patternDescription = "^[^\\x00-\\x1f\\x7f-\\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]*$"
)

const (
	maxIDLen          = 64
	maxVersionLen     = 128
	maxDescriptionLen = 300
)

var (
	reID          = regexp.MustCompile(patternID)
	reSemver      = regexp.MustCompile(patternSemver)
	reSHA256      = regexp.MustCompile(patternSHA256)
	reEntry       = regexp.MustCompile(patternEntry)
	reDescription = regexp.MustCompile(patternDescription)
	reIdentifier  = regexp.MustCompile(`^[0-9A-Za-z-]+$`)
)

// ParseManifest decodes and validates a manifest. Decoding is strict:
// unknown fields, duplicate keys, null values and trailing data are
// errors. It returns every problem at once as a *ManifestError, or the
// manifest with defaults filled in.
func ParseManifest(data []byte) (*Manifest, error) {
	var p parser
	return p.parse(data)
}

// ParseBuiltinManifest parses the manifest of a plugin built into the kiln
// binary: the rules of ParseManifest, except that its runtime is
// "builtin" and it has no entry or sha256 (nothing is loaded from disk).
func ParseBuiltinManifest(data []byte) (*Manifest, error) {
	p := parser{builtin: true}
	return p.parse(data)
}

func (p *parser) parse(data []byte) (*Manifest, error) {
	m := p.manifest(data)
	if len(p.errs) > 0 {
		return nil, &ManifestError{Errors: p.errs}
	}
	return m, nil
}

// parser collects the problems of one manifest.
type parser struct {
	errs []FieldError
	// builtin parses a built-in's manifest: runtime "builtin", no entry.
	builtin bool
}

func (p *parser) fail(field, format string, args ...any) {
	p.errs = append(p.errs, FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

var manifestFields = []string{"$schema", "apiVersion", "id", "version", "description", "provides", "runtime", "entry", "sha256", "permissions", "interruptOn", "settingsSchema"}

func (p *parser) manifest(data []byte) *Manifest {
	if len(data) > MaxManifestSize {
		p.fail("", "the manifest is larger than %d KiB", MaxManifestSize>>10)
		return nil
	}
	if err := syntaxError(data); err != "" {
		p.fail("", "%s", err)
		return nil
	}
	fields, ok := p.object("", data, manifestFields)
	if !ok {
		return nil
	}
	// Everything else is read under the apiVersion, so an unknown one is
	// the only problem worth reporting.
	var m Manifest
	if raw, ok := fields["apiVersion"]; !ok {
		p.errs = []FieldError{{"apiVersion", fmt.Sprintf("required (want %q)", APIVersion)}}
		return nil
	} else if v, ok := p.str("apiVersion", raw); !ok {
		p.errs = p.errs[len(p.errs)-1:]
		return nil
	} else if v != APIVersion {
		p.errs = []FieldError{{"apiVersion", fmt.Sprintf("unknown version %q (want %q)", v, APIVersion)}}
		return nil
	} else {
		m.APIVersion = v
	}
	if raw, ok := fields["$schema"]; ok {
		m.Schema, _ = p.str("$schema", raw)
	}
	for _, name := range []string{"id", "version", "description", "provides"} {
		if _, ok := fields[name]; !ok {
			p.fail(name, "required")
		}
	}
	// A manifest without runtime, entry and sha256 is a data-only bundle;
	// one with any of them needs all three.
	_, hasRuntime := fields["runtime"]
	_, hasEntry := fields["entry"]
	_, hasSum := fields["sha256"]
	dataOnly := !hasRuntime && !hasEntry && !hasSum
	switch {
	case p.builtin:
		if raw := fields["runtime"]; string(raw) != `"builtin"` {
			p.fail("runtime", "a built-in plugin's runtime is %q", RuntimeBuiltin)
		}
		for _, f := range []string{"entry", "sha256"} {
			if _, ok := fields[f]; ok {
				p.fail(f, "a built-in plugin has none")
			}
		}
	case !dataOnly:
		for _, f := range []struct {
			name string
			has  bool
		}{{"runtime", hasRuntime}, {"entry", hasEntry}, {"sha256", hasSum}} {
			if !f.has {
				p.fail(f.name, "required with %s (leave out runtime, entry and sha256 together for a data-only bundle)", presentOf(hasRuntime, hasEntry, hasSum))
			}
		}
	}
	if raw, ok := fields["id"]; ok {
		if s, ok := p.str("id", raw); ok {
			p.check("id", checkID(s))
			m.ID = s
		}
	}
	if raw, ok := fields["version"]; ok {
		if s, ok := p.str("version", raw); ok {
			p.check("version", checkSemver(s))
			m.Version = s
		}
	}
	if raw, ok := fields["description"]; ok {
		if s, ok := p.str("description", raw); ok {
			p.check("description", checkDescription(s))
			m.Description = s
		}
	}
	if raw, ok := fields["provides"]; ok {
		m.Provides = p.provides(raw)
	}
	runtimeOK := false
	if raw, ok := fields["runtime"]; ok {
		if s, ok := p.str("runtime", raw); ok {
			if slices.Contains(runtimes, Runtime(s)) || p.builtin && Runtime(s) == RuntimeBuiltin {
				runtimeOK = true
			} else if !p.builtin {
				p.fail("runtime", "%q is not one of %q, %q", s, RuntimeWASM, RuntimeProcess)
			}
			m.Runtime = Runtime(s)
		}
	}
	if raw, ok := fields["entry"]; ok {
		if s, ok := p.str("entry", raw); ok {
			p.check("entry", checkEntry(s))
			m.Entry = s
		}
	}
	if raw, ok := fields["sha256"]; ok {
		if s, ok := p.str("sha256", raw); ok {
			if !reSHA256.MatchString(s) {
				p.fail("sha256", "%q must be 64 lowercase hex digits", s)
			}
			m.SHA256 = s
		}
	}
	var rt Runtime
	switch {
	case runtimeOK:
		rt = m.Runtime
	case dataOnly:
		rt = RuntimeData
		for i, c := range m.Provides {
			if _, known := LookupKind(c); known && !IsDataKind(c) {
				p.fail(index("provides", i), "%q needs code: a data-only bundle (no runtime, entry or sha256) provides only %s", c, quoteList(DataKinds()))
			}
		}
	}
	if raw, ok := fields["permissions"]; ok {
		m.Permissions = p.permissions(raw, rt)
	}
	if m.Permissions.TimeoutMS == 0 && !dataOnly {
		// A data-only bundle runs nothing; calls into what it defines
		// (an MCP server) take their deadline from there.
		m.Permissions.TimeoutMS = DefaultTimeoutMS
	}
	if rt == RuntimeWASM && m.Permissions.MemoryMiB == 0 {
		m.Permissions.MemoryMiB = DefaultMemoryMiB
	}
	if raw, ok := fields["interruptOn"]; ok {
		m.InterruptOn = p.interruptOn(raw)
	}
	if raw, ok := fields["settingsSchema"]; ok {
		m.SettingsSchema = p.settingsSchema(raw)
	}
	return &m
}

// check records reason for field unless it is "".
func (p *parser) check(field, reason string) {
	if reason != "" {
		p.fail(field, "%s", reason)
	}
}

func (p *parser) provides(raw json.RawMessage) []Capability {
	items, ok := p.array("provides", raw)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		p.fail("provides", "must list at least one of %s", quoteList(RegisteredKinds()))
	}
	var out []Capability
	for i, it := range items {
		f := index("provides", i)
		s, ok := p.str(f, it)
		if !ok {
			continue
		}
		c := Capability(s)
		switch {
		case !known(c):
			p.fail(f, "%q is not one of %s", s, quoteList(RegisteredKinds()))
		case slices.Contains(out, c):
			p.fail(f, "%q is listed twice", s)
		}
		out = append(out, c)
	}
	return out
}

var permissionFields = []string{"network", "filesystem", "env", "exec", "memory_mib", "timeout_ms"}

// permissions decodes the permissions object; rt is the manifest's runtime
// or "" when that is missing or invalid (then runtime-specific rules are
// not checked).
func (p *parser) permissions(raw json.RawMessage, rt Runtime) Permissions {
	var perms Permissions
	fields, ok := p.object("permissions", raw, permissionFields)
	if !ok {
		return perms
	}
	if raw, ok := fields["network"]; ok {
		items, _ := p.array("permissions.network", raw)
		seen := map[string]bool{}
		for i, it := range items {
			f := index("permissions.network", i)
			s, ok := p.str(f, it)
			if !ok {
				continue
			}
			if _, reason := parseNetwork(s); reason != "" {
				p.fail(f, "%s", reason)
			} else if seen[s] {
				p.fail(f, "%q is listed twice", s)
			}
			seen[s] = true
			perms.Network = append(perms.Network, s)
		}
	}
	if raw, ok := fields["filesystem"]; ok {
		items, _ := p.array("permissions.filesystem", raw)
		seen := map[string]int{}
		for i, it := range items {
			f := index("permissions.filesystem", i)
			g, ok := p.fsGrant(f, it)
			if !ok {
				continue
			}
			if j, dup := seen[g.Path]; dup {
				p.fail(f+".path", "%q is also granted by permissions.filesystem[%d]; merge the two", g.Path, j)
			} else if g.Path != "" {
				seen[g.Path] = i
			}
			perms.Filesystem = append(perms.Filesystem, g)
		}
	}
	if raw, ok := fields["env"]; ok {
		items, _ := p.array("permissions.env", raw)
		seen := map[string]bool{}
		for i, it := range items {
			f := index("permissions.env", i)
			s, ok := p.str(f, it)
			if !ok {
				continue
			}
			if reason := checkEnv(s); reason != "" {
				p.fail(f, "%s", reason)
			} else if seen[s] {
				p.fail(f, "%q is listed twice", s)
			}
			seen[s] = true
			perms.Env = append(perms.Env, s)
		}
	}
	if raw, ok := fields["exec"]; ok {
		if b, ok := p.boolean("permissions.exec", raw); ok {
			if b && rt == RuntimeWASM {
				p.fail("permissions.exec", "only allowed for runtime %q and data-only bundles", RuntimeProcess)
			}
			perms.Exec = b
		}
	}
	if raw, ok := fields["memory_mib"]; ok {
		if n, ok := p.integer("permissions.memory_mib", raw, 1, MaxMemoryMiB); ok {
			if rt == RuntimeProcess || rt == RuntimeData {
				p.fail("permissions.memory_mib", "applies only to runtime %q", RuntimeWASM)
			}
			perms.MemoryMiB = n
		}
	}
	if raw, ok := fields["timeout_ms"]; ok {
		if n, ok := p.integer("permissions.timeout_ms", raw, 1, MaxTimeoutMS); ok {
			perms.TimeoutMS = n
		}
	}
	return perms
}

func (p *parser) fsGrant(field string, raw json.RawMessage) (FilesystemGrant, bool) {
	var g FilesystemGrant
	fields, ok := p.object(field, raw, []string{"path", "read", "write"})
	if !ok {
		return g, false
	}
	if raw, ok := fields["path"]; !ok {
		p.fail(field+".path", "required")
	} else if s, ok := p.str(field+".path", raw); ok {
		p.check(field+".path", checkFSPath(s))
		g.Path = s
	}
	if raw, ok := fields["read"]; ok {
		g.Read, _ = p.boolean(field+".read", raw)
	}
	if raw, ok := fields["write"]; ok {
		g.Write, _ = p.boolean(field+".write", raw)
	}
	if !g.Read && !g.Write {
		p.fail(field, "grants neither read nor write (set \"read\", \"write\" or both to true)")
	}
	return g, true
}

func (p *parser) interruptOn(raw json.RawMessage) core.Policy {
	if kind(raw) != "object" {
		p.fail("interruptOn", "must be an object, not %s", kind(raw))
		return nil
	}
	keys, ok := p.entries("interruptOn", raw)
	if !ok {
		return nil
	}
	var pol core.Policy
	for _, e := range keys {
		f := "interruptOn[" + strconv.Quote(e.key) + "]"
		if k := kind(e.raw); k != "boolean" && k != "object" {
			p.fail(f, `must be true, false or {"allowed_decisions": [...]}, not %s`, k)
			continue
		}
		var r core.Rule
		if err := json.Unmarshal(e.raw, &r); err != nil {
			p.fail(f, `must be true, false or {"allowed_decisions": [...]} with a non-empty list of decisions`)
			continue
		}
		if err := (core.Policy{e.key: r}).Validate(); err != nil {
			msg := core.ErrorMessage(err)
			msg = strings.TrimPrefix(msg, "interrupt_on "+strconv.Quote(e.key)+": ")
			msg = strings.TrimPrefix(msg, "interrupt_on: ")
			p.fail(f, "%s", msg)
		}
		if pol == nil {
			pol = core.Policy{}
		}
		pol[e.key] = r
	}
	return pol
}

// settingsSchemaURL names the settings schema while it is compiled.
const settingsSchemaURL = "urn:kiln:plugin-settings"

// settingsSchema checks a settings schema: an object with "type" or
// "properties" that compiles, referring to the standard meta-schemas (built
// into the compiler) and to itself, never to a file or a URL.
func (p *parser) settingsSchema(raw json.RawMessage) json.RawMessage {
	const f = "settingsSchema"
	if kind(raw) != "object" {
		p.fail(f, "must be a JSON Schema object, not %s", kind(raw))
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		p.fail(f, "%v", err)
		return nil
	}
	_, hasType := obj["type"]
	_, hasProps := obj["properties"]
	if !hasType && !hasProps {
		p.fail(f, `must have "type" or "properties"`)
		return nil
	}
	if _, err := core.CompileSchema(settingsSchemaURL, raw); err != nil {
		p.fail(f, "not a valid JSON Schema: %s", core.SchemaErrorText(err, settingsSchemaURL, "settingsSchema"))
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		p.fail(f, "%v", err)
		return nil
	}
	return buf.Bytes()
}

// checkID returns why id is not a valid plugin id, or "".
func checkID(id string) string {
	switch {
	case id == "":
		return "must not be empty"
	case len(id) > maxIDLen:
		return fmt.Sprintf("%q is %d characters long (max %d)", id, len(id), maxIDLen)
	case strings.Contains(id, "..") || strings.HasSuffix(id, "."):
		return fmt.Sprintf("%q has an empty segment", id)
	case !reID.MatchString(id):
		return fmt.Sprintf("%q must be lowercase letters, digits, dots and dashes, starting with a letter", id)
	}
	return ""
}

// checkSemver returns why v is not a SemVer 2.0.0 version, or "".
func checkSemver(v string) string {
	bad := func(why string) string { return fmt.Sprintf("%q is not semver (%s)", v, why) }
	if len(v) > maxVersionLen {
		return fmt.Sprintf("is %d characters long (max %d)", len(v), maxVersionLen)
	}
	if strings.HasPrefix(v, "v") || strings.HasPrefix(v, "V") {
		return bad(`drop the leading "v"`)
	}
	rest, build, hasBuild := strings.Cut(v, "+")
	release, pre, hasPre := strings.Cut(rest, "-")
	nums := strings.Split(release, ".")
	if len(nums) != 3 {
		return bad("want MAJOR.MINOR.PATCH")
	}
	for i, n := range nums {
		part := [...]string{"MAJOR", "MINOR", "PATCH"}[i]
		switch {
		case n == "" || strings.Trim(n, "0123456789") != "":
			return bad("want MAJOR.MINOR.PATCH")
		case len(n) > 1 && n[0] == '0':
			return bad(part + " has a leading zero")
		}
	}
	if hasPre {
		for id := range strings.SplitSeq(pre, ".") {
			switch {
			case id == "":
				return bad("empty pre-release identifier")
			case !reIdentifier.MatchString(id):
				return bad(fmt.Sprintf("pre-release identifier %q has characters outside [0-9A-Za-z-]", id))
			case len(id) > 1 && id[0] == '0' && strings.Trim(id, "0123456789") == "":
				return bad(fmt.Sprintf("numeric pre-release identifier %q has a leading zero", id))
			}
		}
	}
	if hasBuild {
		for id := range strings.SplitSeq(build, ".") {
			switch {
			case id == "":
				return bad("empty build identifier")
			case !reIdentifier.MatchString(id):
				return bad(fmt.Sprintf("build identifier %q has characters outside [0-9A-Za-z-]", id))
			}
		}
	}
	if !reSemver.MatchString(v) {
		return bad("want MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]") // unreachable unless the checks above drift
	}
	return ""
}

// checkDescription returns why s is not a valid description, or "".
func checkDescription(s string) string {
	n := utf8.RuneCountInString(s)
	switch {
	case n == 0:
		return "must not be empty"
	case n > maxDescriptionLen:
		return fmt.Sprintf("is %d characters long (max %d)", n, maxDescriptionLen)
	case !reDescription.MatchString(s):
		return "must be one line without control or bidirectional formatting characters"
	}
	return ""
}

// checkEntry returns why s is not a valid entry path, or "".
func checkEntry(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case utf8.RuneCountInString(s) > maxPathLen:
		return fmt.Sprintf("is %d characters long (max %d)", utf8.RuneCountInString(s), maxPathLen)
	case strings.ContainsRune(s, '\\'):
		return fmt.Sprintf("%q must use forward slashes", s)
	case strings.ContainsFunc(s, isControl):
		return fmt.Sprintf("%q contains control characters", s)
	case strings.HasPrefix(s, "/"):
		return fmt.Sprintf("%q must be relative to the plugin folder", s)
	case reDotSegment.MatchString(s):
		return fmt.Sprintf(`%q must not contain "." or ".." segments`, s)
	case path.Clean(s) != s:
		return fmt.Sprintf("%q is not clean (want %q)", s, path.Clean(s))
	case !reEntry.MatchString(s):
		return fmt.Sprintf("%q is not a valid relative path", s) // unreachable unless the checks above drift
	}
	return ""
}

// Strict JSON helpers. Each reports its own problems and returns ok=false
// when the value is unusable.

// syntaxError returns a description of the first JSON syntax error in
// data, with its line and column, or "".
func syntaxError(data []byte) string {
	if json.Valid(data) {
		return ""
	}
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off := min(int(se.Offset), len(data))
		line := 1 + bytes.Count(data[:off], []byte("\n"))
		col := off - bytes.LastIndexByte(data[:off], '\n')
		return fmt.Sprintf("invalid JSON at line %d, column %d: %v", line, col, se)
	}
	if err == nil {
		return "invalid JSON"
	}
	return "invalid JSON: " + err.Error()
}

// kind names the JSON type of raw, which is valid JSON.
func kind(raw json.RawMessage) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

type entry struct {
	key string
	raw json.RawMessage
}

// entries lists the members of the object raw in order, reporting
// duplicate keys.
func (p *parser) entries(field string, raw json.RawMessage) ([]entry, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		p.fail(field, "%v", err)
		return nil, false
	}
	var out []entry
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			p.fail(field, "%v", err)
			return nil, false
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			p.fail(field, "%v", err)
			return nil, false
		}
		if seen[key] {
			p.fail(member(field, key), "duplicate key")
			continue
		}
		seen[key] = true
		out = append(out, entry{key, v})
	}
	return out, true
}

// object decodes the object raw, reporting duplicate and unknown keys, and
// returns its known members.
func (p *parser) object(field string, raw json.RawMessage, known []string) (map[string]json.RawMessage, bool) {
	if k := kind(raw); k != "object" {
		if field == "" {
			p.fail("", "the manifest must be a JSON object, not %s", k)
		} else {
			p.fail(field, "must be an object, not %s", k)
		}
		return nil, false
	}
	es, ok := p.entries(field, raw)
	if !ok {
		return nil, false
	}
	out := make(map[string]json.RawMessage, len(es))
	for _, e := range es {
		if !slices.Contains(known, e.key) {
			p.fail(member(field, e.key), "unknown field")
			continue
		}
		out[e.key] = e.raw
	}
	return out, true
}

func (p *parser) str(field string, raw json.RawMessage) (string, bool) {
	var s string
	if k := kind(raw); k != "string" {
		p.fail(field, "must be a string, not %s", k)
		return "", false
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		p.fail(field, "%v", err)
		return "", false
	}
	return s, true
}

func (p *parser) boolean(field string, raw json.RawMessage) (bool, bool) {
	var b bool
	if k := kind(raw); k != "boolean" {
		p.fail(field, "must be true or false, not %s", k)
		return false, false
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		p.fail(field, "%v", err)
		return false, false
	}
	return b, true
}

// integer decodes a JSON number with an integral value (64 and 64.0 and
// 6.4e1 alike, as JSON Schema's "integer") in [lo, hi].
func (p *parser) integer(field string, raw json.RawMessage, lo, hi int) (int, bool) {
	if k := kind(raw); k != "number" {
		p.fail(field, "must be an integer, not %s", k)
		return 0, false
	}
	text := bytes.TrimSpace(raw)
	f, err := strconv.ParseFloat(string(text), 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		p.fail(field, "must be an integer, not %s", text)
		return 0, false
	case !math.IsInf(f, 0) && f != math.Trunc(f):
		p.fail(field, "must be an integer, not %s", text)
		return 0, false
	case f < float64(lo) || f > float64(hi):
		p.fail(field, "%s is out of range %d..%d", text, lo, hi)
		return 0, false
	}
	return int(f), true
}

func (p *parser) array(field string, raw json.RawMessage) ([]json.RawMessage, bool) {
	if k := kind(raw); k != "array" {
		p.fail(field, "must be an array, not %s", k)
		return nil, false
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		p.fail(field, "%v", err)
		return nil, false
	}
	return items, true
}

var reIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// member is the path of key inside field.
func member(field, key string) string {
	switch {
	case !reIdent.MatchString(key):
		return field + "[" + strconv.Quote(key) + "]"
	case field == "":
		return key
	}
	return field + "." + key
}

// index is the path of element i of field.
func index(field string, i int) string { return field + "[" + strconv.Itoa(i) + "]" }

func quoteList[T ~string](vs []T) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = strconv.Quote(string(v))
	}
	return strings.Join(q, ", ")
}
