// Package wire holds the contracts between Kiln and its plugins: the
// values that cross the plugin boundary as JSON, whatever the transport
// (a process plugin's gRPC messages carry them as JSON bytes; a WASM
// module's requests and answers are them). A compiled plugin is a
// promise: these types are the specification, and a Kiln release keeps
// reading what an older plugin wrote.
//
// Rules of evolution:
//   - A field's JSON name never changes, nor its meaning. Golden files
//     under testdata/ hold one encoded value of every type, so a renamed
//     or retyped field fails a test.
//   - New fields are optional: an absent field decodes to its zero value
//     and means what it meant before the field existed. Readers ignore
//     fields they do not know.
//   - A payload that can evolve carries "v", the version of its shape
//     (Version today; 0, absent, reads as 1). A change that an old reader
//     would misread raises it, and the reader refuses a "v" it does not
//     know, naming both.
//   - Binary data ([]byte) is base64, as encoding/json writes it.
//
// The package imports only the standard library, so a plugin author can
// use it without linking Kiln's host; the host converts between these
// types and its own in one place (plugins/wireconv).
package wire

import "fmt"

// Version is the version of the payload shapes this package describes,
// written as "v".
const Version = 1

// CheckVersion returns nil when a payload of version v can be read by
// this package: v is 0 (absent) or at most Version. what names the
// payload in the error.
func CheckVersion(what string, v int) error {
	if v < 0 || v > Version {
		return fmt.Errorf("%s has payload version %d; this side reads versions 1 to %d", what, v, Version)
	}
	return nil
}
