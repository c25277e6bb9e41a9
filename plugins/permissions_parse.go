package plugins

import (
	"encoding/json"
	"errors"
	"strings"
)

// ParsePermissions checks raw, a permissions object as a manifest states
// it, by ParseManifest's rules for a plugin whose runtime is rt
// (RuntimeWASM, RuntimeProcess or RuntimeData), and returns it decoded,
// without the defaults ParseManifest fills in. Every problem is reported
// with its path under field (field "a.permissions" gives
// "a.permissions.network[2]"); the permissions are usable only when there
// is none. The marketplace index uses it for the manifest summaries it
// carries, so that an index states permissions exactly as a manifest may.
func ParsePermissions(field string, raw json.RawMessage, rt Runtime) (Permissions, []FieldError) {
	var p parser
	perms := p.permissions(raw, rt)
	for i, fe := range p.errs {
		p.errs[i].Field = field + strings.TrimPrefix(fe.Field, "permissions")
	}
	return perms, p.errs
}

// CheckFilesystemPath returns an error saying why s is not a valid
// FilesystemGrant path, or nil.
func CheckFilesystemPath(s string) error {
	if reason := checkFSPath(s); reason != "" {
		return errors.New(reason)
	}
	return nil
}

// CheckEnv returns an error saying why name is not an environment
// variable a plugin may be granted (Permissions.Env), or nil.
func CheckEnv(name string) error {
	if reason := checkEnv(name); reason != "" {
		return errors.New(reason)
	}
	return nil
}
