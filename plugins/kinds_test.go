package plugins

import "context"

// Kiln's kinds, registered for this package's tests under the names their
// packages register in the kiln binary: the kinds import this package, so
// its tests cannot link them. cmd/kiln's TestManifestSchemaKinds checks
// the manifest schema against the real registrations.
func init() {
	for _, k := range []standInKind{
		{"model-provider", false}, {"toolset", false}, {"sandbox-runtime", false},
		{"skills", true}, {"mcp-servers", true},
	} {
		RegisterKind(k)
	}
}

// standInKind is a kind that attaches nothing.
type standInKind struct {
	name Capability
	data bool
}

func (k standInKind) Name() Capability { return k.name }
func (k standInKind) IsData() bool     { return k.data }

func (standInKind) Attach(context.Context, Attach) (Attached, error) { return Attached{}, nil }
