//go:build !wasip1

package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/hostpb"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/modelproviderpb"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// The host's callbacks in a native build (Kiln plugin protocol 2): the
// host serves them through go-plugin's broker and names the broker ID in
// every request; the plugin dials it on the first request and keeps the
// connection. Before that, or under a host of protocol 1, the key/value
// functions and Emit fail and Log writes to stderr.

// host is the plugin's link to the host's callbacks.
var host hostLink

type hostLink struct {
	mu     sync.Mutex
	broker *goplugin.GRPCBroker
	id     uint32
	conn   *grpc.ClientConn
	client hostpb.HostClient
}

// setBroker keeps the process's broker (go-plugin hands it to every
// plugin set up; it is the same one).
func (h *hostLink) setBroker(b *goplugin.GRPCBroker) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.broker = b
}

// use records the broker ID on which the host serves its callbacks; 0 (a
// protocol 1 host) changes nothing. The connection is made when a
// callback is first used, so that a plugin that never calls back never
// waits for it.
func (h *hostLink) use(id uint32) {
	if id == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.id == id {
		return
	}
	if h.conn != nil {
		h.conn.Close()
	}
	h.id, h.conn, h.client = id, nil, nil
}

// get returns the host's callbacks, connecting on first use; nil before
// the first request, or when the broker cannot reach the host.
func (h *hostLink) get() hostpb.HostClient {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.client == nil && h.id != 0 && h.broker != nil {
		if conn, err := h.broker.Dial(h.id); err == nil {
			h.conn, h.client = conn, hostpb.NewHostClient(conn)
		}
	}
	return h.client
}

// callKey carries the host's ID of the call in flight in its context.
type callKey struct{}

// errNoHost is the failure of a host callback without a connection to it.
var errNoHost = errors.New("the host's callbacks are not available (a Kiln host of plugin protocol 1, or no call has reached the plugin yet)")

// hostTimeout bounds a host callback without a context of its own.
const hostTimeout = 30 * time.Second

// Emit sends a progress event (any JSON value, at most 64 KiB) of the
// call whose context ctx is (a tool handler's) to the run's stream.
func Emit(ctx context.Context, event any) error {
	data, err := json.Marshal(event)
	if err != nil {
		return err
	}
	id, _ := ctx.Value(callKey{}).(uint64)
	c := host.get()
	if c == nil || id == 0 {
		return fmt.Errorf("emit: %w", errNoHost)
	}
	resp, err := c.Emit(ctx, &hostpb.EmitRequest{CallId: id, Event: data})
	if err != nil {
		return fmt.Errorf("emit: %w", err)
	}
	if r := resp.GetRefused(); r != "" {
		return errors.New("kiln emit: the host refused the event: " + r)
	}
	return nil
}

// Log writes msg to the host's log at level, through the host's callbacks
// once connected; before that it writes one JSON line to the process's
// stderr in the format go-plugin's host parses as an hclog entry
// ({"@level","@message","@timestamp"}). A message over 8 KiB is cut, as in
// a WASM build.
func Log(level slog.Level, msg string) {
	if c := host.get(); c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), hostTimeout)
		defer cancel()
		if _, err := c.Log(ctx, &hostpb.LogRequest{Level: int32(level), Message: msg}); err == nil {
			return
		}
	}
	logMu.Lock()
	defer logMu.Unlock()
	stderr.Write(logLine(time.Now(), level, msg))
}

// kv returns the host's callbacks and a context for one key/value call.
func kv() (hostpb.HostClient, context.Context, context.CancelFunc, error) {
	c := host.get()
	if c == nil {
		return nil, nil, nil, fmt.Errorf("kv: %w", errNoHost)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hostTimeout)
	return c, ctx, cancel, nil
}

// KVGet reads key from the plugin's key/value namespace, which the host
// keeps across restarts and removes with the plugin.
func KVGet(key string) (value []byte, found bool, err error) {
	c, ctx, cancel, err := kv()
	if err != nil {
		return nil, false, err
	}
	defer cancel()
	resp, err := c.KVGet(ctx, &hostpb.KVGetRequest{Key: key})
	if err != nil {
		return nil, false, fmt.Errorf("kv get: %w", err)
	}
	if resp.GetError() != "" {
		return nil, false, errors.New(resp.GetError())
	}
	return resp.GetValue(), resp.GetFound(), nil
}

// KVPut sets key to value in the plugin's key/value namespace.
func KVPut(key string, value []byte) error {
	c, ctx, cancel, err := kv()
	if err != nil {
		return err
	}
	defer cancel()
	resp, err := c.KVPut(ctx, &hostpb.KVPutRequest{Key: key, Value: value})
	if err != nil {
		return fmt.Errorf("kv put: %w", err)
	}
	if resp.GetError() != "" {
		return errors.New(resp.GetError())
	}
	return nil
}

