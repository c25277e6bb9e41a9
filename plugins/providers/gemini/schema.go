package gemini

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
)

// Gemini takes a function's parameters as an OpenAPI 3.0 Schema subset and
// refuses any field outside it ("Unknown name ... Cannot find field"), so
// a tool's JSON Schema is rewritten into that subset rather than sent as
// is: $ref is inlined from $defs/definitions, oneOf becomes anyOf, allOf
// is merged, a null type becomes nullable, const becomes a one-value enum,
// enum values become strings, and what the subset has no word for
// ($schema, additionalProperties, not, if/then/else, patternProperties,
// exclusive bounds, unsupported formats, ...) is left out.

// maxSchemaDepth bounds nesting and maxSchemaNodes the schemas converted
// (inlined refs can multiply them); past either, schemas are cut to {}.
const (
	maxSchemaDepth = 32
	maxSchemaNodes = 5000
)

// schemaTypes maps JSON Schema types to Gemini's.
var schemaTypes = map[string]string{
	"string": "STRING", "number": "NUMBER", "integer": "INTEGER",
	"boolean": "BOOLEAN", "array": "ARRAY", "object": "OBJECT",
}

// schemaFormats are the formats Gemini accepts for each type, besides
// "enum" (set with an enum).
var schemaFormats = map[string][]string{
	"STRING":  {"date-time"},
	"NUMBER":  {"float", "double"},
	"INTEGER": {"int32", "int64"},
}

// parameters converts a tool's JSON Schema to a function declaration's
// parameters; nil when the tool takes none (the API refuses an OBJECT
// without properties) or the schema is not a JSON object.
func parameters(raw json.RawMessage) map[string]any {
	var root map[string]any
	if json.Unmarshal(raw, &root) != nil || root == nil {
		return nil
	}
	c := schemaConverter{defs: map[string]any{}, visiting: map[string]bool{}, budget: maxSchemaNodes}
	for _, key := range []string{"definitions", "$defs"} {
		if defs, ok := root[key].(map[string]any); ok {
			for name, d := range defs {
				c.defs["#/"+key+"/"+name] = d
			}
		}
	}
	s := c.convert(root, 0)
	if props, _ := s["properties"].(map[string]any); len(props) == 0 {
		return nil
	}
	return s
}

type schemaConverter struct {
	defs     map[string]any  // "#/$defs/Name" -> schema
	visiting map[string]bool // refs being inlined: a recursive one is cut
	budget   int             // schemas left to convert
}

// convert rewrites one schema; anything that is not an object becomes {}.
func (c *schemaConverter) convert(v any, depth int) map[string]any {
	in, ok := v.(map[string]any)
	out := map[string]any{}
	if !ok || depth > maxSchemaDepth || c.budget <= 0 {
		return out
	}
	c.budget--
	if ref, ok := in["$ref"].(string); ok {
		if def, ok := c.defs[ref]; ok && !c.visiting[ref] {
			c.visiting[ref] = true
			out = c.convert(def, depth+1)
			delete(c.visiting, ref)
		}
	}
	for _, key := range []string{"title", "description", "pattern"} {
		if s, ok := in[key].(string); ok && s != "" {
			out[key] = s
		}
	}
	for _, key := range []string{"minimum", "maximum"} {
		if n, ok := in[key].(float64); ok {
			out[key] = n
		}
	}
	for _, key := range []string{"minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"} {
		if n, ok := in[key].(float64); ok && n >= 0 && n == math.Trunc(n) {
			out[key] = n
		}
	}
	for _, key := range []string{"default", "example"} {
		if x, ok := in[key]; ok && x != nil {
			out[key] = x
		}
	}
	if b, ok := in["nullable"].(bool); ok && b {
		out["nullable"] = true
	}
	c.convertType(in, out)
	c.convertAlternatives(in, out, depth)
	for _, sub := range asList(in["allOf"]) {
		merge(out, c.convert(sub, depth+1))
	}
	if props, ok := in["properties"].(map[string]any); ok {
		conv, ok := out["properties"].(map[string]any) // from $ref, allOf, ...
		if !ok {
			conv = map[string]any{}
			out["properties"] = conv
		}
		for name, p := range props {
			conv[name] = c.convert(p, depth+1)
		}
	}
	if req := asList(in["required"]); len(req) > 0 {
		names, _ := out["required"].([]string)
		for _, r := range req {
			if s, ok := r.(string); ok && !slices.Contains(names, s) {
				names = append(names, s)
			}
		}
		out["required"] = names
	}
	switch items := in["items"].(type) {
	case map[string]any:
		out["items"] = c.convert(items, depth+1)
	case []any: // a tuple: the first item's schema stands for all
		if len(items) > 0 {
			out["items"] = c.convert(items[0], depth+1)
		}
	}
	c.convertEnum(in, out)
	c.finish(in, out)
	return out
}

