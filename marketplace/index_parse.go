package marketplace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/Masterminds/semver/v3"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
)

// MaxIndexSize is the largest marketplace.json ParseIndex reads, in bytes
// (32 MiB: some 60,000 plugin versions).
const MaxIndexSize = 32 << 20

// Limits of an index's values. specs/marketplace.schema.json states the
// same ones.
const (
	maxSafeInteger = 1<<53 - 1 // the largest integer a JSON reader in a browser holds exactly
	maxTextLen     = 300       // description, yanked
	maxShortLen    = 200       // owner name, author, license
	maxURLLen      = 2048
	maxTags        = 20
	maxTagLen      = 32
	maxProtocol    = 255
)

// The regular expressions below are copied verbatim into
// specs/marketplace.schema.json; TestIndexSchemaPatterns keeps them equal.
// They use only syntax that RE2 and ECMA-262 read alike.
const (
	// patternName is a marketplace name: kebab-case, starting with a letter.
	patternName = `^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$`
	// patternPluginName is a plugin's manifest id (plugins.Manifest.ID).
	patternPluginName = `^[a-z][a-z0-9-]*(?:\.[a-z0-9-]+)*$`
	// patternTag is a tag: kebab-case.
	patternTag = `^[a-z0-9]+(?:-[a-z0-9]+)*$`
	// patternSemver is SemVer 2.0.0 without a leading "v".
	patternSemver = `^(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)(?:-(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*)?(?:\+[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*)?$`
	// patternSHA256 is a sha256, lowercase hex.
	patternSHA256 = `^[0-9a-f]{64}$`
	// patternTime is an RFC 3339 time, as Go writes and reads it.
	patternTime = `^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?(?:Z|[+-][0-9]{2}:[0-9]{2})$`
	// patternLine is one line of text: no control or bidirectional
	// formatting characters (a manifest's description).
	patternLine = "^[^\\x00-\\x1f\\x7f-\\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]*$"
	// patternWebURL is an owner's or a plugin's web address.
	patternWebURL = `^https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:/[!-~]*)?$`
	// patternEmail is an owner's e-mail address, loosely.
	patternEmail = `^[^@\s]+@[^@\s]+$`
	// patternArtifactURL is where an archive is: a path of safe
	// characters under plugins/ (where Build puts archives and serve
	// serves them), an https:// URL or a file:/// URL, in printable ASCII
	// without a fragment.
	patternArtifactURL = `^(?:plugins(?:/[A-Za-z0-9._~+-]+)+|https://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:/[!-"$-~]*)?|file:///[!-"$-~]*)$`
	// patternDotSegment finds "." and ".." segments in an artifact URL.
	patternDotSegment = `(?:^|/)\.\.?(?:/|$)`
)

var (
	reName        = regexp.MustCompile(patternName)
	rePluginName  = regexp.MustCompile(patternPluginName)
	reTag         = regexp.MustCompile(patternTag)
	reSemver      = regexp.MustCompile(patternSemver)
	reLine        = regexp.MustCompile(patternLine)
	reWebURL      = regexp.MustCompile(patternWebURL)
	reEmail       = regexp.MustCompile(patternEmail)
	reArtifactURL = regexp.MustCompile(patternArtifactURL)
	reDotSegment  = regexp.MustCompile(patternDotSegment)
)

// Kinds a plugin version may provide, and those a data-only bundle may.
var (
	knownKinds = []string{"mcp-servers", "model-provider", "sandbox-runtime", "skills", "toolset"}
	dataKinds  = []string{"mcp-servers", "skills"}
)

// IndexError lists every problem found in an index, in document order. It
// unwraps to a *core.Error with code EINVALID carrying the same message.
type IndexError struct {
	Errors []plugins.FieldError
}

