//go:build !unix

package jsguest

import "context"

// withMemory returns ctx: off unix, the guest's memory is wazero's own,
// which grows by copying into a larger slice.
func withMemory(ctx context.Context) context.Context { return ctx }
