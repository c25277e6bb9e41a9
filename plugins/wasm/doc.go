// Package wasm is Kiln's WASM plugin host, on wazero: the "wasm" runtime,
// which registers itself from init (NewLoader makes its plugins.Loader
// from a Host). It loads a plugin built for GOOS=wasip1 with
// -buildmode=c-shared (a WASI reactor speaking the Kiln WASM ABI,
// specs/wasm-abi.md; sdk/plugin is the guest side) as a Module.
//
// Kinds: the package knows none. A kind package registers a Kind for
// itself (RegisterKind, from init in its own files), which makes the
// kind's client of a Module from the module's description of the kind and
// sends it requests with Module.Call: {"kind", "op", ...} to kiln_call,
// answered with {"result"} or the module's own {"error"}; a request may
// stream text through the delta host function (a model turn's). The
// loader dispenses the client of each kind the manifest lists, and
// refuses a module that does not describe every one of them, or a kind
// not registered. A module of ABI version 3 may serve any registered
// kind; modules of versions 1 (a toolset) and 2 ("toolset",
// "model-provider") keep loading, their descriptions, requests and
// answers translated to and from version 3 by one frozen file
// (legacy.go).
//
// What the guest calls back into comes from the registry as
// plugins.Callbacks (LoadOptions.Logger, KV and Emit): the same logger,
// key/value namespace and progress events a process plugin reaches through
// the host's callbacks.
//
// Deny by default: a guest may import only the "kiln" host module and
// wasi_snapshot_preview1, and WASI is instantiated with nothing granted —
// no preopened folders, no environment, no arguments, empty stdin; stdout
// and stderr go to the plugin's logger, a record per line (at most 4 KiB,
// a longer line is cut), a burst of 200 lines and then 10 a second per
// plugin (the count of lines dropped is logged once). The guest reaches the world only
// through the kiln host functions (log, http_request, http_open,
// http_read, http_close, fs_read, fs_write, kv_get, kv_put, kv_delete,
// kv_list, clock_now, random, emit); http and fs check the manifest's
// Permissions before acting, and kv reaches only the plugin's own
// key/value namespace (LoadOptions.KV), which needs no permission. WASI's
// clocks and random source are the real ones: time and randomness are not
// permissions.
//
// HTTP comes two ways. http_request returns the whole response (a body of
// at most MaxHTTPResponseBody). http_open sends the same request, with the
// same checks (before dialing, in the dialer, at every redirect), and
// returns a handle once the headers arrive; http_read then copies the body
// into the guest's buffer as it arrives, at most MaxHTTPReadChunk a read
// and MaxHTTPStreamBody in all, and http_close frees the handle. An
// instance has at most MaxHTTPStreams open. Streams belong to the call
// that opened them: the host closes them all when the call returns or the
// instance is thrown away, and a read waiting on the network ends with
// the call's deadline.
//
// Limits: memory_mib caps the linear memory of the plugin as a whole —
// the consent prompt says "use up to N MiB of memory" — and each instance
// can grow to all of it. wazero applies a memory limit per Runtime, so a
// Host keeps one Runtime per distinct memory_mib (created on first use,
// shared by the plugins with that limit); the instances of one plugin
// allocate their memories from the plugin's budget (wazero's
// experimental.MemoryAllocator), and an instance that would pass it first
// closes idle instances to make room, then fails memory.grow. Every call runs with a deadline of timeout_ms, which covers
// waiting for a free instance too; the runtimes are built
// WithCloseOnContextDone, so a guest in an endless loop is stopped. An
// instance that traps, exits, runs out of memory or passes its deadline
// is thrown away and the next call gets a fresh one.
//
// Concurrency: each call runs on an instance of its own. A Module keeps
// up to MaxInstances, started lazily — only when every instance is busy,
// and only while the budget has room for one more at the size an instance
// has just after starting (so memory_mib/start size bounds them too: a Go
// guest of 3.3 MiB gets 4 with the default 64 MiB, 2 with 8) — and kept
// idle for later calls until a growing instance needs their memory. A
// call that finds no instance waits for one within its deadline.
//
// Close does not wait for the calls in flight: it cancels them — a guest
// in a loop is stopped, a host function waiting on the network returns —
// and they fail with plugins.ErrTransport; a call after Close fails at
// once.
//
// Compiled code is cached on disk (Config.CacheDir), so a restart does not
// compile a plugin again, and so is each module's description (its tool
// list, keyed by its sha256 and memory_mib): a module loaded before is
// not compiled or instantiated by Load, only read and checked against its
// sha256; its first call checks the sha256 again, then compiles (from the
// disk cache) and instantiates it. Reading a Go guest's cached code still
// costs about 60 ms, most of it wazero decoding and validating the module
// again, so a Host keeps compiled modules for a while after their
// modules close (keepCompiled): a plugin disabled and enabled again is
// not compiled again.
package wasm
