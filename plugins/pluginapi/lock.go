package pluginapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// LockVersion is the version of plugins.lock this Kiln writes and reads.
const LockVersion = 1

// MaxLockSize bounds a lock file ParseLock reads.
const MaxLockSize = 4 << 20

// Lock is plugins.lock, in the data root: what is installed, so that
// `kiln plugin install --locked` can reproduce the installation exactly on
// another machine. The registry rewrites it atomically after every change
// to its record, as JSON with two-space indentation and a final newline:
//
//	{
//	  "version": 1,
//	  "plugins": [
//	    {
//	      "id": "calc",
//	      "version": "1.1.0",
//	      "runtime": "wasm",
//	      "sha256": "<what the registry checks at every load, hex>",
//	      "digest": "<the installed folder's digest, hex>",
//	      "pinned": false,
//	      "source": {"marketplace": "example", "archive_sha256": "<hex>", "index_version": 7}
//	    }
//	  ]
//	}
//
// Plugins are sorted by id and hold every installed plugin, never a
// built-in. sha256 is the entry file's sha256, or for a data-only bundle
// its folder digest (then equal to digest); digest is the digest of the
// whole folder (plugins/integrity.Tree); runtime is "wasm", "process" or
// "data". source is there only for a version a marketplace installed.
// The same installation always gives the same bytes: no times, no
// machine's paths.
type Lock struct {
	Version int            `json:"version"`
	Plugins []LockedPlugin `json:"plugins"`
}

// LockedPlugin is one installed plugin in the lock file.
type LockedPlugin struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	Runtime string `json:"runtime"`
	SHA256  string `json:"sha256"`
	// Digest is "" only for a plugin installed by a Kiln that did not
	// record folder digests and whose folder could not be hashed since.
	Digest string      `json:"digest"`
	Pinned bool        `json:"pinned"`
	Source *LockSource `json:"source,omitempty"`
}

// LockSource is the marketplace a locked version came from.
type LockSource struct {
	Marketplace   string `json:"marketplace"`
	ArchiveSHA256 string `json:"archive_sha256"`
	IndexVersion  uint64 `json:"index_version"`
	// Commit is Source.Commit: the git commit of a Claude Code
	// marketplace, "" otherwise.
	Commit string `json:"commit,omitempty"`
}

var (
	reHex64  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	reCommit = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)
)

// ParseLock reads a lock file: JSON of version LockVersion with no
// unknown fields, every plugin with an id, a version and a runtime, its
// sums 64 lowercase hex digits, sorted by id without duplicates, a source
// with a marketplace name. The error says what is wrong and where.
func ParseLock(data []byte) (*Lock, error) {
	if len(data) > MaxLockSize {
		return nil, fmt.Errorf("lock file is larger than %d MiB", MaxLockSize>>20)
	}
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	if head.Version != LockVersion {
		if head.Version > LockVersion {
			return nil, fmt.Errorf("lock file is version %d, written by a newer Kiln; this one reads version %d", head.Version, LockVersion)
		}
		return nil, fmt.Errorf("lock file: version %d is not a lock file version (want %d)", head.Version, LockVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var l Lock
	if err := dec.Decode(&l); err != nil { // what follows the object was refused above
		return nil, fmt.Errorf("lock file: %w", err)
	}
	var errs []error
	for i, p := range l.Plugins {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("lock file: plugins[%d] (%q): %s", i, p.ID, fmt.Sprintf(format, args...)))
		}
		switch {
		case p.ID == "" || strings.ContainsFunc(p.ID, isNotIDRune):
			bad("id must be lowercase letters, digits, dots and dashes")
		case i > 0 && l.Plugins[i-1].ID >= p.ID:
			bad("not sorted by id, or listed twice")
		}
		if p.Version == "" || strings.ContainsFunc(p.Version, isNotVersionRune) {
			bad("version %q is not a semantic version", p.Version)
		}
		if p.Runtime == "" {
			bad("runtime is missing")
		}
		if !reHex64.MatchString(p.SHA256) {
			bad("sha256 must be 64 lowercase hex digits")
		}
		if p.Digest != "" && !reHex64.MatchString(p.Digest) {
			bad("digest must be 64 lowercase hex digits")
		}
		if s := p.Source; s != nil {
			if s.Marketplace == "" {
				bad("source has no marketplace")
			}
			if !reHex64.MatchString(s.ArchiveSHA256) {
				bad("source archive_sha256 must be 64 lowercase hex digits")
			}
			if s.Commit != "" && !reCommit.MatchString(s.Commit) {
				bad("source commit must be a git commit id, 40 or 64 lowercase hex digits")
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if l.Plugins == nil {
		l.Plugins = []LockedPlugin{}
	}
	return &l, nil
}

func isNotIDRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-')
}

func isNotVersionRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '+')
}
