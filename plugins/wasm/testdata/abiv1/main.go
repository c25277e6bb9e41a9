//go:build wasip1

// Command abiv1 is a guest of Kiln WASM ABI version 1 written without the
// SDK, as a module built before version 2 is: kiln_describe answers a bare
// array of tool specs, kiln_call {"result"}. Its one tool, "ping",
// answers "pong <request>".
package main

import "unsafe"

var (
	inbox  = map[uint32][]byte{}
	outbox []byte
)

func main() {}

func ptrOf(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

func respond(s string) uint64 {
	outbox = []byte(s)
	return uint64(ptrOf(outbox))<<32 | uint64(len(outbox))
}

//go:wasmexport kiln_abi_version
func abiVersion() int32 { return 1 }

//go:wasmexport kiln_alloc
func alloc(size int32) uint32 {
	b := make([]byte, size)
	inbox[ptrOf(b)] = b
	return ptrOf(b)
}

//go:wasmexport kiln_describe
func describe() uint64 {
	return respond(`[{"name":"ping","description":"Answers pong.","idempotent":true}]`)
}

//go:wasmexport kiln_call
func call(ptr, n uint32) uint64 {
	req := inbox[ptr][:n]
	delete(inbox, ptr)
	out := []byte(`{"result":"pong `)
	for _, c := range req {
		if c == '"' || c == '\\' {
			out = append(out, '\\')
		}
		out = append(out, c)
	}
	return respond(string(append(out, '"', '}')))
}
