package core

import (
	"context"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of a KVStore. A Store that implements KVStore enforces them; a
// host that passes keys and values on (the WASM plugin host) checks them
// too, so a plugin learns of a bad request without a round trip.
const (
	// MaxKVKey is the longest key, in bytes. Keys are 1..MaxKVKey bytes of
	// valid UTF-8 without NUL; namespaces follow the same rule.
	MaxKVKey = 512
	// MaxKVValue is the largest value (1 MiB).
	MaxKVValue = 1 << 20
	// MaxKVNamespaceBytes caps a namespace's size: the sum of the lengths of
	// its keys and values (64 MiB).
	MaxKVNamespaceBytes = 64 << 20
	// MaxKVNamespaceKeys caps the number of keys in a namespace.
	MaxKVNamespaceKeys = 100_000
	// MaxKVList is the most keys one KVList returns, and what a limit <= 0
	// means.
	MaxKVList = 1000
)

// KVStore is an optional interface of a Store: byte values under string
// keys, in separate namespaces (the WASM plugin host gives each plugin the
// namespace of its plugin ID). It is not part of Store's transactions:
// each call is its own atomic operation, and a write is durable when the
// call returns.
//
// Error contract: a namespace, key or prefix that breaks the key rule
// (MaxKVKey) is EINVALID; a value over MaxKVValue, and a KVPut that would
// take the namespace over MaxKVNamespaceBytes or MaxKVNamespaceKeys, is
// ELIMIT and changes nothing; a closed Store is EUNAVAIL. Other failures
// have no code (EINTERNAL).
type KVStore interface {
	// KVGet returns the value of key in ns, and false (with a nil value
	// and a nil error) when there is none. A stored empty value is
	// returned as an empty, non-nil slice.
	KVGet(ctx context.Context, ns, key string) (value []byte, found bool, err error)
	// KVPut sets key in ns to value, replacing any value it had. A nil
	// value stores an empty one.
	KVPut(ctx context.Context, ns, key string, value []byte) error
	// KVDelete removes key from ns. Deleting a key that does not exist is
	// not an error.
	KVDelete(ctx context.Context, ns, key string) error
	// KVList returns the keys of ns that start with prefix ("" for all)
	// and sort after after ("" to start at the beginning), in byte order,
	// at most limit of them (limit <= 0 or over MaxKVList means
	// MaxKVList). A page shorter than its limit is the last; the next page
	// starts after the last key returned.
	KVList(ctx context.Context, ns, prefix, after string, limit int) ([]string, error)
	// KVDropNamespace removes every key of ns, and its usage with them.
	// Dropping an empty or unknown namespace is not an error.
	KVDropNamespace(ctx context.Context, ns string) error
}

// CheckKVKey returns an EINVALID error unless key is a valid key: 1 to
// MaxKVKey bytes of UTF-8, no NUL.
func CheckKVKey(key string) error {
	if err := checkKVString(key); err != "" {
		return Errorf(EINVALID, "kv key %s", err)
	}
	return nil
}

// CheckKVNamespace returns an EINVALID error unless ns is a valid
// namespace; the rule is the key rule.
func CheckKVNamespace(ns string) error {
	if err := checkKVString(ns); err != "" {
		return Errorf(EINVALID, "kv namespace %s", err)
	}
	return nil
}

// CheckKVPrefix returns an EINVALID error unless prefix is "" or a valid
// key.
func CheckKVPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := checkKVString(prefix); err != "" {
		return Errorf(EINVALID, "kv prefix %s", err)
	}
	return nil
}

// CheckKVValue returns an ELIMIT error if value is over MaxKVValue.
func CheckKVValue(value []byte) error {
	if len(value) > MaxKVValue {
		return Errorf(ELIMIT, "kv value of %d bytes is over the %d MiB limit", len(value), MaxKVValue>>20)
	}
	return nil
}

// checkKVString describes what is wrong with a key or namespace, or
// returns "".
func checkKVString(s string) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > MaxKVKey:
		return "is " + strconv.Itoa(len(s)) + " bytes, over the " + strconv.Itoa(MaxKVKey) + "-byte limit"
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "contains a NUL byte"
	}
	return ""
}
