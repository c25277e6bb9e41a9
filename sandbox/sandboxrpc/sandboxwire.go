package sandboxrpc

import (
	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// The sandbox runtime's values as the plugin contracts (sdk/plugin/wire)
// have them, and back: one place for both ends, the host's client and the
// plugin's server. Core's values are converted in plugins/wireconv.

// FromSandboxSpec returns spec as a plugin receives it.
func FromSandboxSpec(spec sandbox.Spec) wire.SandboxSpec {
	out := wire.SandboxSpec{V: wire.Version, ID: spec.ID, Image: spec.Image, Env: spec.Env,
		Resources:  fromResources(spec.Resources),
		Network:    wire.SandboxNetwork{Mode: string(spec.Network.Mode), Allow: spec.Network.Allow},
		Entrypoint: spec.Entrypoint, ExecToken: spec.ExecToken, EgressSocket: spec.EgressSocket}
	for _, m := range spec.Mounts {
		out.Mounts = append(out.Mounts, wire.SandboxMount{HostPath: m.HostPath, Path: m.Path, ReadOnly: m.ReadOnly})
	}
	return out
}

// SandboxSpec returns the spec a plugin received as package sandbox has
// it, or an error for a payload version this side does not read.
func SandboxSpec(w wire.SandboxSpec) (sandbox.Spec, error) {
	if err := wire.CheckVersion("the sandbox spec", w.V); err != nil {
		return sandbox.Spec{}, err
	}
	out := sandbox.Spec{ID: w.ID, Image: w.Image, Env: w.Env, Resources: resources(w.Resources),
		Network:    sandbox.Network{Mode: sandbox.NetworkMode(w.Network.Mode), Allow: w.Network.Allow},
		Entrypoint: w.Entrypoint, ExecToken: w.ExecToken, EgressSocket: w.EgressSocket}
	for _, m := range w.Mounts {
		out.Mounts = append(out.Mounts, sandbox.Mount{HostPath: m.HostPath, Path: m.Path, ReadOnly: m.ReadOnly})
	}
	return out, nil
}

// FromSandboxCapabilities returns c as a plugin describes it.
func FromSandboxCapabilities(c sandbox.Capabilities) wire.SandboxCapabilities {
	out := wire.SandboxCapabilities{V: wire.Version, Name: c.Name, Pause: c.Pause, Images: c.Images, Mounts: c.Mounts, Max: fromResources(c.Max)}
	for _, m := range c.Network {
		out.Network = append(out.Network, string(m))
	}
	return out
}

// SandboxCapabilities returns the capabilities a plugin described as
// package sandbox has them, or an error for a payload version this side
// does not read.
func SandboxCapabilities(w wire.SandboxCapabilities) (sandbox.Capabilities, error) {
	if err := wire.CheckVersion("the sandbox runtime's capabilities", w.V); err != nil {
		return sandbox.Capabilities{}, err
	}
	out := sandbox.Capabilities{Name: w.Name, Pause: w.Pause, Images: w.Images, Mounts: w.Mounts, Max: resources(w.Max)}
	for _, m := range w.Network {
		out.Network = append(out.Network, sandbox.NetworkMode(m))
	}
	return out, nil
}

func fromResources(r sandbox.Resources) wire.SandboxResources {
	return wire.SandboxResources{CPUMillis: r.CPUMillis, MemoryMiB: r.MemoryMiB, DiskMiB: r.DiskMiB}
}

func resources(r wire.SandboxResources) sandbox.Resources {
	return sandbox.Resources{CPUMillis: r.CPUMillis, MemoryMiB: r.MemoryMiB, DiskMiB: r.DiskMiB}
}
