package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/kilnhq/kiln/plugins"
	"strings"
)

// object is a JSON object being read: its members by key, and where it
// is in the document ("plugins[2].source"), for errors.
type object struct {
	at      string
	members map[string]json.RawMessage
}

// parseObject checks that data is one JSON object without duplicate keys
// at any depth (encoding/json keeps the last of two, so what a user read
// might not be what is used) and without trailing data, and returns its
// members.
func parseObject(data []byte, what string) (object, error) {
	if err := plugins.StrictJSON(data); err != nil {
		return object{}, fmt.Errorf("%s: %w", what, err)
	}
	return asObject(data, "")
}

// asObject reads raw, which is valid JSON, as an object at at.
func asObject(raw json.RawMessage, at string) (object, error) {
	if k := kind(raw); k != "object" {
		return object{}, fmt.Errorf("%s: want an object, not %s", where(at), article(k))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return object{}, fmt.Errorf("%s: %w", where(at), err)
	}
	return object{at: at, members: m}, nil
}

// has reports whether the object has key with a value other than null.
func (o object) has(key string) bool {
	raw, ok := o.members[key]
	return ok && kind(raw) != "null"
}

// path is where the member key is.
func (o object) path(key string) string {
	if o.at == "" {
		return key
	}
	return o.at + "." + key
}

// str reads the string member key; a missing or null member is "".
func (o object) str(key string) (string, error) {
	if !o.has(key) {
		return "", nil
	}
	raw := o.members[key]
	if k := kind(raw); k != "string" {
		return "", fmt.Errorf("%s: want a string, not %s", o.path(key), article(k))
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// boolean reads the boolean member key, def when missing or null.
func (o object) boolean(key string, def bool) (bool, error) {
	if !o.has(key) {
		return def, nil
	}
	raw := o.members[key]
	if k := kind(raw); k != "boolean" {
		return false, fmt.Errorf("%s: want true or false, not %s", o.path(key), article(k))
	}
	var b bool
	err := json.Unmarshal(raw, &b)
	return b, err
}

// strings reads the member key as an array of strings; a single string is
// taken as a list of one when one is true.
func (o object) strings(key string, one bool) ([]string, error) {
	if !o.has(key) {
		return nil, nil
	}
	raw := o.members[key]
	if one && kind(raw) == "string" {
		s, err := o.str(key)
		return []string{s}, err
	}
	if k := kind(raw); k != "array" {
		if one {
			return nil, fmt.Errorf("%s: want a string or an array of strings, not %s", o.path(key), article(k))
		}
		return nil, fmt.Errorf("%s: want an array of strings, not %s", o.path(key), article(k))
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		if k := kind(it); k != "string" {
			return nil, fmt.Errorf("%s[%d]: want a string, not %s", o.path(key), i, article(k))
		}
		var s string
		if err := json.Unmarshal(it, &s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// where names a place in the document for an error.
func where(at string) string {
	if at == "" {
		return "the document"
	}
	return at
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

// article puts "a" or "an" before a JSON kind ("an array", "a string").
func article(kind string) string {
	if strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}