func (e *IndexError) Error() string {
	if len(e.Errors) == 1 {
		return "invalid marketplace index: " + e.Errors[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "invalid marketplace index (%d problems):", len(e.Errors))
	for i, fe := range e.Errors {
		if i == maxReported {
			fmt.Fprintf(&b, "\n  and %d more", len(e.Errors)-i)
			break
		}
		b.WriteString("\n  ")
		b.WriteString(fe.String())
	}
	return b.String()
}

// maxReported bounds the problems IndexError's message lists; Errors has
// them all.
const maxReported = 50

// Unwrap returns the error as a *core.Error with code EINVALID.
func (e *IndexError) Unwrap() error {
	return &core.Error{Code: core.EINVALID, Message: e.Error()}
}

// ParseIndex decodes and validates marketplace.json. Decoding is strict:
// unknown fields, duplicate keys, null values and trailing data are
// errors, and every value is checked against the rules of
// specs/marketplace.schema.json and those a schema cannot state (plugins
// sorted by name, versions newest first and distinct, each plugin's kinds
// the union of what its versions provide, expires after published). It
// returns every problem at once as an *IndexError, or the index.
func ParseIndex(data []byte) (*Index, error) {
	p := indexParser{perms: map[permsKey]permsResult{}}
	idx := p.index(data)
	if len(p.errs) > 0 {
		return nil, &IndexError{Errors: p.errs}
	}
	return idx, nil
}

// indexParser collects the problems of one index.
type indexParser struct {
	errs []plugins.FieldError
	// perms caches permission objects by their bytes: an index repeats
	// the same few many times.
	perms map[permsKey]permsResult
}

type permsKey struct {
	raw     string
	runtime plugins.Runtime
}

type permsResult struct {
	perms plugins.Permissions
	errs  []plugins.FieldError
}

func (p *indexParser) fail(field, format string, args ...any) {
	p.errs = append(p.errs, plugins.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

func (p *indexParser) index(data []byte) *Index {
	if len(data) > MaxIndexSize {
		p.fail("", "the index is larger than %d MiB", MaxIndexSize>>20)
		return nil
	}
	if err := syntaxError(data); err != "" {
		p.fail("", "%s", err)
		return nil
	}
	var idx Index
	ms, ok := p.object("", data)
	if !ok {
		return nil
	}
	var has fieldSet
	for _, m := range ms {
		f := member("", m.key)
		switch m.key {
		case "$schema":
			idx.Schema, _ = p.str(f, m.raw)
		case "name":
			if s, ok := p.str(f, m.raw); ok {
				p.check(f, checkName(s))
				idx.Name = s
			}
		case "owner":
			idx.Owner = p.owner(f, m.raw)
		case "version":
			if n, ok := p.integer(f, m.raw, 1, maxSafeInteger); ok {
				idx.Version = uint64(n)
			}
		case "published":
			idx.Published, _ = p.time(f, m.raw)
		case "expires":
			idx.Expires, _ = p.time(f, m.raw)
		case "log":
			idx.Log = p.logEntry(f, m.raw)
		case "plugins":
			idx.Plugins = p.plugins(f, m.raw)
		default:
			p.fail(f, "unknown field")
			continue
		}
		has.add(m.key)
	}
	p.required("", &has, "name", "owner", "version", "published", "expires", "log", "plugins")
	if has.has("published") && has.has("expires") && !idx.Published.IsZero() && !idx.Expires.IsZero() && !idx.Expires.After(idx.Published) {
		p.fail("expires", "must be after published (%s)", idx.Published.Format(time.RFC3339))
	}
	return &idx
}

func (p *indexParser) owner(field string, raw []byte) Owner {
	var o Owner
	ms, ok := p.object(field, raw)
	if !ok {
		return o
	}
	var has fieldSet
	for _, m := range ms {
		f := member(field, m.key)
		switch m.key {
		case "name":
			if s, ok := p.str(f, m.raw); ok {
				p.check(f, checkLine(s, maxShortLen))
				o.Name = s
			}
		case "email":
			if s, ok := p.str(f, m.raw); ok {
				p.check(f, checkPattern(s, reEmail, 254, "an e-mail address"))
				o.Email = s
			}
		case "url":
			if s, ok := p.str(f, m.raw); ok {
				p.check(f, checkPattern(s, reWebURL, maxURLLen, "an http:// or https:// URL"))
				o.URL = s
			}
		default:
			p.fail(f, "unknown field")
			continue
		}
		has.add(m.key)
	}
	p.required(field, &has, "name")
	return o
}

func (p *indexParser) logEntry(field string, raw []byte) LogEntry {
	var e LogEntry
	ms, ok := p.object(field, raw)
	if !ok {
		return e
	}
	var has fieldSet
	for _, m := range ms {
		f := member(field, m.key)
		switch m.key {
		case "index":
			e.Index, _ = p.integer(f, m.raw, 0, maxSafeInteger)
		default:
			p.fail(f, "unknown field")
			continue
		}
		has.add(m.key)
	}
	p.required(field, &has, "index")
	return e
}

func (p *indexParser) plugins(field string, raw []byte) []Plugin {
	items, ok := p.array(field, raw)
	if !ok {
		return nil
	}
	out := make([]Plugin, 0, len(items))
	for i, it := range items {
		f := index(field, i)
		pl, ok := p.plugin(f, it)
		if !ok {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Name != "" && pl.Name != "" {
			switch prev := out[n-1].Name; {
			case prev == pl.Name:
				p.fail(f+".name", "%q is listed twice", pl.Name)
			case prev > pl.Name:
				p.fail(f+".name", "plugins must be sorted by name: %q comes before %q", pl.Name, prev)
			}
		}
		out = append(out, pl)
	}
	return out
}

func (p *indexParser) plugin(field string, raw []byte) (Plugin, bool) {
	var pl Plugin
	ms, ok := p.object(field, raw)
	if !ok {
		return pl, false
	}
	var has fieldSet
	for _, m := range ms {
		f := member(field, m.key)
		switch m.key {
		case "name":
			if s, ok := p.str(f, m.raw); ok {
				p.check(f, checkPluginName(s))
				pl.Name = s
			}
		case "description":
			if s, ok := p.str(f, m.raw); ok {
				p.check(f, checkText(s, maxTextLen))
				pl.Description = s
			}
		case "author":
			if s, ok := p.str(f, m.raw); ok {
				p.check(f, checkText(s, maxShortLen))
				pl.Author = s
			}
		case "homepage":
			if s, ok := p.str(f, m.raw); ok {
				p.check(f, checkPattern(s, reWebURL, maxURLLen, "an http:// or https:// URL"))
				pl.Homepage = s
			}
		case "license":
			if s, ok := p.str(f, m.raw); ok {
				p.check(f, checkText(s, maxShortLen))
				pl.License = s
			}
		case "tags":
			pl.Tags = p.tags(f, m.raw)
		case "kinds":
			pl.Kinds = p.kinds(f, m.raw, knownKinds)
		case "versions":
			pl.Versions = p.versions(f, m.raw)
		default:
			p.fail(f, "unknown field")
			continue
		}
		has.add(m.key)
	}
	p.required(field, &has, "name", "description", "kinds", "versions")
	if has.has("kinds") && has.has("versions") {
		var union []string
		for _, v := range pl.Versions {
			for _, k := range v.Manifest.Provides {
				if !slices.Contains(union, k) {
					union = append(union, k)
				}
			}
		}
		if !sameSet(pl.Kinds, union) {
			slices.Sort(union)
			p.fail(field+".kinds", "must be what the versions provide: %s", quoteList(union))
		}
	}
	return pl, true
}

func (p *indexParser) tags(field string, raw []byte) []string {
	items, ok := p.array(field, raw)
	if !ok {
		return nil
	}
	if len(items) > maxTags {
		p.fail(field, "has %d tags (max %d)", len(items), maxTags)
		return nil
	}
	var out []string
	for i, it := range items {
		f := index(field, i)
		s, ok := p.str(f, it)
		if !ok {
			continue
		}
		switch {
		case len(s) == 0 || len(s) > maxTagLen:
			p.fail(f, "%q must be 1 to %d characters", s, maxTagLen)
		case !reTag.MatchString(s):
			p.fail(f, "%q must be lowercase letters and digits separated by single hyphens", s)
		case slices.Contains(out, s):
			p.fail(f, "%q is listed twice", s)
		}
		out = append(out, s)
	}
	return out
}

// kinds reads a non-empty list of distinct kinds from allowed.
func (p *indexParser) kinds(field string, raw []byte, allowed []string) []string {
	items, ok := p.array(field, raw)
	if !ok {
		return nil
	}
	switch {
	case len(items) == 0:
		p.fail(field, "must list at least one of %s", quoteList(allowed))
	case len(items) > len(allowed):
		p.fail(field, "lists %d kinds, more than there are (%s)", len(items), quoteList(allowed))
		return nil
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		f := index(field, i)
		s, ok := p.str(f, it)
		if !ok {
			continue
		}
		switch {
		case !slices.Contains(allowed, s):
			p.fail(f, "%q is not one of %s", s, quoteList(allowed))
		case slices.Contains(out, s):
			p.fail(f, "%q is listed twice", s)
		}
		out = append(out, s)
	}
	return out
}

func (p *indexParser) versions(field string, raw []byte) []Version {
	items, ok := p.array(field, raw)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		p.fail(field, "must list at least one version")
	}
	out := make([]Version, 0, len(items))
	var prev *semver.Version
	for i, it := range items {
		f := index(field, i)
		v, sv, ok := p.version(f, it)
		if !ok {
			continue
		}
		if sv != nil && prev != nil {
			switch c := sv.Compare(prev); {
			case c == 0:
				p.fail(f+".version", "%q is the same version as %q", sv.Original(), prev.Original())
			case c > 0:
				p.fail(f+".version", "versions must be sorted newest first: %q comes before %q", sv.Original(), prev.Original())
			}
		}
		if sv != nil {
			prev = sv
		}
		out = append(out, v)
	}
	return out
}

// version reads one version; sv is its parsed semantic version, nil when
// it is missing or invalid.
func (p *indexParser) version(field string, raw []byte) (v Version, sv *semver.Version, ok bool) {
	ms, ok := p.object(field, raw)
	if !ok {
		return v, nil, false
	}
	var has fieldSet
	protocolField := member(field, "protocol")
	for _, m := range ms {
		f := member(field, m.key)
		switch m.key {
		case "version":
			if s, ok := p.str(f, m.raw); ok {
				if reason := checkSemver(s); reason != "" {
					p.fail(f, "%s", reason)
				} else {
					sv, _ = semver.StrictNewVersion(s)
				}
				v.Version = s
			}
		case "published":
			v.Published, _ = p.time(f, m.raw)
		case "artifact":
			v.Artifact = p.artifact(f, m.raw)
		case "digest":
			if s, ok := p.str(f, m.raw); ok {
				p.check(f, checkSHA256(s))
				v.Digest = s
			}
		case "manifest":
			v.Manifest = p.manifest(f, m.raw)
		case "min_kiln":
			if s, ok := p.str(f, m.raw); ok {
				p.check(f, checkSemver(s))
				v.MinKiln = s
			}
		case "protocol":
			if n, ok := p.integer(f, m.raw, 0, maxProtocol); ok {
				v.Protocol = int(n)
			}
		case "yanked":
			if s, ok := p.str(f, m.raw); ok {
				p.check(f, checkText(s, maxTextLen))
				v.Yanked = s
			}
		default:
			p.fail(f, "unknown field")
			continue
		}
		has.add(m.key)
	}
	p.required(field, &has, "version", "published", "artifact", "digest", "manifest")
	switch rt := v.Manifest.Runtime; {
	case rt == plugins.RuntimeData && v.Protocol != 0:
		p.fail(protocolField, "a data-only bundle speaks no protocol: leave it out")
	case (rt == plugins.RuntimeWASM || rt == plugins.RuntimeProcess) && v.Protocol == 0 && !has.has("protocol"):
		p.fail(protocolField, "required for runtime %q", rt)
	case (rt == plugins.RuntimeWASM || rt == plugins.RuntimeProcess) && v.Protocol == 0:
		p.fail(protocolField, "must be at least 1 for runtime %q", rt)
	}
	return v, sv, true
}

func (p *indexParser) artifact(field string, raw []byte) Artifact {
	var a Artifact
	ms, ok := p.object(field, raw)
	if !ok {
		return a
	}
	var has fieldSet
	for _, m := range ms {
		f := member(field, m.key)
		switch m.key {
		case "url":
			if s, ok := p.str(f, m.raw); ok {
				p.check(f, checkArtifactURL(s))
				a.URL = s
			}
		case "sha256":
			if s, ok := p.str(f, m.raw); ok {
				p.check(f, checkSHA256(s))
				a.SHA256 = s
			}
		case "size":
			a.Size, _ = p.integer(f, m.raw, 1, maxSafeInteger)
		default:
			p.fail(f, "unknown field")
			continue
		}
		has.add(m.key)
	}
	p.required(field, &has, "url", "sha256", "size")
	return a
}

var summaryRuntimes = []string{string(plugins.RuntimeWASM), string(plugins.RuntimeProcess), string(plugins.RuntimeData)}

func (p *indexParser) manifest(field string, raw []byte) ManifestSummary {
	var s ManifestSummary
	ms, ok := p.object(field, raw)
	if !ok {
		return s
	}
	var has fieldSet
	var permsRaw []byte
	runtimeOK := false
	for _, m := range ms {
		f := member(field, m.key)
		switch m.key {
		case "runtime":
			if v, ok := p.str(f, m.raw); ok {
				if slices.Contains(summaryRuntimes, v) {
					runtimeOK = true
				} else {
					p.fail(f, "%q is not one of %s", v, quoteList(summaryRuntimes))
				}
				s.Runtime = plugins.Runtime(v)
			}
		case "provides":
			s.Provides = p.kinds(f, m.raw, knownKinds)
		case "permissions":
			permsRaw = m.raw
		default:
			p.fail(f, "unknown field")
			continue
		}
		has.add(m.key)
	}
	p.required(field, &has, "runtime", "provides", "permissions")
	if runtimeOK && s.Runtime == plugins.RuntimeData {
		for i, k := range s.Provides {
			if slices.Contains(knownKinds, k) && !slices.Contains(dataKinds, k) {
				p.fail(index(field+".provides", i), "%q needs code: a data-only bundle provides only %s", k, quoteList(dataKinds))
			}
		}
	}
	if permsRaw != nil {
		rt := s.Runtime
		if !runtimeOK {
			rt = ""
		}
		s.Permissions = p.permissions(field+".permissions", permsRaw, rt)
	}
	return s
}

// permissions checks a permissions object by the manifest's rules
// (plugins.ParsePermissions); rt is "" when the runtime is unknown.
func (p *indexParser) permissions(field string, raw []byte, rt plugins.Runtime) plugins.Permissions {
	key := permsKey{string(raw), rt}
	r, ok := p.perms[key]
	if !ok {
		if r.perms, ok = validPermissions(raw, rt); !ok {
			r.perms, r.errs = plugins.ParsePermissions("", raw, rt)
		}
		p.perms[key] = r
	}
	for _, fe := range r.errs {
		p.errs = append(p.errs, plugins.FieldError{Field: field + fe.Field, Reason: fe.Reason})
	}
	return r.perms
}

// validPermissions decodes the permissions object raw when it breaks no
// rule of plugins.ParsePermissions for runtime rt, to the same value; it
// returns false when it finds a problem, which ParsePermissions then
// words. It is the fast path of an index's permissions, with its
// own JSON reading but the plugins package's checks of each value;
// FuzzValidPermissions holds it to ParsePermissions.
func validPermissions(raw []byte, rt plugins.Runtime) (plugins.Permissions, bool) {
	var perms plugins.Permissions
	var q indexParser
	ms, ok := q.object("p", raw)
	if !ok || len(q.errs) > 0 {
		return perms, false
	}
	strs := func(raw []byte, check func(string) error) ([]string, bool) {
		items, ok := q.array("p", raw)
		if len(items) > 64 {
			return nil, false // the slow path checks duplicates in linear time
		}
		var out []string
		for _, it := range items {
			s, ok := q.str("p", it)
			if !ok || check(s) != nil || slices.Contains(out, s) {
				return nil, false
			}
			out = append(out, s)
		}
		return out, ok
	}
	for _, m := range ms {
		switch m.key {
		case "network":
			perms.Network, ok = strs(m.raw, plugins.CheckNetwork)
		case "env":
			perms.Env, ok = strs(m.raw, plugins.CheckEnv)
		case "filesystem":
			perms.Filesystem, ok = validGrants(&q, m.raw)
		case "exec":
			perms.Exec, ok = m.raw[0] == 't', kind(m.raw) == "boolean" && (m.raw[0] == 'f' || rt != plugins.RuntimeWASM)
		case "memory_mib":
			var n int64
			n, ok = q.integer("p", m.raw, 1, plugins.MaxMemoryMiB)
			perms.MemoryMiB, ok = int(n), ok && rt != plugins.RuntimeProcess && rt != plugins.RuntimeData
		case "timeout_ms":
			var n int64
			n, ok = q.integer("p", m.raw, 1, plugins.MaxTimeoutMS)
			perms.TimeoutMS = int(n)
		default:
			ok = false
		}
		if !ok || len(q.errs) > 0 {
			return perms, false
		}
	}
	return perms, true
}

// validGrants is validPermissions for the filesystem grants.
func validGrants(q *indexParser, raw []byte) ([]plugins.FilesystemGrant, bool) {
	items, ok := q.array("p", raw)
	if len(items) > 64 {
		return nil, false
	}
	var out []plugins.FilesystemGrant
	for _, it := range items {
		ms, ok := q.object("p", it)
		if !ok || len(q.errs) > 0 {
			return nil, false
		}
		var g plugins.FilesystemGrant
		hasPath := false
		for _, m := range ms {
			switch m.key {
			case "path":
				g.Path, hasPath = q.str("p", m.raw)
				hasPath = hasPath && plugins.CheckFilesystemPath(g.Path) == nil
			case "read":
				g.Read, ok = m.raw[0] == 't', kind(m.raw) == "boolean"
			case "write":
				g.Write, ok = m.raw[0] == 't', kind(m.raw) == "boolean"
			default:
				ok = false
			}
			if !ok {
				return nil, false
			}
		}
		if !hasPath || !g.Read && !g.Write || slices.ContainsFunc(out, func(o plugins.FilesystemGrant) bool { return o.Path == g.Path }) {
			return nil, false
		}
		out = append(out, g)
	}
	return out, ok
}

func (p *indexParser) time(field string, raw []byte) (time.Time, bool) {
	s, ok := p.str(field, raw)
	if !ok {
		return time.Time{}, false
	}
	if !isTime(s) {
		p.fail(field, "%q is not an RFC 3339 time (2006-01-02T15:04:05Z)", s)
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		p.fail(field, "%q is not a valid time: %s", s, strings.TrimPrefix(err.Error(), "parsing time "+strconv.Quote(s)+": "))
		return time.Time{}, false
	}
	return t, true
}

// check records reason for field unless it is "".
func (p *indexParser) check(field, reason string) {
	if reason != "" {
		p.fail(field, "%s", reason)
	}
}

// required reports each of names missing from has.
func (p *indexParser) required(field string, has *fieldSet, names ...string) {
	for _, n := range names {
		if !has.has(n) {
			p.fail(member(field, n), "required")
		}
	}
}

// fieldSet is the set of an object's known members seen so far (an
// object has at most 16 known members).
type fieldSet struct {
	names [16]string
	n     int
}

func (s *fieldSet) add(name string) {
	if s.n < len(s.names) {
		s.names[s.n] = name
		s.n++
	}
}

func (s *fieldSet) has(name string) bool { return slices.Contains(s.names[:s.n], name) }

func checkName(s string) string {
	switch {
	case len(s) < 2 || len(s) > 64:
		return fmt.Sprintf("%q must be 2 to 64 characters", s)
	case !reName.MatchString(s):
		return fmt.Sprintf("%q must be lowercase letters and digits separated by single hyphens, starting with a letter", s)
	}
	return ""
}

func checkPluginName(s string) string {
	switch {
	case s == "" || len(s) > 64:
		return fmt.Sprintf("%q must be 1 to 64 characters", s)
	case !rePluginName.MatchString(s):
		return fmt.Sprintf("%q is not a plugin id: lowercase letters, digits, dots and dashes, starting with a letter, no empty segment", s)
	}
	return ""
}

// checkText returns why s is not one line of 1 to max characters.
func checkText(s string, max int) string {
	if n := utf8.RuneCountInString(s); n == 0 || n > max {
		return fmt.Sprintf("must be 1 to %d characters (is %d)", max, n)
	}
	return checkLine(s, max)
}

// checkLine returns why s is not one line of at most max characters
// without control or bidirectional formatting characters.
func checkLine(s string, max int) string {
	switch n := utf8.RuneCountInString(s); {
	case n == 0 || n > max:
		return fmt.Sprintf("must be 1 to %d characters (is %d)", max, n)
	case !reLine.MatchString(s):
		return "must be one line without control or bidirectional formatting characters"
	}
	return ""
}

func checkPattern(s string, re *regexp.Regexp, max int, what string) string {
	switch {
	case utf8.RuneCountInString(s) > max:
		return fmt.Sprintf("is longer than %d characters", max)
	case !re.MatchString(s):
		return fmt.Sprintf("%q is not %s", s, what)
	}
	return ""
}

// checkSemver returns why s is not a semantic version, or "".
func checkSemver(s string) string {
	switch {
	case len(s) > 128:
		return fmt.Sprintf("is %d characters long (max 128)", len(s))
	case strings.HasPrefix(s, "v") || strings.HasPrefix(s, "V"):
		return fmt.Sprintf("%q is not a semantic version (drop the leading \"v\")", s)
	case !reSemver.MatchString(s):
		return fmt.Sprintf("%q is not a semantic version (MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD])", s)
	}
	return ""
}

// checkSHA256 returns why s is not 64 lowercase hex digits, or "". It is
// patternSHA256 without a regular expression: an index holds two per
// version.
func checkSHA256(s string) string {
	if len(s) != 64 || strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && (r < 'a' || r > 'f') }) >= 0 {
		return fmt.Sprintf("%q must be 64 lowercase hex digits", s)
	}
	return ""
}

// checkArtifactURL returns why s is not an artifact location, or "".
func checkArtifactURL(s string) string {
	if len(s) <= maxURLLen && isRelativeURL(s) {
		return "" // the common case, without regular expressions
	}
	switch {
	case len(s) > maxURLLen:
		return fmt.Sprintf("is longer than %d characters", maxURLLen)
	case reDotSegment.MatchString(s):
		return fmt.Sprintf(`%q must not contain "." or ".." segments`, s)
	case !reArtifactURL.MatchString(s):
		return fmt.Sprintf("%q is not a path under plugins/ (letters, digits and ._~+- in segments), an https:// URL or a file:/// URL", s)
	}
	if _, err := artifactURL(s); err != nil {
		return fmt.Sprintf("%q: %v", s, err)
	}
	return ""
}

// isRelativeURL reports whether s is a relative artifact URL:
// patternArtifactURL's first branch, without "." or ".." segments.
func isRelativeURL(s string) bool {
	rest, ok := strings.CutPrefix(s, "plugins/")
	if !ok {
		return false
	}
	for seg := range strings.SplitSeq(rest, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
		for i := 0; i < len(seg); i++ {
			switch c := seg[i]; {
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '~', c == '+', c == '-':
			default:
				return false
			}
		}
	}
	return true
}

// isTime reports whether s matches patternTime.
func isTime(s string) bool {
	const shape = "dddd-dd-ddTdd:dd:dd"
	if len(s) < len(shape)+1 {
		return false
	}
	for i := range len(shape) {
		if c := s[i]; shape[i] == 'd' && (c < '0' || c > '9') || shape[i] != 'd' && c != shape[i] {
			return false
		}
	}
	rest := s[len(shape):]
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 1 || n > 10 {
			return false
		}
		rest = rest[n:]
	}
	switch {
	case rest == "Z":
		return true
	case len(rest) != 6 || rest[0] != '+' && rest[0] != '-' || rest[3] != ':':
		return false
	}
	for _, i := range []int{1, 2, 4, 5} {
		if rest[i] < '0' || rest[i] > '9' {
			return false
		}
	}
	return true
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func quoteList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

// Strict JSON reading. The document is checked once with json.Valid, so
// the readers below walk bytes known to be valid JSON and only slice
// them: each object and array is scanned once per level, without the
// cost of decoding into interfaces.

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

// kind names the JSON type of the valid JSON value raw.
func kind(raw []byte) string {
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

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipSpace returns the offset of the first non-space byte at or after i.
func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

// valueEnd returns the offset just past the valid JSON value starting at
// data[i].
func valueEnd(data []byte, i int) int {
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		depth := 0
		for ; i < len(data); i++ {
			switch data[i] {
			case '"':
				i = stringEnd(data, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(data) && !isSpace(data[i]) && data[i] != ',' && data[i] != '}' && data[i] != ']' {
		i++
	}
	return i
}

// stringEnd returns the offset just past the string starting at data[i].
func stringEnd(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// decodeString decodes the valid JSON string raw as encoding/json does.
func decodeString(raw []byte) string {
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner)
	}
	var s string
	_ = json.Unmarshal(raw, &s) // valid JSON: it cannot fail
	return s
}

// keyNames holds the member names of an index, so that reading one does
// not allocate a string.
var keyNames = map[string]string{}

func init() {
	for _, k := range []string{"$schema", "name", "owner", "email", "url", "version", "published", "expires", "log", "index", "plugins",
		"description", "author", "homepage", "license", "tags", "kinds", "versions", "artifact", "sha256", "size", "digest",
		"manifest", "runtime", "provides", "permissions", "min_kiln", "protocol", "yanked",
		"network", "filesystem", "env", "exec", "memory_mib", "timeout_ms", "path", "read", "write"} {
		keyNames[k] = k
	}
}

// jsonMember is one member of an object: its key and raw value.
type jsonMember struct {
	key string
	raw []byte
}

// object returns the members of the valid JSON value raw, in order,
// reporting a value that is not an object, duplicate keys (the first
// occurrence is kept) and null values (never allowed in an index).
func (p *indexParser) object(field string, raw []byte) ([]jsonMember, bool) {
	raw = bytes.TrimSpace(raw)
	if k := kind(raw); k != "object" {
		if field == "" {
			p.fail("", "the index must be a JSON object, not %s", k)
		} else {
			p.fail(field, "must be an object, not %s", k)
		}
		return nil, false
	}
	out := make([]jsonMember, 0, 10)
	var seen map[string]bool // beyond a few members, to keep this linear
	for i := skipSpace(raw, 1); raw[i] != '}'; {
		end := stringEnd(raw, i)
		key, known := keyNames[string(raw[i+1:end-1])]
		if !known {
			key = decodeString(raw[i:end])
		}
		i = skipSpace(raw, end)
		i = skipSpace(raw, i+1) // the colon
		end = valueEnd(raw, i)
		val := raw[i:end]
		i = skipSpace(raw, end)
		if raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
		dup := false
		if seen != nil {
			dup = seen[key]
		} else {
			for _, m := range out {
				dup = dup || m.key == key
			}
		}
		switch {
		case dup:
			p.fail(member(field, key), "duplicate key")
		case kind(val) == "null":
			p.fail(member(field, key), "must not be null (leave it out)")
		default:
			out = append(out, jsonMember{key, val})
			if seen == nil && len(out) > 16 {
				seen = map[string]bool{}
				for _, m := range out {
					seen[m.key] = true
				}
			} else if seen != nil {
				seen[key] = true
			}
		}
	}
	return out, true
}

// array returns the elements of the valid JSON value raw, reporting a
// value that is not an array.
func (p *indexParser) array(field string, raw []byte) ([][]byte, bool) {
	if k := kind(raw); k != "array" {
		p.fail(field, "must be an array, not %s", k)
		return nil, false
	}
	var out [][]byte
	for i := skipSpace(raw, 1); raw[i] != ']'; {
		end := valueEnd(raw, i)
		out = append(out, raw[i:end])
		i = skipSpace(raw, end)
		if raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return out, true
}

func (p *indexParser) str(field string, raw []byte) (string, bool) {
	if k := kind(raw); k != "string" {
		p.fail(field, "must be a string, not %s", k)
		return "", false
	}
	return decodeString(raw), true
}

// integer decodes a JSON number with an integral value (64, 64.0 and
// 6.4e1 alike, as JSON Schema's "integer") in [lo, hi], where hi is at
// most maxSafeInteger.
func (p *indexParser) integer(field string, raw []byte, lo, hi int64) (int64, bool) {
	if k := kind(raw); k != "number" {
		p.fail(field, "must be an integer, not %s", k)
		return 0, false
	}
	text := string(raw)
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		if n < lo || n > hi {
			p.fail(field, "%s is out of range %d..%d", text, lo, hi)
			return 0, false
		}
		return n, true
	}
	f, err := strconv.ParseFloat(text, 64)
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
	return int64(f), true
}

// isIdent reports whether key can follow a dot in a field path: a letter,
// "_" or "$", then letters, digits and "_".
func isIdent(key string) bool {
	for i, r := range key {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_', r == '$' && i == 0:
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return key != ""
}

// member is the path of key inside field.
func member(field, key string) string {
	switch {
	case !isIdent(key):
		return field + "[" + strconv.Quote(key) + "]"
	case field == "":
		return key
	}
	return field + "." + key
}

// index is the path of element i of field.
func index(field string, i int) string { return field + "[" + strconv.Itoa(i) + "]" }
