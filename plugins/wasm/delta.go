package wasm

import (
	"context"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/api"
)

// deltaKey carries a request's Delta function in the context of its call.
type deltaKey struct{}

// maxDelta bounds one text delta a module streams.
const maxDelta = 64 << 10

// hostDelta is the delta host function (ABI 2 and 3): text the request in
// flight streams (a model turn's), valid UTF-8 of at most 64 KiB; 0, or 1
// if refused (outside a request that takes it, too large, not UTF-8).
func hostDelta(ctx context.Context, m api.Module, stack []uint64) {
	delta, _ := ctx.Value(deltaKey{}).(func(string))
	text, err := guestBytes(m, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), maxDelta)
	if delta == nil || err != nil || !utf8.Valid(text) {
		stack[0] = api.EncodeI32(1)
		return
	}
	delta(string(text))
	stack[0] = 0
}
