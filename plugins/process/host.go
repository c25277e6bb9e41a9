package process

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/hostpb"
)

// Limits of the host's callbacks, as for a WASM plugin.
const (
	maxEvent      = 64 << 10 // one progress event
	maxLogMessage = 8 << 10  // one log message; longer ones are cut
)

// hostServer serves kiln.plugin.host.v1.Host to one plugin's processes
// (protocol 2): progress events of the calls in flight, its key/value
// namespace and the server's log. It outlives restarts; every process
// gets it on a new broker ID.
type hostServer struct {
	hostpb.UnimplementedHostServer
	log  *slog.Logger
	kv   plugins.KV // nil for none
	emit func(context.Context, json.RawMessage)

	next  atomic.Uint64
	mu    sync.Mutex
	calls map[uint64]context.Context // calls in flight, by call ID
}

func newHostServer(log *slog.Logger, kv plugins.KV, emit func(context.Context, json.RawMessage)) *hostServer {
	return &hostServer{log: log, kv: kv, emit: emit, calls: map[uint64]context.Context{}}
}

// serve is the broker's server for the Host service.
func (h *hostServer) serve(opts []grpc.ServerOption) *grpc.Server {
	s := grpc.NewServer(opts...)
	hostpb.RegisterHostServer(s, h)
	return s
}

// begin registers a call whose progress events go to ctx, and returns its
// ID and the function that ends it.
func (h *hostServer) begin(ctx context.Context) (uint64, func()) {
	id := h.next.Add(1)
	h.mu.Lock()
	h.calls[id] = ctx
	h.mu.Unlock()
	return id, func() {
		h.mu.Lock()
		delete(h.calls, id)
		h.mu.Unlock()
	}
}

// Emit sends a progress event of a call in flight.
func (h *hostServer) Emit(_ context.Context, req *hostpb.EmitRequest) (*hostpb.EmitResponse, error) {
	h.mu.Lock()
	ctx, ok := h.calls[req.GetCallId()]
	h.mu.Unlock()
	switch ev := req.GetEvent(); {
	case !ok:
		return &hostpb.EmitResponse{Refused: "no call of that ID is in flight"}, nil
	case len(ev) > maxEvent:
		return &hostpb.EmitResponse{Refused: "the event is larger than 64 KiB"}, nil
	case !json.Valid(ev):
		return &hostpb.EmitResponse{Refused: "the event is not JSON"}, nil
	default:
		if h.emit != nil {
			h.emit(ctx, ev)
		}
		return &hostpb.EmitResponse{}, nil
	}
}

// Log writes a record as the plugin.
func (h *hostServer) Log(ctx context.Context, req *hostpb.LogRequest) (*hostpb.LogResponse, error) {
	msg := req.GetMessage()
	if len(msg) > maxLogMessage {
		msg = strings.ToValidUTF8(msg[:maxLogMessage], "") + "…"
	}
	h.log.Log(context.WithoutCancel(ctx), slog.Level(req.GetLevel()), msg)
	return &hostpb.LogResponse{}, nil
}

// kvError is what the plugin is told of a failed key/value call: a
// *core.Error's message, else (logged) that the storage failed.
func (h *hostServer) kvError(op, key string, err error) string {
	var ce *core.Error
	if errors.As(err, &ce) {
		return ce.Message
	}
	h.log.Warn("plugin kv failed", "op", op, "key", key, "err", err)
	return "kv " + op + ": the storage failed"
}

// errNoKV is the answer to every key/value call of a plugin without one.
const errNoKV = "kv is not available: the host gave this plugin no key/value store"

func (h *hostServer) KVGet(ctx context.Context, req *hostpb.KVGetRequest) (*hostpb.KVGetResponse, error) {
	if h.kv == nil {
		return &hostpb.KVGetResponse{Error: errNoKV}, nil
	}
	if err := core.CheckKVKey(req.GetKey()); err != nil {
		return &hostpb.KVGetResponse{Error: h.kvError("get", req.GetKey(), err)}, nil
	}
	v, found, err := h.kv.Get(ctx, req.GetKey())
	if err != nil {
		return &hostpb.KVGetResponse{Error: h.kvError("get", req.GetKey(), err)}, nil
	}
	return &hostpb.KVGetResponse{Found: found, Value: v}, nil
}

func (h *hostServer) KVPut(ctx context.Context, req *hostpb.KVPutRequest) (*hostpb.KVResponse, error) {
	if h.kv == nil {
		return &hostpb.KVResponse{Error: errNoKV}, nil
	}
	err := core.CheckKVKey(req.GetKey())
	if err == nil && len(req.GetValue()) > core.MaxKVValue {
		err = core.Errorf(core.EINVALID, "kv put: the value is larger than %d bytes", core.MaxKVValue)
	}
	if err == nil {
		err = h.kv.Put(ctx, req.GetKey(), req.GetValue())
	}
	if err != nil {
		return &hostpb.KVResponse{Error: h.kvError("put", req.GetKey(), err)}, nil
	}
	return &hostpb.KVResponse{}, nil
}

func (h *hostServer) KVDelete(ctx context.Context, req *hostpb.KVDeleteRequest) (*hostpb.KVResponse, error) {
	if h.kv == nil {
		return &hostpb.KVResponse{Error: errNoKV}, nil
	}
	err := core.CheckKVKey(req.GetKey())
	if err == nil {
		err = h.kv.Delete(ctx, req.GetKey())
	}
	if err != nil {
		return &hostpb.KVResponse{Error: h.kvError("delete", req.GetKey(), err)}, nil
	}
	return &hostpb.KVResponse{}, nil
}

func (h *hostServer) KVList(ctx context.Context, req *hostpb.KVListRequest) (*hostpb.KVListResponse, error) {
	if h.kv == nil {
		return &hostpb.KVListResponse{Error: errNoKV}, nil
	}
	limit := int(req.GetLimit())
	if limit <= 0 || limit > core.MaxKVList {
		limit = core.MaxKVList
	}
	err := core.CheckKVPrefix(req.GetPrefix())
	var keys []string
	if err == nil {
		keys, err = h.kv.List(ctx, req.GetPrefix(), req.GetAfter(), limit)
	}
	if err != nil {
		return &hostpb.KVListResponse{Error: h.kvError("list", req.GetPrefix(), err)}, nil
	}
	return &hostpb.KVListResponse{Keys: keys[:min(len(keys), limit)]}, nil
}
