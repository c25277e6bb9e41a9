// Package sandboxrpc carries a sandbox runtime (a sandbox.Runtime) over
// Kiln's process-plugin protocol: the "sandbox-runtime" kind's go-plugin
// plugin, the gRPC service a plugin serves (NewRuntimeServer) and the
// host's client (RuntimeClient), on specs/proto/sandboxruntime.proto
// (generated into sdk/plugin/pluginrpc/sandboxruntimepb). A runtime's
// errors cross as EncodeError encodes them; a spec and the capabilities
// as JSON, in the plugin contracts' shapes (wire.SandboxSpec,
// wire.SandboxCapabilities) from protocol 3 on.
//
// Both ends import it: a plugin through sandbox/sandboxplugin, the kind
// a plugin passes to sdk/plugin's Serve, and the host through
// plugins/sandboxruntime. It lives beside package sandbox, not in the
// plugin SDK, because it is written against package sandbox's runtime
// interface, which the SDK does not link.
package sandboxrpc
