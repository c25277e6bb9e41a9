package wire

// The contracts of a sandbox runtime plugin: the runtime's capabilities,
// the sandbox to start and the handle the runtime returns. Package
// sandbox of Kiln holds the runtime interface these describe and its
// rules (what a valid spec is, what each field promises); a process
// plugin's sandboxruntime.proto carries them as JSON bytes from protocol
// 3 on.

// Network modes (SandboxNetwork.Mode).
const (
	// NetworkNone: no network at all (loopback aside). The default.
	NetworkNone = "none"
	// NetworkEgress: outgoing connections to SandboxNetwork.Allow only,
	// through SandboxSpec.EgressSocket.
	NetworkEgress = "egress"
	// NetworkOpen: outgoing connections anywhere.
	NetworkOpen = "open"
)

// SandboxCapabilities is what a sandbox runtime can do beyond the
// required operations, and its limits: data the runtime describes once
// per start.
//
//	{"v": 1, "name": "docker", "pause": true, "images": true, "mounts": true,
//	 "network": ["none", "egress"], "max": {"cpu_millis": 4000, "memory_mib": 8192}}
type SandboxCapabilities struct {
	V int `json:"v"`
	// Name names the runtime in messages and errors: the ID of the
	// plugin that provides it.
	Name string `json:"name"`
	// Pause: the runtime pauses and resumes sandboxes.
	Pause bool `json:"pause,omitempty"`
	// Images: SandboxSpec.Image and Entrypoint are honoured (an OCI
	// image).
	Images bool `json:"images,omitempty"`
	// Mounts: SandboxSpec.Mounts are honoured.
	Mounts bool `json:"mounts,omitempty"`
	// Network lists the network modes the runtime starts sandboxes in;
	// every runtime accepts "none".
	Network []string `json:"network,omitempty"`
	// Max is the most a spec may ask for; an absent or zero field sets no
	// limit.
	Max SandboxResources `json:"max"`
}

// SandboxSpec describes a sandbox to start.
//
//	{"v": 1, "id": "sbx-1", "image": "alpine:3.20", "env": {"A": "1"},
//	 "resources": {"memory_mib": 512}, "network": {"mode": "egress", "allow": ["api.example.com"]},
//	 "entrypoint": ["tail", "-f", "/dev/null"],
//	 "mounts": [{"host_path": "/home/me/p", "path": "/work", "read_only": true}],
//	 "exec_token": "…", "egress_socket": "/run/kiln/egress/sbx-1/proxy.sock"}
type SandboxSpec struct {
	V int `json:"v"`
	// ID is Kiln's ID of the sandbox, unique among the runtime's live
	// sandboxes: Start is idempotent by it.
	ID string `json:"id"`
	// Image is the OCI image to run, for a runtime with images; "" is the
	// runtime's default environment.
	Image string `json:"image,omitempty"`
	// Env are variables set for every command in the sandbox.
	Env map[string]string `json:"env,omitempty"`
	// Resources cap the sandbox; an absent or zero field is the
	// runtime's default.
	Resources SandboxResources `json:"resources"`
	// Network is what the sandbox may reach; absent is nothing.
	Network SandboxNetwork `json:"network"`
	// Entrypoint is the sandbox's main process, for a runtime with
	// images; absent is the image's own, or the runtime's "keep running".
	Entrypoint []string `json:"entrypoint,omitempty"`
	// Mounts are host folders the sandbox sees, for a runtime with
	// mounts.
	Mounts []SandboxMount `json:"mounts,omitempty"`
	// ExecToken is the sandbox's own token for the execution API, for a
	// runtime whose sandboxes serve it themselves.
	ExecToken string `json:"exec_token,omitempty"`
	// EgressSocket is, in network mode "egress", the host path of the
	// unix socket that is the sandbox's only way out.
	EgressSocket string `json:"egress_socket,omitempty"`
}

// SandboxResources are the limits of a sandbox, or a runtime's maxima.
//
//	{"cpu_millis": 500, "memory_mib": 512, "disk_mib": 1024}
type SandboxResources struct {
	// CPUMillis is CPU time in thousandths of a core.
	CPUMillis int `json:"cpu_millis,omitempty"`
	// MemoryMiB is memory, in MiB.
	MemoryMiB int `json:"memory_mib,omitempty"`
	// DiskMiB is the size of the sandbox's writable filesystem, in MiB.
	DiskMiB int `json:"disk_mib,omitempty"`
}

// SandboxNetwork is a sandbox's network access: a mode, and in mode
// "egress" the host[:port] patterns it may connect to ("api.example.com",
// "*.example.com:8443").
//
//	{"mode": "egress", "allow": ["api.example.com"]}
type SandboxNetwork struct {
	Mode  string   `json:"mode,omitempty"`
	Allow []string `json:"allow,omitempty"`
}

// SandboxMount is a host folder seen inside a sandbox: HostPath on the
// host (absolute, resolved) at Path in the sandbox (absolute, clean).
//
//	{"host_path": "/home/me/p", "path": "/work", "read_only": true}
type SandboxMount struct {
	HostPath string `json:"host_path"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// SandboxHandle is a runtime's private state for one sandbox: Kiln
// stores it and hands it back. Data is opaque to everyone but the runtime
// that wrote it, and Version (1 and up) says which of the runtime's own
// formats Data is in; the zero handle names no sandbox. Its shape does
// not evolve: what changes is the runtime's, inside Data.
//
//	{"version": 1, "data": "eyJpZCI6IjEyMyJ9"}
type SandboxHandle struct {
	Version int    `json:"version"`
	Data    []byte `json:"data,omitempty"`
}
