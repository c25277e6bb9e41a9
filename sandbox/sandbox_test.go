package sandbox_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/sandbox"
)

func TestCheckPath(t *testing.T) {
	for _, p := range []string{"/", "/tmp", "/tmp/a.txt", "/a b/c", "/tmp/..a", "/tmp/a..", `/tmp\x`} {
		if err := sandbox.CheckPath("read", p); err != nil {
			t.Errorf("CheckPath(%q) = %v", p, err)
		}
	}
	for _, p := range []string{"", "a", "tmp/a", "./a", "/tmp/", "/tmp//a", "/tmp/./a", "/tmp/../etc", "/..", "/.", "/a\x00b"} {
		err := sandbox.CheckPath("read", p)
		var pe *fs.PathError
		if !errors.Is(err, sandbox.ErrInvalid) || !errors.As(err, &pe) || pe.Path != p || pe.Op != "read" {
			t.Errorf("CheckPath(%q) = %v; want an *fs.PathError wrapping ErrInvalid", p, err)
		}
	}
}

func TestSpecCheck(t *testing.T) {
	c := sandbox.Capabilities{Name: "box", Network: []sandbox.NetworkMode{sandbox.NetworkNone, sandbox.NetworkEgress}, Max: sandbox.Resources{MemoryMiB: 512}}
	good := []sandbox.Spec{
		{ID: "a"},
		{ID: "sbx_01J.x-y", Env: map[string]string{"A_1": "x", "_B": ""}, Resources: sandbox.Resources{CPUMillis: 4000, MemoryMiB: 512}},
		{ID: "b", Network: sandbox.Network{Mode: sandbox.NetworkNone}},
		{ID: "c", Network: sandbox.Network{Mode: sandbox.NetworkEgress, Allow: []string{"api.example.com"}}, EgressSocket: "/run/kiln/c/egress.sock"},
		{ID: strings.Repeat("x", 128)},
	}
	for _, s := range good {
		if err := s.Check(c); err != nil {
			t.Errorf("Check(%+v) = %v", s, err)
		}
	}
	for _, tc := range []struct {
		spec sandbox.Spec
		want error
		says string
	}{
		{sandbox.Spec{}, sandbox.ErrInvalid, `sandbox id ""`},
		{sandbox.Spec{ID: "-a"}, sandbox.ErrInvalid, "sandbox id"},
		{sandbox.Spec{ID: "a/b"}, sandbox.ErrInvalid, "sandbox id"},
		{sandbox.Spec{ID: strings.Repeat("x", 129)}, sandbox.ErrInvalid, "sandbox id"},
		{sandbox.Spec{ID: "a", Env: map[string]string{"A=B": "x"}}, sandbox.ErrInvalid, `"A=B"`},
		{sandbox.Spec{ID: "a", Env: map[string]string{"1A": "x"}}, sandbox.ErrInvalid, `"1A"`},
		{sandbox.Spec{ID: "a", Env: map[string]string{"A": "x\x00y"}}, sandbox.ErrInvalid, "NUL"},
		{sandbox.Spec{ID: "a", Resources: sandbox.Resources{MemoryMiB: 513}}, sandbox.ErrInvalid, `memory_mib 513 is more than sandbox runtime "box" allows (512)`},
		{sandbox.Spec{ID: "a", Resources: sandbox.Resources{CPUMillis: -1}}, sandbox.ErrInvalid, "cpu_millis -1 is negative"},
		{sandbox.Spec{ID: "a", Network: sandbox.Network{Mode: sandbox.NetworkNone, Allow: []string{"x.com"}}}, sandbox.ErrInvalid, "allow list"},
		{sandbox.Spec{ID: "a", Network: sandbox.Network{Mode: sandbox.NetworkEgress}}, sandbox.ErrInvalid, "needs hosts"},
		{sandbox.Spec{ID: "a", Network: sandbox.Network{Mode: sandbox.NetworkEgress, Allow: []string{"x.com"}}}, sandbox.ErrInvalid, "egress socket"},
		{sandbox.Spec{ID: "a", EgressSocket: "/run/egress.sock"}, sandbox.ErrInvalid, "egress socket is for"},
		{sandbox.Spec{ID: "a", Network: sandbox.Network{Mode: "bridge"}}, sandbox.ErrInvalid, `"bridge" is not one of`},
		{sandbox.Spec{ID: "a", Network: sandbox.Network{Mode: sandbox.NetworkOpen}}, sandbox.ErrUnsupported, `sandbox runtime "box" does not support network mode "open"`},
		{sandbox.Spec{ID: "a", Image: "alpine"}, sandbox.ErrUnsupported, `sandbox runtime "box" does not support images`},
	} {
		err := tc.spec.Check(c)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Check(%+v) = %v; want %v saying %q", tc.spec, err, tc.want, tc.says)
		}
	}
}

