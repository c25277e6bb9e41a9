package sandboxrpc_test

import (
	"reflect"
	"testing"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/sandboxrpc"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// TestSandboxWire sends a spec and capabilities with every field set
// through their contracts and back: a field added to package sandbox
// and not to the contract (or the conversion) fails it.
func TestSandboxWire(t *testing.T) {
	spec := sandbox.Spec{ID: "sbx-1", Image: "alpine", Env: map[string]string{"A": "1"},
		Resources:  sandbox.Resources{CPUMillis: 1, MemoryMiB: 2, DiskMiB: 3},
		Network:    sandbox.Network{Mode: sandbox.NetworkEgress, Allow: []string{"a.example"}},
		Entrypoint: []string{"sleep"}, Mounts: []sandbox.Mount{{HostPath: "/h", Path: "/p", ReadOnly: true}},
		ExecToken: "t", EgressSocket: "/s"}
	caps := sandbox.Capabilities{Name: "x", Pause: true, Images: true, Mounts: true,
		Network: []sandbox.NetworkMode{sandbox.NetworkNone}, Max: sandbox.Resources{CPUMillis: 1, MemoryMiB: 2, DiskMiB: 3}}
	allSet(t, spec)
	allSet(t, caps)
	if got, err := sandboxrpc.SandboxSpec(sandboxrpc.FromSandboxSpec(spec)); err != nil || !reflect.DeepEqual(got, spec) {
		t.Errorf("spec came back as %+v, %v; want %+v", got, err, spec)
	}
	if got, err := sandboxrpc.SandboxCapabilities(sandboxrpc.FromSandboxCapabilities(caps)); err != nil || !reflect.DeepEqual(got, caps) {
		t.Errorf("capabilities came back as %+v, %v; want %+v", got, err, caps)
	}
	if _, err := sandboxrpc.SandboxSpec(wire.SandboxSpec{V: wire.Version + 1, ID: "x"}); err == nil {
		t.Error("a spec of a newer payload version was read")
	}
	if _, err := sandboxrpc.SandboxCapabilities(wire.SandboxCapabilities{V: wire.Version + 1}); err == nil {
		t.Error("capabilities of a newer payload version were read")
	}
}

// allSet fails for a field of v (a struct, followed into structs and
// slices of structs) with its zero value.
func allSet(t *testing.T, v any) {
	t.Helper()
	var walk func(path string, rv reflect.Value)
	walk = func(path string, rv reflect.Value) {
		switch {
		case rv.IsZero():
			t.Errorf("%s is not set: set it so that the test covers it", path)
		case rv.Kind() == reflect.Struct:
			for i := range rv.NumField() {
				walk(path+"."+rv.Type().Field(i).Name, rv.Field(i))
			}
		case rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Struct:
			walk(path+"[0]", rv.Index(0))
		}
	}
	walk(reflect.TypeOf(v).Name(), reflect.ValueOf(v))
}
