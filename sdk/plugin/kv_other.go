//go:build !wasip1

package plugin

import "errors"

// errKVWASMOnly is what the kv helpers return in a native build: the
// key/value namespace is a host function of the WASM host, and a process
// plugin keeps its own state.
var errKVWASMOnly = errors.New("kv is available to WASM plugins only")

// KVGet reads the plugin's key/value namespace in a WASM build; natively
// it fails with "kv is available to WASM plugins only".
func KVGet(key string) (value []byte, found bool, err error) { return nil, false, errKVWASMOnly }

// KVPut writes the plugin's key/value namespace in a WASM build; natively
// it fails with "kv is available to WASM plugins only".
func KVPut(key string, value []byte) error { return errKVWASMOnly }

// KVDelete deletes from the plugin's key/value namespace in a WASM build;
// natively it fails with "kv is available to WASM plugins only".
func KVDelete(key string) error { return errKVWASMOnly }

// KVList lists the plugin's key/value namespace in a WASM build; natively
// it fails with "kv is available to WASM plugins only".
func KVList(prefix, after string, limit int) ([]string, error) { return nil, errKVWASMOnly }
