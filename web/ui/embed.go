// Package ui holds Kiln's built web UI for embedding in the kiln binary.
//
// The sources (TypeScript and Preact) live in this directory; `make ui`
// (npm ci && npm run build) writes the bundle to dist/, which is committed
// so that building the binary needs Go only. `make test` checks that the
// committed dist/ matches a fresh build of the sources.
package ui

import (
	"embed"
	"io/fs"
)

//go:embed dist
var dist embed.FS

// FS returns the built UI: the contents of dist/ (index.html, app.js,
// app.css and whatever else the build writes there), rooted at dist.
func FS() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic("ui: " + err.Error()) // cannot happen: "dist" is a valid path
	}
	return sub
}