func TestExecRequestCheck(t *testing.T) {
	if err := (sandbox.ExecRequest{Command: []string{"sh", "-c", "true"}, Dir: "/tmp", Env: map[string]string{"A": "1"}}).Check(); err != nil {
		t.Errorf("a good request: %v", err)
	}
	for _, req := range []sandbox.ExecRequest{
		{},
		{Command: []string{""}},
		{Command: []string{"echo", "a\x00b"}},
		{Command: []string{"pwd"}, Dir: "tmp"},
		{Command: []string{"pwd"}, Dir: "/tmp/"},
		{Command: []string{"env"}, Env: map[string]string{"": "x"}},
	} {
		if err := req.Check(); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("Check(%+v) = %v; want ErrInvalid", req, err)
		}
	}
}

func TestErrors(t *testing.T) {
	err := sandbox.Unsupported("docker", "pause")
	var ue *sandbox.UnsupportedError
	if !errors.Is(err, sandbox.ErrUnsupported) || !errors.As(err, &ue) || ue.Runtime != "docker" || ue.Op != "pause" ||
		err.Error() != `sandbox runtime "docker" does not support pause` {
		t.Errorf("Unsupported = %v", err)
	}
	if errors.Is(err, sandbox.ErrNotFound) {
		t.Error("an UnsupportedError is ErrNotFound")
	}
	err = sandbox.HandleVersion("docker", sandbox.Handle{Version: 7}, 2, 1)
	if !errors.Is(err, sandbox.ErrBadHandle) || !strings.Contains(err.Error(), `sandbox runtime "docker" reads handles of version 1, 2, not version 7`) {
		t.Errorf("HandleVersion = %v", err)
	}
}

// plain is a Runtime that is not a Pauser; pausing is a Runtime that is
// one, whether or not its capabilities say so.
type plain struct{ sandbox.Runtime }

func (plain) Capabilities() sandbox.Capabilities { return sandbox.Capabilities{Name: "plain"} }

type pausing struct {
	sandbox.Runtime
	can   bool
	calls []string
}

func (p *pausing) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Name: "pausing", Pause: p.can}
}

func (p *pausing) Pause(context.Context, sandbox.Handle) error {
	p.calls = append(p.calls, "pause")
	return nil
}

func (p *pausing) Resume(context.Context, sandbox.Handle) error {
	p.calls = append(p.calls, "resume")
	return nil
}

func TestPauseHelpers(t *testing.T) {
	ctx := context.Background()
	h := sandbox.Handle{Version: 1}
	for _, r := range []sandbox.Runtime{plain{}, &pausing{}} {
		name := r.Capabilities().Name
		for op, f := range map[string]func(context.Context, sandbox.Runtime, sandbox.Handle) error{"pause": sandbox.Pause, "resume": sandbox.Resume} {
			err := f(ctx, r, h)
			var ue *sandbox.UnsupportedError
			if !errors.As(err, &ue) || ue.Runtime != name || ue.Op != op {
				t.Errorf("%s of %s: %v; want an UnsupportedError naming both", op, name, err)
			}
		}
	}
	p := &pausing{can: true}
	if err := sandbox.Pause(ctx, p, h); err != nil {
		t.Fatal(err)
	}
	if err := sandbox.Resume(ctx, p, h); err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.calls, " ") != "pause resume" {
		t.Errorf("calls %q", p.calls)
	}
}
