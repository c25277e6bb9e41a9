package wasm

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
)

// KV is one plugin's key/value namespace, behind the kv_get, kv_put,
// kv_delete and kv_list host functions: the host's plugins.KV.
type KV = plugins.KV

// errNoKV is the failure of every kv_* call of a plugin loaded without
// LoadOptions.KV.
var errNoKV = errors.New("kv is not available: the host gave this plugin no key/value store")

// kvStore returns the plugin's KV, or errNoKV.
func (in *instance) kvStore(fn string) (KV, error) {
	if in.m.kv == nil {
		return nil, fmt.Errorf("%s: %w", fn, errNoKV)
	}
	return in.m.kv, nil
}

// kvFailure turns a KV error into the message the guest sees: a coded
// error's message, the context's error, or (logged in full) a generic
// storage failure.
func (in *instance) kvFailure(ctx context.Context, fn, key string, err error) error {
	if len(key) > 64 {
		key = strings.ToValidUTF8(key[:64], "") + "…"
	}
	var ce *core.Error
	switch {
	case errors.As(err, &ce) && ce.Code != core.EINTERNAL:
		return fmt.Errorf("%s %q: %s", fn, key, ce.Message)
	case ctx.Err() != nil:
		return fmt.Errorf("%s %q: %w", fn, key, ctx.Err())
	}
	// The key may come from a tool's arguments: the log gets its size.
	in.m.logger.Warn("kv call failed", "fn", fn, "key_bytes", len(key), "error", err)
	return fmt.Errorf("%s %q: the key/value store failed", fn, key)
}

// kvGet serves kv_get: {"key"} -> {"found": true, "value": base64} or
// {"found": false}.
func (in *instance) kvGet(ctx context.Context, data []byte) (any, error) {
	var req struct {
		Key string `json:"key"`
	}
	if err := decodeStrict(data, &req); err != nil {
		return nil, fmt.Errorf("kv_get: %w", err)
	}
	kv, err := in.kvStore("kv_get")
	if err != nil {
		return nil, err
	}
	if err := core.CheckKVKey(req.Key); err != nil {
		return nil, in.kvFailure(ctx, "kv_get", req.Key, err)
	}
	v, ok, err := kv.Get(ctx, req.Key)
	if err != nil {
		return nil, in.kvFailure(ctx, "kv_get", req.Key, err)
	}
	if !ok {
		return struct {
			Found bool `json:"found"`
		}{false}, nil
	}
	if v == nil {
		v = []byte{} // "" rather than null
	}
	return struct {
		Found bool   `json:"found"`
		Value []byte `json:"value"`
	}{true, v}, nil
}

// kvPut serves kv_put: {"key", "value": base64} -> {}.
func (in *instance) kvPut(ctx context.Context, data []byte) (any, error) {
	var req struct {
		Key   string `json:"key"`
		Value []byte `json:"value"`
	}
	if err := decodeStrict(data, &req); err != nil {
		return nil, fmt.Errorf("kv_put: %w", err)
	}
	kv, err := in.kvStore("kv_put")
	if err != nil {
		return nil, err
	}
	if err := core.CheckKVKey(req.Key); err != nil {
		return nil, in.kvFailure(ctx, "kv_put", req.Key, err)
	}
	if err := core.CheckKVValue(req.Value); err != nil {
		return nil, in.kvFailure(ctx, "kv_put", req.Key, err)
	}
	if err := kv.Put(ctx, req.Key, req.Value); err != nil {
		return nil, in.kvFailure(ctx, "kv_put", req.Key, err)
	}
	return struct{}{}, nil
}

// kvDelete serves kv_delete: {"key"} -> {}.
func (in *instance) kvDelete(ctx context.Context, data []byte) (any, error) {
	var req struct {
		Key string `json:"key"`
	}
	if err := decodeStrict(data, &req); err != nil {
		return nil, fmt.Errorf("kv_delete: %w", err)
	}
	kv, err := in.kvStore("kv_delete")
	if err != nil {
		return nil, err
	}
	if err := core.CheckKVKey(req.Key); err != nil {
		return nil, in.kvFailure(ctx, "kv_delete", req.Key, err)
	}
	if err := kv.Delete(ctx, req.Key); err != nil {
		return nil, in.kvFailure(ctx, "kv_delete", req.Key, err)
	}
	return struct{}{}, nil
}

// kvList serves kv_list: {"prefix", "after", "limit"} -> {"keys": [...]}.
func (in *instance) kvList(ctx context.Context, data []byte) (any, error) {
	var req struct {
		Prefix string `json:"prefix"`
		After  string `json:"after"`
		Limit  int    `json:"limit"`
	}
	if err := decodeStrict(data, &req); err != nil {
		return nil, fmt.Errorf("kv_list: %w", err)
	}
	kv, err := in.kvStore("kv_list")
	if err != nil {
		return nil, err
	}
	if err := core.CheckKVPrefix(req.Prefix); err != nil {
		return nil, in.kvFailure(ctx, "kv_list", req.Prefix, err)
	}
	if req.Limit <= 0 || req.Limit > core.MaxKVList {
		req.Limit = core.MaxKVList
	}
	keys, err := kv.List(ctx, req.Prefix, req.After, req.Limit)
	if err != nil {
		return nil, in.kvFailure(ctx, "kv_list", req.Prefix, err)
	}
	if len(keys) > req.Limit {
		keys = keys[:req.Limit]
	}
	if keys == nil {
		keys = []string{}
	}
	return struct {
		Keys []string `json:"keys"`
	}{keys}, nil
}
