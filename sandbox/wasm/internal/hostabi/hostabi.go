// Package hostabi is the interface between the wasm sandbox runtime and
// its built-in shell (sandbox/wasm/guest/sh): the host functions of the
// module Module, which the shell alone imports (a sandbox's own module
// that imports them is refused before it runs).
//
//   - spawn(req_ptr, req_len u32) -> i32 runs the module a command names
//     (a path, or a name ending in ".wasm") as the runtime's Exec would,
//     with the same memory cap and deadline, and returns its exit code:
//     127 when there is no such file, 126 when it cannot execute (not a
//     WebAssembly module, a folder, an import refused), with the reason
//     on the command's stderr. req is a Spawn as JSON in the guest's
//     memory.
//   - chmod(path_ptr, path_len, mode u32) -> u32 sets the mode of the
//     file or folder at an absolute path: mode is st_mode's low 12 bits
//     (0o1777). It returns 0, or WASI's errno (ENOENT, EPERM for "/").
//   - mode(path_ptr, path_len u32) -> i32 returns the mode of the file or
//     folder at an absolute path as chmod takes it, or minus WASI's errno
//     (WASI's stat has no permission bits).
package hostabi

// Module is the import module name of the host functions.
const Module = "kiln_sh"

// Spawn is a spawn request.
type Spawn struct {
	// Argv is the command: Argv[0] names the module.
	Argv []string `json:"argv"`
	// Env is the module's whole environment, KEY=VALUE.
	Env []string `json:"env"`
	// Dir is its working folder (absolute), set as $PWD.
	Dir string `json:"dir"`
	// Stdin is the absolute path of the file it reads, or "" for the
	// command's own standard input.
	Stdin string `json:"stdin,omitempty"`
	// Stdout and Stderr are where its output goes.
	Stdout Target `json:"stdout"`
	Stderr Target `json:"stderr"`
}

// Target is where an output stream of a spawned module goes.
type Target struct {
	// Stream is 1 or 2: the command's stdout or stderr.
	Stream int `json:"stream,omitempty"`
	// Path, when Stream is 0, is the absolute path of a file (made by
	// the shell's redirection) that the module's output is appended to.
	Path string `json:"path,omitempty"`
}
