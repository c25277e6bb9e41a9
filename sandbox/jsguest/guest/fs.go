package main

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"github.com/dop251/goja"
)

// newFS returns the fs module: synchronous file functions on the WASI
// file system, which the host roots at the sandbox's own directory.
// Paths are WASI paths; relative ones are relative to process.cwd().
//
//	readFileSync(path[, encoding])   Uint8Array, or a string for 'utf8'/'utf-8'
//	                                 (encoding may be {encoding}); others throw
//	writeFileSync(path, data)        data: a string (written as UTF-8), a typed
//	appendFileSync(path, data)       array, a DataView or an ArrayBuffer
//	existsSync(path)                 boolean
//	readdirSync(path)                the names in the directory, sorted
//	mkdirSync(path[, {recursive}])   recursive: make parents, no error if it exists;
//	                                 a mode (mkdirSync(path, 0o700) or {mode})
//	                                 other than 0o777 or 0o755 throws ENOTSUP:
//	                                 WASI has no permission bits (sh's chmod
//	                                 and mkdir -m set them)
//	unlinkSync(path)                 removes a file
//	rmdirSync(path)                  removes an empty directory
//	renameSync(from, to)
//	statSync(path)                   {size, mode, mtimeMs, mtime, isFile(),
//	                                 isDirectory(), isSymbolicLink()}
//
// A failure throws an Error as node's: message "ENOENT: no such file or
// directory, open 'x'", and code, errno, syscall and path properties.
// There is no symlinkSync, no file descriptor API and no asynchronous or
// promise variant.
func newFS(vm *goja.Runtime) *goja.Object {
	f := &fsModule{vm: vm}
	m := vm.NewObject()
	must(m.Set("readFileSync", f.readFile))
	must(m.Set("writeFileSync", func(call goja.FunctionCall) goja.Value { return f.write(call, false) }))
	must(m.Set("appendFileSync", func(call goja.FunctionCall) goja.Value { return f.write(call, true) }))
	must(m.Set("existsSync", func(p string) bool { _, err := os.Stat(p); return err == nil }))
	must(m.Set("readdirSync", f.readdir))
	must(m.Set("mkdirSync", f.mkdir))
	must(m.Set("unlinkSync", func(p string) { f.check(unlink(p), "unlink", p) }))
	must(m.Set("rmdirSync", func(p string) { f.check(rmdir(p), "rmdir", p) }))
	must(m.Set("renameSync", func(from, to string) { f.check(os.Rename(from, to), "rename", from) }))
	must(m.Set("statSync", f.stat))
	return m
}

type fsModule struct{ vm *goja.Runtime }

func (f *fsModule) readFile(call goja.FunctionCall) goja.Value {
	p := call.Argument(0).String()
	enc := call.Argument(1)
	if o, ok := enc.(*goja.Object); ok {
		enc = o.Get("encoding")
	}
	text := false
	if enc != nil && !goja.IsUndefined(enc) && !goja.IsNull(enc) {
		switch e := enc.String(); e {
		case "utf8", "utf-8":
			text = true
		default:
			panic(f.vm.NewTypeError("readFileSync: encoding %q is not supported (only 'utf8', or none for a Uint8Array)", e))
		}
	}
	b, err := os.ReadFile(p)
	f.check(err, "open", p)
	if text {
		return f.vm.ToValue(string(b))
	}
	u8, err := f.vm.New(f.vm.Get("Uint8Array"), f.vm.ToValue(f.vm.NewArrayBuffer(b)))
	must(err)
	return u8
}

