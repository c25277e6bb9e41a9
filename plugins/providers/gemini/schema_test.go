package gemini

import (
	"encoding/json"
	"testing"
)

func TestParameters(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
	}{
		{"no parameters", `{"type":"object","properties":{}}`, `null`},
		{"no schema", ``, `null`},
		{"not an object", `[1,2]`, `null`},
		{
			"JSON Schema keywords Gemini refuses are dropped",
			`{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x","type":"object","additionalProperties":false,
			  "properties":{"url":{"type":"string","format":"uri","minLength":1,"maxLength":2048,"pattern":"^https?://"},
			                "when":{"type":"string","format":"date-time"},
			                "n":{"type":"integer","format":"int64","minimum":0,"exclusiveMaximum":10,"minItems":1.5},
			                "x":{"type":"number","format":"decimal","not":{"const":0}}},
			  "required":["url","missing"],"patternProperties":{"^a":{}}}`,
			`{"properties":{"n":{"format":"int64","minimum":0,"type":"INTEGER"},"url":{"maxLength":2048,"minLength":1,"pattern":"^https?://","type":"STRING"},"when":{"format":"date-time","type":"STRING"},"x":{"type":"NUMBER"}},"required":["url"],"type":"OBJECT"}`,
		},
		{
			"refs are inlined and a recursive one is cut",
			`{"type":"object","$defs":{"Point":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]},
			   "Node":{"type":"object","properties":{"next":{"$ref":"#/$defs/Node"},"v":{"type":"string"}}}},
			  "definitions":{"Tag":{"type":"string","enum":["a","b"]}},
			  "properties":{"p":{"$ref":"#/$defs/Point","description":"where"},"tag":{"$ref":"#/definitions/Tag"},"node":{"$ref":"#/$defs/Node"},"lost":{"$ref":"#/nowhere"}}}`,
			`{"properties":{"lost":{},"node":{"properties":{"next":{},"v":{"type":"STRING"}},"type":"OBJECT"},"p":{"description":"where","properties":{"x":{"type":"NUMBER"},"y":{"type":"NUMBER"}},"required":["x","y"],"type":"OBJECT"},"tag":{"enum":["a","b"],"type":"STRING"}},"type":"OBJECT"}`,
		},
		{
			"null types become nullable, unions anyOf",
			`{"type":"object","properties":{
			  "a":{"type":["string","null"]},
			  "b":{"anyOf":[{"type":"integer"},{"type":"null"}],"description":"count"},
			  "c":{"oneOf":[{"type":"string"},{"type":"object","properties":{"k":{"type":"boolean"}}}]},
			  "d":{"type":["string","number"]}}}`,
			`{"properties":{"a":{"nullable":true,"type":"STRING"},"b":{"description":"count","nullable":true,"type":"INTEGER"},"c":{"anyOf":[{"type":"STRING"},{"properties":{"k":{"type":"BOOLEAN"}},"type":"OBJECT"}]},"d":{"anyOf":[{"type":"STRING"},{"type":"NUMBER"}]}},"type":"OBJECT"}`,
		},
		{
			"allOf is merged",
			`{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"integer"}},"required":["b"]}]}`,
			`{"properties":{"a":{"type":"STRING"},"b":{"type":"INTEGER"}},"required":["a","b"],"type":"OBJECT"}`,
		},
		{
			"enums, const and arrays",
			`{"type":"object","properties":{
			  "level":{"type":"integer","enum":[1,2,3]},
			  "ratio":{"type":"number","enum":[0.5,1],"description":"Ratio."},
			  "kind":{"const":"fixed"},
			  "free":{"enum":["x",null]},
			  "tags":{"type":"array"},
			  "pair":{"type":"array","items":[{"type":"string"},{"type":"integer"}],"minItems":2,"maxItems":2},
			  "meta":{"type":"object","additionalProperties":{"type":"string"},"default":{},"example":{"k":"v"}}}}`,
			`{"properties":{"free":{"enum":["x"],"type":"STRING"},"kind":{"enum":["fixed"],"type":"STRING"},"level":{"enum":["1","2","3"],"format":"enum","type":"INTEGER"},"meta":{"default":{},"example":{"k":"v"},"type":"OBJECT"},"pair":{"items":{"type":"STRING"},"maxItems":2,"minItems":2,"type":"ARRAY"},"ratio":{"description":"Ratio. Allowed values: 0.5, 1.","type":"NUMBER"},"tags":{"items":{"type":"STRING"},"type":"ARRAY"}},"type":"OBJECT"}`,
		},
		{
			"a missing type is inferred",
			`{"properties":{"list":{"items":{"type":"string"}},"obj":{"properties":{"z":{"type":"string"}}}}}`,
			`{"properties":{"list":{"items":{"type":"STRING"},"type":"ARRAY"},"obj":{"properties":{"z":{"type":"STRING"}},"type":"OBJECT"}},"type":"OBJECT"}`,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := json.Marshal(parameters(json.RawMessage(c.in)))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestParametersDepth(t *testing.T) {
	deep := `{"type":"string"}`
	for range 100 {
		deep = `{"type":"object","properties":{"n":` + deep + `}}`
	}
	out := parameters(json.RawMessage(deep))
	depth := 0
	for m := out; m != nil; depth++ {
		props, _ := m["properties"].(map[string]any)
		m, _ = props["n"].(map[string]any)
	}
	if depth > maxSchemaDepth+2 {
		t.Errorf("depth %d", depth)
	}
}

func TestParametersFanOut(t *testing.T) {
	// Each level refers to the next ten times: inlined in full it would
	// be 10^8 schemas.
	defs := `"L8":{"type":"string"}`
	for i := 7; i >= 0; i-- {
		props := ""
		for j := range 10 {
			if j > 0 {
				props += ","
			}
			props += `"p` + string(rune('0'+j)) + `":{"$ref":"#/$defs/L` + string(rune('0'+i+1)) + `"}`
		}
		defs += `,"L` + string(rune('0'+i)) + `":{"type":"object","properties":{` + props + `}}`
	}
	out := parameters(json.RawMessage(`{"$defs":{` + defs + `},"type":"object","properties":{"root":{"$ref":"#/$defs/L0"}}}`))
	b, _ := json.Marshal(out)
	if len(b) > 1<<20 {
		t.Errorf("converted schema is %d bytes", len(b))
	}
}
