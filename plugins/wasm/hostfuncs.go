package wasm

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// kilnModule is the name of the one import module of host functions.
const kilnModule = "kiln"

// Limits of the host functions.
const (
	maxRequest    = 8 << 20 // a JSON request from the guest
	maxLogMessage = 8 << 10 // one log message, longer is cut
	maxEvent      = 64 << 10
	maxRandom     = 1 << 20
)

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// instantiateKiln instantiates the "kiln" host module in r. The functions
// find the plugin they serve through the call's context (instanceFrom);
// one module serves every plugin in the runtime.
func instantiateKiln(ctx context.Context, r wazero.Runtime) error {
	b := r.NewHostModuleBuilder(kilnModule)
	fn := func(name string, f api.GoModuleFunc, params, results []api.ValueType, names ...string) {
		b.NewFunctionBuilder().WithGoModuleFunction(f, params, results).WithParameterNames(names...).Export(name)
	}
	fn("log", hostLog, []api.ValueType{i32, i32, i32}, nil, "level", "ptr", "len")
	fn("http_request", jsonCall((*instance).httpRequest), []api.ValueType{i32, i32}, []api.ValueType{i64}, "ptr", "len")
	fn("http_open", jsonCall((*instance).httpOpen), []api.ValueType{i32, i32}, []api.ValueType{i64}, "ptr", "len")
	fn("http_read", hostHTTPRead, []api.ValueType{i64, i32, i32}, []api.ValueType{i64}, "handle", "ptr", "len")
	fn("http_close", jsonCall((*instance).httpClose), []api.ValueType{i32, i32}, []api.ValueType{i64}, "ptr", "len")
	fn("fs_read", jsonCall((*instance).fsRead), []api.ValueType{i32, i32}, []api.ValueType{i64}, "ptr", "len")
	fn("fs_write", jsonCall((*instance).fsWrite), []api.ValueType{i32, i32}, []api.ValueType{i64}, "ptr", "len")
	fn("kv_get", jsonCall((*instance).kvGet), []api.ValueType{i32, i32}, []api.ValueType{i64}, "ptr", "len")
	fn("kv_put", jsonCall((*instance).kvPut), []api.ValueType{i32, i32}, []api.ValueType{i64}, "ptr", "len")
	fn("kv_delete", jsonCall((*instance).kvDelete), []api.ValueType{i32, i32}, []api.ValueType{i64}, "ptr", "len")
	fn("kv_list", jsonCall((*instance).kvList), []api.ValueType{i32, i32}, []api.ValueType{i64}, "ptr", "len")
	fn("result_take", hostResultTake, []api.ValueType{i32, i32}, []api.ValueType{i32}, "ptr", "len")
	fn("clock_now", hostClockNow, nil, []api.ValueType{i64})
	fn("random", hostRandom, []api.ValueType{i32, i32}, nil, "ptr", "len")
	fn("emit", hostEmit, []api.ValueType{i32, i32}, []api.ValueType{i32}, "ptr", "len")
	fn("delta", hostDelta, []api.ValueType{i32, i32}, []api.ValueType{i32}, "ptr", "len")
	_, err := b.Instantiate(ctx)
	return err
}

// guestBytes copies len bytes at ptr out of the guest's memory.
func guestBytes(m api.Module, ptr, n uint32, limit uint32) ([]byte, error) {
	if n > limit {
		return nil, fmt.Errorf("request of %d bytes is over the %d KiB limit", n, limit>>10)
	}
	b, ok := m.Memory().Read(ptr, n)
	if !ok {
		return nil, fmt.Errorf("request at %#x+%d is out of memory bounds", ptr, n)
	}
	return append([]byte(nil), b...), nil
}

// jsonCall adapts a JSON request -> JSON response host function to the ABI:
// (ptr, len) -> i64 length of the response held for result_take. Errors
// become {"error": "..."}. Without a plugin context it returns -1.
func jsonCall(f func(in *instance, ctx context.Context, req []byte) (any, error)) api.GoModuleFunc {
	return func(ctx context.Context, m api.Module, stack []uint64) {
		in := instanceFrom(ctx)
		if in == nil {
			stack[0] = api.EncodeI64(-1)
			return
		}
		var out any
		req, err := guestBytes(m, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), maxRequest)
		if err == nil {
			out, err = f(in, ctx, req)
		}
		if err != nil {
			out = map[string]string{"error": err.Error()}
		}
		data, err := json.Marshal(out)
		if err != nil {
			data, _ = json.Marshal(map[string]string{"error": "encode result: " + err.Error()})
		}
		in.pending = data
		stack[0] = api.EncodeI64(int64(len(data)))
	}
}

// hostResultTake copies the held result into the guest (exactly its
// length must be asked for) and returns the bytes copied, or -1.
func hostResultTake(ctx context.Context, m api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
	if in == nil || in.pending == nil || int(n) != len(in.pending) || !m.Memory().Write(ptr, in.pending) {
		stack[0] = api.EncodeI32(-1)
		return
	}
	in.pending = nil
	stack[0] = api.EncodeI32(int32(n))
}

func hostLog(ctx context.Context, m api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil {
		return
	}
	level := slog.Level(api.DecodeI32(stack[0]))
	ptr, n := api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
	cut := n > maxLogMessage
	b, ok := m.Memory().Read(ptr, min(n, maxLogMessage))
	if !ok {
		return
	}
	msg := string(b)
	if cut {
		msg += "…"
	}
	in.m.logger.Log(ctx, level, msg, "stream", "log")
}

func hostClockNow(ctx context.Context, _ api.Module, stack []uint64) {
	now := time.Now
	if in := instanceFrom(ctx); in != nil {
		now = in.m.now
	}
	stack[0] = api.EncodeI64(now().UnixNano())
}

func hostRandom(_ context.Context, m api.Module, stack []uint64) {
	ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
	for n > 0 {
		k := min(n, maxRandom)
		b := make([]byte, k)
		rand.Read(b)
		if !m.Memory().Write(ptr, b) {
			panic(fmt.Errorf("kiln.random: %#x+%d is out of memory bounds", ptr, k)) // traps the guest
		}
		ptr, n = ptr+k, n-k
	}
}

// hostEmit passes a progress event to LoadOptions.Emit; it returns 0, or
// 1 when the event is not valid JSON or too large.
func hostEmit(ctx context.Context, m api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	ev, err := guestBytes(m, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), maxEvent)
	if in == nil || err != nil || !json.Valid(ev) {
		stack[0] = api.EncodeI32(1)
		return
	}
	if in.m.emit != nil {
		in.m.emit(ctx, json.RawMessage(ev))
	}
	stack[0] = 0
}
