package web

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/core"
)

// Request bodies. Each parse function decodes one with unmarshalStrict and
// applies the checks that keep the result canonical: a value it returns
// re-encodes (json.Marshal) to a body it parses to the same value.

// parseThreadInput parses the body of POST /threads.
func parseThreadInput(b []byte) (core.ThreadInput, error) {
	var in core.ThreadInput
	err := unmarshalStrict(b, &in)
	return in, err
}

// threadPatch is the body of PATCH /threads/{id}. Absent fields (and a null
// title or pinned) stay as they are; folder_id null or "" moves the thread
// to no folder.
type threadPatch struct {
	Title    *string        `json:"title,omitempty"`
	FolderID nullableString `json:"folder_id,omitzero"`
	Pinned   *bool          `json:"pinned,omitempty"`
}

// core returns the patch as core.UpdateThread takes it.
func (p threadPatch) core() core.ThreadPatch {
	out := core.ThreadPatch{Title: p.Title, Pinned: p.Pinned}
	if p.FolderID.Set {
		out.FolderID = &p.FolderID.Value
	}
	return out
}

// parseThreadPatch parses the body of PATCH /threads/{id}.
func parseThreadPatch(b []byte) (threadPatch, error) {
	var p threadPatch
	err := unmarshalStrict(b, &p)
	return p, err
}

// nullableString is a JSON field that may be absent, null or a string. Set
// reports whether it was present; null decodes as "".
type nullableString struct {
	Set   bool
	Value string
}

// UnmarshalJSON accepts null or a string.
func (n *nullableString) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = nullableString{Set: true}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		// Returned as a type error, encoding/json adds the field's name.
		return &json.UnmarshalTypeError{Value: jsonKind(b), Type: reflect.TypeFor[string]()}
	}
	*n = nullableString{Set: true, Value: s}
	return nil
}

// MarshalJSON writes the string; an unset value is left out by omitzero.
func (n nullableString) MarshalJSON() ([]byte, error) {
	return json.Marshal(n.Value)
}

// jsonKind names the JSON type of a valid JSON value as encoding/json does
// in its type errors.
func jsonKind(b []byte) string {
	switch b = bytes.TrimLeft(b, jsonSpace); {
	case len(b) == 0:
		return "nothing"
	case b[0] == '{':
		return "object"
	case b[0] == '[':
		return "array"
	case b[0] == '"':
		return "string"
	case b[0] == 't' || b[0] == 'f':
		return "bool"
	case b[0] == 'n':
		return "null"
	}
	return "number"
}

// parseFolderInput parses the body of POST /folders.
func parseFolderInput(b []byte) (core.FolderInput, error) {
	var in core.FolderInput
	err := unmarshalStrict(b, &in)
	return in, err
}

// folderPatch is the body of PATCH /folders/{id}; absent fields stay as
// they are.
type folderPatch struct {
	Name     *string `json:"name,omitempty"`
	Position *int    `json:"position,omitempty"`
}

// core returns the patch as core.UpdateFolder takes it.
func (p folderPatch) core() core.FolderPatch {
	return core.FolderPatch{Name: p.Name, Position: p.Position}
}

// parseFolderPatch parses the body of PATCH /folders/{id}.
func parseFolderPatch(b []byte) (folderPatch, error) {
	var p folderPatch
	err := unmarshalStrict(b, &p)
	return p, err
}

// parseRunRequest parses the body of POST /threads/{id}/runs. The
// interrupt_on policy is validated here so that a malformed rule is
// reported before anything is stored.
func parseRunRequest(b []byte) (core.RunRequest, error) {
	var req core.RunRequest
	if err := unmarshalStrict(b, &req); err != nil {
		return core.RunRequest{}, err
	}
	if err := req.InterruptOn.Validate(); err != nil {
		return core.RunRequest{}, err
	}
	return req, nil
}

// decisionRequest is the body of POST /interrupts/{id}/decision. It is
// core.Decision without By, which the server sets.
type decisionRequest struct {
	Decision string          `json:"decision"`
	Args     json.RawMessage `json:"args,omitempty"`
	Message  string          `json:"message,omitempty"`
}

// knownDecisions are all decisions of any interrupt kind.
var knownDecisions = slices.Concat(core.AllDecisions, core.RecoveryDecisions)

// parseDecision parses the body of POST /interrupts/{id}/decision. The
// decision must be one Kiln knows (whether the interrupt allows it is the
// core's call); args null counts as absent and args are compacted.
func parseDecision(b []byte) (core.Decision, error) {
	var req decisionRequest
	if err := unmarshalStrict(b, &req); err != nil {
		return core.Decision{}, err
	}
	if !slices.Contains(knownDecisions, req.Decision) {
		return core.Decision{}, errorf(core.EINVALID, "field \"decision\" must be one of %s", strings.Join(knownDecisions, ", "))
	}
	d := core.Decision{Decision: req.Decision, Message: req.Message}
	if len(req.Args) > 0 && string(req.Args) != "null" {
		var buf bytes.Buffer
		if err := json.Compact(&buf, req.Args); err != nil {
			return core.Decision{}, errorf(codeInvalidJSON, "field \"args\": %s", err)
		}
		d.Args = buf.Bytes()
	}
	return d, nil
}
