// Package grantfs is the one place where Kiln reaches inside a folder the
// user granted (core.Grant): the file tools (plugins/builtin/files) and
// plugins' grant: paths (plugins/wasm) both go through it, so the rules
// below hold for every access, not only when the folder was granted.
//
// Open checks the grant again: its Path must still resolve to itself (a
// folder swapped for a symlink, or moved, is refused) and is then opened
// as an os.Root. Every Dir method then checks the path it is given:
//
//   - A path is relative to the granted folder, clean, with forward
//     slashes: no "..", "." or empty segments, no leading "/", no
//     backslash, no NUL. A path that breaks a rule is refused, never
//     cleaned into another one (CheckPath). "" is the folder itself.
//   - It is resolved through the os.Root, so a symlink planted inside the
//     folder that leads out of it is refused, whether it names a file or a
//     folder on the way.
//   - Only regular files are read or written (no devices, pipes or
//     sockets), and never one with more than one hard link: a hard link
//     planted inside the folder would otherwise reach a file outside it.
//     Such a refusal matches ErrLinked.
//   - Writes need a writable grant. A write goes to a new file in the same
//     folder, renamed over the target, so it never goes through an
//     existing inode; a replaced file keeps its mode.
//
// Errors are *core.Error: EINVALID for a malformed path or a file of the
// wrong kind, EFORBIDDEN for what leads out of the folder or a write to a
// read-only grant, ENOTFOUND for what does not exist, ELIMIT for a file
// over the caller's size limit. Their messages never contain the host
// path, nor the path asked for: callers name the path in their own
// notation ("/grants/docs/a.md", "grant:docs/a.md").
//
// Hard links are detected on Unix only (the link count of the open
// file's stat); elsewhere every file counts as having one link.
package grantfs
