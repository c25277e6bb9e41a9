package main

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/kilnhq/kiln/plugins"
)

// TestPluginManifestSchemaKinds: the kinds the manifest schema
// (specs/kiln-plugin.schema.json) lets a manifest list in "provides" are
// the kinds this binary registers (imports.go), and those it lets a
// data-only bundle list are the registered data kinds: a kind added or
// removed without the schema fails here.
func TestPluginManifestSchemaKinds(t *testing.T) {
	raw, err := os.ReadFile("../../specs/kiln-plugin.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	type provides struct {
		Items struct {
			Enum []plugins.Capability `json:"enum"`
		} `json:"items"`
	}
	var schema struct {
		Properties struct {
			Provides provides `json:"provides"`
		} `json:"properties"`
		AllOf []struct {
			If struct {
				Not struct {
					Required []string `json:"required"`
				} `json:"not"`
			} `json:"if"`
			Then struct {
				Properties struct {
					Provides *provides `json:"provides"`
				} `json:"properties"`
			} `json:"then"`
		} `json:"allOf"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	sorted := func(cs []plugins.Capability) []plugins.Capability { return slices.Sorted(slices.Values(cs)) }
	if got, want := sorted(schema.Properties.Provides.Items.Enum), plugins.RegisteredKinds(); !slices.Equal(got, want) {
		t.Errorf("the schema's kinds are %q; kiln registers %q", got, want)
	}
	var data []plugins.Capability
	for _, c := range schema.AllOf {
		if p := c.Then.Properties.Provides; p != nil && slices.Equal(c.If.Not.Required, []string{"runtime"}) {
			data = p.Items.Enum
		}
	}
	if got, want := sorted(data), plugins.DataKinds(); len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("the schema lets a data-only bundle provide %q; kiln's data kinds are %q", got, want)
	}
}
