// Package process runs plugins as separate programs through
// hashicorp/go-plugin: the "process" runtime (runtime "process" in
// kiln-plugin.json), for extensions that need the operating system (the
// Docker socket, local programs, native libraries). It registers itself
// from init; NewLoader makes the runtime's plugins.Loader. The runtime
// knows no kind: a kind's package registers what it takes to carry the
// kind (RegisterKind: its go-plugin plugin at the protocol versions that
// carry it, how to describe it at start, how to make its client), and a
// process plugin provides the registered kinds — Kiln's "toolset",
// "model-provider" and "sandbox-runtime" — any of them; it must serve
// every kind its manifest lists. The wire protocol is specs/proto
// (toolset.proto, modelprovider.proto, sandboxruntime.proto,
// host.proto) and a kind's own .proto; plugin authors write it with
// sdk/plugin and never see go-plugin. LoadSelf runs a built-in plugin the
// same way, with this executable as its entry (the docker sandbox
// runtime).
//
// Load starts the plugin and returns a *Plugin; Dispense hands out a
// kind's client, which reaches the process through Do (the serving
// process's end of the kind, waiting for a restart, a retry of a call the
// process's death cut off) and BeginCall (a call's progress events).
//
//   - Before every start the entry must be a regular file inside the
//     plugin folder, and go-plugin's SecureConfig hashes it just before
//     exec against the manifest's sha256 — unless this server verified the
//     same bytes before and the file's fingerprint (device, inode, size,
//     mtime and ctime, which every write or replacement changes) is still
//     the one it had then (integrity.Known). A changed binary is never
//     started; a plugin whose binary changed while it ran is failed at its
//     next restart.
//   - go-plugin's handshake, gRPC only, over mutual TLS with a fresh P-256
//     certificate on each side per start (pluginrpc.NewCertificate): the
//     host's goes to the plugin in PLUGIN_CLIENT_CERT and the plugin's
//     comes back on a pipe only the plugin holds, or, from a plugin built
//     for go-plugin's AutoMTLS, in the handshake line. Each side accepts
//     only the other, so only this host can talk to the plugin's socket,
//     and the host talks only to the process it started. The magic cookie
//     is not a security measure. The Kiln application protocol is
//     negotiated with VersionedPlugins (sdk/plugin/pluginrpc): version 1
//     carries a toolset only; version 2 has one gRPC service per kind and
//     the host's callbacks; version 3 carries the plugin contracts of
//     sdk/plugin/wire (a tool result's parts). The host offers each kind
//     at the versions its Kind says carry it, and the kind's client
//     speaks the version the process picked (Conn.Version). A plugin that
//     speaks none of this host's versions, or whose version does not
//     carry a kind it lists, is refused at start with the reason.
//   - The host's callbacks (protocol 2 on): the host serves
//     kiln.plugin.host.v1 on go-plugin's broker, on a new broker ID per
//     start, with the same mutual TLS, and names that ID in every request.
//     Through it the plugin reaches what a WASM plugin reaches through its
//     host functions: progress events of a call in flight (Options.Emit,
//     with the call's context, so they reach the run that made it), its
//     own key/value namespace (Options.KV) and the server's log.
//   - The environment is exactly the variables permissions.env declares,
//     with the host's values, plus Options.Env (the loader adds
//     KILN_PLUGIN_DATA, the plugin's data folder) and go-plugin's
//     handshake variables; no PATH, HOME or anything else unless
//     declared. The working directory is the plugin folder.
//   - The plugin describes itself once per start (its tools, its provider's
//     settings and models); a restarted process whose description changed
//     is refused.
//   - Each call, each model list and each whole model turn has the
//     deadline permissions.timeout_ms, which includes waiting for a
//     restart, and reuses the one gRPC connection to the process. A
//     sandbox runtime's operations wait for a restart within it, then run
//     as long as their own context allows (a command, a connection to a
//     sandbox's agent).
//   - A process that dies is started again after a backoff (100ms doubling
//     to 10s, at most 5 restarts in any minute, then the plugin is
//     failed). Health reports running, restarting, failed or closed, the
//     restart count, the last error and the PID. Calls made while it
//     restarts wait for it within their deadline. A call of an idempotent
//     tool, and a model turn that had streamed nothing, cut off by the
//     process's death is tried once more on the restarted process, as is
//     a sandbox operation that is safe to repeat; a restarted process
//     recovers each sandbox before its first operation on it.
//   - Logs (the host's, go-plugin's, the plugin's stderr and its Log
//     callbacks) go to a *slog.Logger with plugin=<id>.
//
// What the host cannot do: enforce the network, filesystem and exec
// permissions inside the process. A process plugin runs with the server's
// user account; the consent prompt says so (plugins.Consent.Lines).
// The checksum check and exec are separate steps, so a user who can
// write the plugin folder can race them; the plugin folder must be
// writable only by the server's user.
package process