// KVDelete removes key from the plugin's key/value namespace; a missing
// key is not an error.
func KVDelete(key string) error {
	c, ctx, cancel, err := kv()
	if err != nil {
		return err
	}
	defer cancel()
	resp, err := c.KVDelete(ctx, &hostpb.KVDeleteRequest{Key: key})
	if err != nil {
		return fmt.Errorf("kv delete: %w", err)
	}
	if resp.GetError() != "" {
		return errors.New(resp.GetError())
	}
	return nil
}

// KVList returns up to limit keys (1000 when limit <= 0) that start with
// prefix and sort after after, in byte order.
func KVList(prefix, after string, limit int) ([]string, error) {
	c, ctx, cancel, err := kv()
	if err != nil {
		return nil, err
	}
	defer cancel()
	resp, err := c.KVList(ctx, &hostpb.KVListRequest{Prefix: prefix, After: after, Limit: int32(min(max(limit, 0), 1<<30))})
	if err != nil {
		return nil, fmt.Errorf("kv list: %w", err)
	}
	if resp.GetError() != "" {
		return nil, errors.New(resp.GetError())
	}
	return resp.GetKeys(), nil
}

// providerServer serves a Provider over kiln.plugin.modelprovider.v1 at
// protocol 3: its payloads are the contracts of package wire.
type providerServer struct {
	modelproviderpb.UnimplementedModelProviderServer
	p    Provider
	desc []byte
}

func newProviderServer(p Provider) (*providerServer, error) {
	desc, err := json.Marshal(p.describe())
	if err != nil {
		return nil, err
	}
	return &providerServer{p: p, desc: desc}, nil
}

func (s *providerServer) Describe(context.Context, *modelproviderpb.DescribeRequest) (*modelproviderpb.DescribeResponse, error) {
	return &modelproviderpb.DescribeResponse{Description: s.desc}, nil
}

func (s *providerServer) Models(ctx context.Context, req *modelproviderpb.ModelsRequest) (resp *modelproviderpb.ModelsResponse, _ error) {
	host.use(req.GetHost())
	if s.p.ListModels == nil {
		return &modelproviderpb.ModelsResponse{}, nil
	}
	defer func() {
		if r := recover(); r != nil {
			Log(slog.LevelError, fmt.Sprintf("ListModels panicked: %v\n%s", r, debug.Stack()))
			resp = &modelproviderpb.ModelsResponse{Error: fmt.Sprintf("ListModels panicked: %v", r)}
		}
	}()
	models, err := s.p.ListModels(ctx, Settings(req.GetSettings()))
	if err != nil {
		return &modelproviderpb.ModelsResponse{Error: err.Error()}, nil
	}
	data, err := json.Marshal(wireModels(models))
	if err != nil {
		return &modelproviderpb.ModelsResponse{Error: err.Error()}, nil
	}
	return &modelproviderpb.ModelsResponse{Models: data}, nil
}

// Turn runs one turn, streaming its text; the provider's failure (and a
// panic in it) is the last event.
func (s *providerServer) Turn(req *modelproviderpb.TurnRequest, stream modelproviderpb.ModelProvider_TurnServer) error {
	host.use(req.GetHost())
	var w wire.TurnRequest
	err := json.Unmarshal(req.GetRequest(), &w)
	var tr TurnRequest
	if err == nil {
		tr, err = turnRequest(w)
	}
	if err != nil {
		return stream.Send(&modelproviderpb.TurnEvent{Event: &modelproviderpb.TurnEvent_Error{Error: "the host's request is not valid: " + err.Error()}})
	}
	resp, err := s.turn(stream.Context(), Settings(req.GetSettings()), req.GetModel(), tr, func(text string) {
		stream.Send(&modelproviderpb.TurnEvent{Event: &modelproviderpb.TurnEvent_Delta{Delta: text}})
	})
	if err == nil {
		var data []byte
		if data, err = json.Marshal(resp.wire()); err == nil {
			return stream.Send(&modelproviderpb.TurnEvent{Event: &modelproviderpb.TurnEvent_Response{Response: data}})
		}
	}
	msg := err.Error()
	if msg == "" {
		msg = "the model turn failed"
	}
	return stream.Send(&modelproviderpb.TurnEvent{Event: &modelproviderpb.TurnEvent_Error{Error: msg}})
}

func (s *providerServer) turn(ctx context.Context, set Settings, model string, req TurnRequest, delta func(string)) (resp TurnResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			Log(slog.LevelError, fmt.Sprintf("Turn panicked: %v\n%s", r, debug.Stack()))
			err = fmt.Errorf("Turn panicked: %v", r)
		}
	}()
	return s.p.Turn(ctx, set, model, req, delta)
}