func (f *fsModule) write(call goja.FunctionCall, appending bool) goja.Value {
	p := call.Argument(0).String()
	data := f.bytes(call.Argument(1))
	flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if appending {
		flag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	file, err := os.OpenFile(p, flag, 0o666)
	f.check(err, "open", p)
	_, err = file.Write(data)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	f.check(err, "write", p)
	return goja.Undefined()
}

// bytes returns the bytes of data for writeFileSync: the bytes a typed
// array or DataView views, an ArrayBuffer's, or a string's UTF-8.
func (f *fsModule) bytes(v goja.Value) []byte {
	if o, ok := v.(*goja.Object); ok {
		switch x := o.Export().(type) {
		case goja.ArrayBuffer:
			return x.Bytes()
		case []byte:
			return x
		}
		if buf, ok := o.Get("buffer").Export().(goja.ArrayBuffer); ok {
			off, n := o.Get("byteOffset").ToInteger(), o.Get("byteLength").ToInteger()
			return buf.Bytes()[off : off+n]
		}
	}
	return []byte(v.String())
}

func (f *fsModule) readdir(p string) []string {
	entries, err := os.ReadDir(p)
	f.check(err, "scandir", p)
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names
}

func (f *fsModule) mkdir(call goja.FunctionCall) goja.Value {
	p := call.Argument(0).String()
	recursive := false
	mode := call.Argument(1)
	if o, ok := mode.(*goja.Object); ok {
		if r := o.Get("recursive"); r != nil {
			recursive = r.ToBoolean()
		}
		mode = o.Get("mode")
	}
	if mode != nil && !goja.IsUndefined(mode) && !goja.IsNull(mode) {
		if m := mode.ToInteger(); m != 0o777 && m != 0o755 {
			f.throw("ENOTSUP", -95, "operation not supported: a folder mode (WASI has no permission bits; sh's mkdir -m and chmod set them)", "mkdir", p)
		}
	}
	if recursive {
		f.check(os.MkdirAll(p, 0o777), "mkdir", p)
	} else {
		f.check(os.Mkdir(p, 0o777), "mkdir", p)
	}
	return goja.Undefined()
}

func (f *fsModule) stat(p string) *goja.Object {
	fi, err := os.Stat(p)
	f.check(err, "stat", p)
	st := f.vm.NewObject()
	must(st.Set("size", fi.Size()))
	must(st.Set("mode", uint32(fi.Mode().Perm())))
	ms := float64(fi.ModTime().UnixNano()) / 1e6
	must(st.Set("mtimeMs", ms))
	mtime, err := f.vm.New(f.vm.Get("Date"), f.vm.ToValue(ms))
	must(err)
	must(st.Set("mtime", mtime))
	must(st.Set("isFile", func() bool { return fi.Mode().IsRegular() }))
	must(st.Set("isDirectory", func() bool { return fi.IsDir() }))
	must(st.Set("isSymbolicLink", func() bool { return fi.Mode()&fs.ModeSymlink != 0 }))
	return st
}

// unlink removes a file, failing as node does on a directory.
func unlink(p string) error {
	if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
		return &fs.PathError{Op: "unlink", Path: p, Err: syscall.EISDIR}
	}
	return os.Remove(p)
}

// rmdir removes an empty directory, failing as node does on a file.
func rmdir(p string) error {
	if fi, err := os.Lstat(p); err == nil && !fi.IsDir() {
		return &fs.PathError{Op: "rmdir", Path: p, Err: syscall.ENOTDIR}
	}
	return os.Remove(p)
}

// errnos are node's code, errno and description of the errors it names.
var errnos = map[syscall.Errno]struct {
	code  string
	errno int
	desc  string
}{
	syscall.ENOENT:       {"ENOENT", -2, "no such file or directory"},
	syscall.EEXIST:       {"EEXIST", -17, "file already exists"},
	syscall.ENOTDIR:      {"ENOTDIR", -20, "not a directory"},
	syscall.EISDIR:       {"EISDIR", -21, "illegal operation on a directory"},
	syscall.ENOTEMPTY:    {"ENOTEMPTY", -39, "directory not empty"},
	syscall.EACCES:       {"EACCES", -13, "permission denied"},
	syscall.EPERM:        {"EPERM", -1, "operation not permitted"},
	syscall.EINVAL:       {"EINVAL", -22, "invalid argument"},
	syscall.ELOOP:        {"ELOOP", -40, "too many symbolic links encountered"},
	syscall.ENAMETOOLONG: {"ENAMETOOLONG", -36, "name too long"},
	syscall.ENOSPC:       {"ENOSPC", -28, "no space left on device"},
	syscall.EXDEV:        {"EXDEV", -18, "cross-device link not permitted"},
	syscall.ENOSYS:       {"ENOSYS", -38, "function not implemented"},
	syscall.EBADF:        {"EBADF", -9, "bad file descriptor"},
}

// check throws err, if not nil, as node's Error for syscall on path.
func (f *fsModule) check(err error, sys, path string) {
	if err == nil {
		return
	}
	code, errno, desc := "EIO", -5, "i/o error"
	var en syscall.Errno
	if errors.As(err, &en) {
		if e, ok := errnos[en]; ok {
			code, errno, desc = e.code, e.errno, e.desc
		} else {
			desc = en.Error()
		}
	}
	f.throw(code, errno, desc, sys, path)
}

// throw throws an Error as node's: "CODE: desc, sys 'path'".
func (f *fsModule) throw(code string, errno int, desc, sys, path string) {
	e := f.vm.NewGoError(errors.New(code + ": " + desc + ", " + sys + " '" + path + "'"))
	must(e.Set("name", "Error"))
	must(e.Set("code", code))
	must(e.Set("errno", errno))
	must(e.Set("syscall", sys))
	must(e.Set("path", path))
	panic(e)
}
