// Package process runs toolset plugins as separate programs through
// hashicorp/go-plugin: runtime "process" in kiln-plugin.json, for
// extensions that need the operating system (the Docker socket, a local
// MCP server). The wire protocol is specs/proto/toolset.proto; plugin
// authors write it with sdk/plugin and never see go-plugin.
//
// Load starts the plugin and returns a toolset.Toolset (a *Plugin):
//
//   - Before every start the entry must be a regular file inside the
//     plugin folder, and go-plugin's SecureConfig hashes it just before
//     exec against the manifest's sha256. A changed binary is never
//     started; a plugin whose binary changed while it ran is failed at its
//     next restart.
//   - go-plugin's handshake (protocol version 1, gRPC only) over mutual
//     TLS with a fresh P-256 certificate on each side per start
//     (pluginrpc.NewCertificate): the host's goes to the plugin in
//     PLUGIN_CLIENT_CERT and the plugin's comes back on a pipe only the
//     plugin holds, or, from a plugin built for go-plugin's AutoMTLS, in
//     the handshake line. Each side accepts only the other, so only this
//     host can talk to the plugin's socket and the host talks only to the
//     process it started. The magic cookie is not a security measure.
//   - The environment is exactly the variables permissions.env declares,
//     with the host's values, plus go-plugin's handshake variables; no
//     PATH, HOME or anything else unless declared. The working directory
//     is the plugin folder.
//   - Each call has the deadline permissions.timeout_ms and reuses the one
//     gRPC connection to the process.
//   - A process that dies is started again after a backoff (100ms doubling
//     to 10s, at most 5 restarts in any minute, then the plugin is
//     failed). Health reports running, restarting, failed or closed, the
//     restart count, the last error and the PID. Calls made while it
//     restarts wait for it within their deadline.
//   - Logs (the host's, go-plugin's and the plugin's stderr) go to a
//     *slog.Logger with plugin=<id>.
//
// What the host cannot do: enforce the network, filesystem and exec
// permissions inside the process. A process plugin runs with the server's
// user account; the consent prompt says so (Manifest.ConsentSummary).
// The checksum check and exec are separate steps, so a user who can
// write the plugin folder can race them; the plugin folder must be
// writable only by the server's user.
package process
