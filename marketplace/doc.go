// Package marketplace is Kiln's plugin marketplace: the index format
// (marketplace.json), its signature and transparency log, the client that
// verifies a marketplace before anything from it is installed, and the
// publishing tools (build, serve, mirror). It depends on plugins and
// plugins/integrity, never on web or cmd.
//
// # A published marketplace
//
// A marketplace is a folder of static files, served by any static host,
// a git repository, `kiln marketplace serve`, or read from disk:
//
//	marketplace.json                 the index (Index), specs/marketplace.schema.json
//	marketplace.json.sig             the signed statement (Statement) as a signed note
//	plugins/<name>/<name>-<v>.tar.gz the archives (Archive rules in archive.go)
//	log/entry/<n>                    the log's records, one per index version
//	log/tile/8/...                   the log's hash tiles (golang.org/x/mod/sumdb/tlog)
//	keys/rotations.json              key rotations, each signed by the old key
//
// # Signature
//
// marketplace.json.sig is a signed note (golang.org/x/mod/sumdb/note,
// Ed25519). Its text is the statement
//
//	kiln marketplace v1
//	<marketplace name>
//	<index version>
//	<sha256 of marketplace.json, hex>
//	<log tree size>
//	<log tree root hash, base64>
//
// The first four lines are the statement's record: the bytes appended to
// the log as entry Index.Log. The last two are the log's tree head after
// that append. One signature thus covers the index's exact bytes and the
// state of the whole log.
//
// A client trusts the verifier keys it was given when the marketplace was
// added (`kiln marketplace add URL --key KEY`), never a key the
// marketplace names for itself. keys/rotations.json lists rotations, each
// a signed note by the old key naming the new one; a client follows the
// chain from the key it trusts and from then on trusts only the new key.
//
// # Transparency
//
// Every index version a marketplace publishes is appended to its log, a
// Merkle tree in the format of Go's checksum database. A client keeps the
// last tree head it verified and, on every refresh, checks the new index's
// inclusion in the new tree and the new tree's consistency with the old
// one (proofs read from the static tiles). A marketplace that showed two
// users different indexes, or rewrote its history, cannot then show either
// of them a tree consistent with both.
//
// # Refusals
//
// A client refuses, with the reason: a signature by a key it does not
// trust; an index whose bytes are not the signed ones; an index version
// older than the last it saw (rollback) or the same version with other
// bytes; an index past its expires time (freeze); a log that is not
// consistent with the last tree head; an archive whose size, sha256 or
// unpacked folder digest differ from the index's. Each refusal is a
// *Refusal naming its reason (Reason*), and its message ends with it:
// "marketplace acme: index version 3 is older than version 5 seen on
// 2026-12-06: refused (rollback)".
//
// # The client
//
// Refresh fetches and verifies a marketplace through a Fetcher
// (NewFetcher: https://, a loopback http://, or a folder) against the
// Trust the client kept, and returns the index with the Trust to keep
// next. An install then checks the archive as it downloads it
// (FetchArtifact, CopyArtifact), unpacks it (Unpack), and checks the
// folder's digest (CheckDigest) and its manifest against the summary
// the user consented to (CheckManifest).
//
// # Other ecosystems
//
// A Claude Code marketplace (kind "claude", package claude) is an
// unsigned source: Add refuses it unless the user trusts it explicitly
// (AddMarketplaceRequest.TrustUnsigned). A refresh reads it (a folder in
// place, unpinned; a git repository at its default branch's head, pinned
// to that commit) and lists its plugins as "claude.<name>.<plugin>",
// converting those in its own folders to learn their kinds, digest and
// permissions; a plugin in a git repository of its own is listed from
// its entry and fetched at the commit the entry pins only to preview or
// install it, and one that names no commit is refused. An install
// converts the plugin again from the marketplace at the commit the
// refresh read, names what Kiln does not run (MarketplacePreview.Skipped)
// and says what was and was not checked; the registry records the
// commit (Source.Commit), from which a lock file reproduces it.
//
// An MCP Registry server.json (MarketplaceInstallRequest.MCPRegistry: the
// document, or a server of a registry by name and version; package
// mcpregistry) is converted into an "mcp-servers" bundle whose package
// runs at the exact version it names (one at "latest" is refused) and
// installed through the same preview, consent and install.
//
// # Publishing
//
// Build makes the next index version of the folder that holds
// publish.json, reproducibly; Rotate adds a key rotation; Handler serves
// a published folder with the right caching; Mirror makes a verified
// offline copy that clients verify exactly as the original.
package marketplace