// convertType maps type (a name or a list of names) to Gemini's; "null"
// makes the schema nullable, several other types an anyOf.
func (c *schemaConverter) convertType(in, out map[string]any) {
	var types []string
	switch t := in["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				types = append(types, s)
			}
		}
	}
	var kept []any
	for _, t := range types {
		if t == "null" {
			out["nullable"] = true
		} else if g, ok := schemaTypes[t]; ok {
			kept = append(kept, map[string]any{"type": g})
		}
	}
	switch len(kept) {
	case 0:
	case 1:
		out["type"] = kept[0].(map[string]any)["type"]
	default:
		out["anyOf"] = kept
	}
}

// convertAlternatives maps anyOf and oneOf to anyOf, taking a {"type":
// "null"} branch as nullable and flattening a single remaining branch.
func (c *schemaConverter) convertAlternatives(in, out map[string]any, depth int) {
	var alts []any
	for _, key := range []string{"anyOf", "oneOf"} {
		for _, sub := range asList(in[key]) {
			if m, ok := sub.(map[string]any); ok && m["type"] == "null" {
				out["nullable"] = true
				continue
			}
			alts = append(alts, c.convert(sub, depth+1))
		}
	}
	switch len(alts) {
	case 0:
	case 1:
		merge(out, alts[0].(map[string]any))
	default:
		out["anyOf"] = alts
	}
}

// convertEnum turns enum and const into a list of strings, which the API
// takes for a STRING, or an INTEGER with format "enum"; for other types the
// allowed values go into the description instead.
func (c *schemaConverter) convertEnum(in, out map[string]any) {
	values := asList(in["enum"])
	if x, ok := in["const"]; ok {
		values = []any{x}
	}
	if len(values) == 0 {
		return
	}
	enum := make([]string, 0, len(values))
	for _, v := range values {
		if s, ok := v.(string); ok {
			enum = append(enum, s)
		} else if v != nil {
			b, _ := json.Marshal(v)
			enum = append(enum, string(b))
		}
	}
	if _, ok := out["type"]; !ok {
		out["type"] = "STRING"
	}
	switch out["type"] {
	case "STRING":
		out["enum"] = enum
	case "INTEGER":
		out["enum"], out["format"] = enum, "enum"
	default:
		desc, _ := out["description"].(string)
		out["description"] = strings.TrimSpace(desc + " Allowed values: " + strings.Join(enum, ", ") + ".")
	}
}

// finish infers a missing type, keeps a supported format, and gives an
// array the items the API requires.
func (c *schemaConverter) finish(in, out map[string]any) {
	if _, ok := out["type"]; !ok {
		if _, ok := out["anyOf"]; !ok {
			switch {
			case out["properties"] != nil:
				out["type"] = "OBJECT"
			case out["items"] != nil:
				out["type"] = "ARRAY"
			}
		}
	}
	t, _ := out["type"].(string)
	if f, ok := in["format"].(string); ok && out["format"] == nil && slices.Contains(schemaFormats[t], f) {
		out["format"] = f
	}
	if t == "ARRAY" && out["items"] == nil {
		out["items"] = map[string]any{"type": "STRING"}
	}
	if t != "OBJECT" {
		delete(out, "properties")
		delete(out, "required")
		return
	}
	// The API refuses a required name that is not a property.
	props, _ := out["properties"].(map[string]any)
	if req, ok := out["required"].([]string); ok {
		req = slices.DeleteFunc(req, func(name string) bool { _, ok := props[name]; return !ok })
		if len(req) == 0 {
			delete(out, "required")
		} else {
			out["required"] = req
		}
	}
}

// merge copies src's keys into dst: properties and required are unioned,
// other keys are kept from dst when it has them.
func merge(dst, src map[string]any) {
	for k, v := range src {
		switch k {
		case "properties":
			if d, ok := dst[k].(map[string]any); ok {
				for name, p := range v.(map[string]any) {
					if _, taken := d[name]; !taken {
						d[name] = p
					}
				}
				continue
			}
		case "required":
			if d, ok := dst[k].([]string); ok {
				for _, name := range v.([]string) {
					if !slices.Contains(d, name) {
						d = append(d, name)
					}
				}
				dst[k] = d
				continue
			}
		}
		if _, ok := dst[k]; !ok {
			dst[k] = v
		}
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
