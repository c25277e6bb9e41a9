// Package claude reads Claude Code plugin marketplaces and turns their
// plugins into Kiln data-only bundles.
//
// A Claude Code marketplace is a folder (usually a git repository) with
// .claude-plugin/marketplace.json: its name, its owner and its plugins,
// each with a source (a folder of the marketplace, a GitHub repository,
// a git URL, a folder of a git repository) and, for a git source, the
// commit it is pinned to. A plugin is a folder with an optional
// .claude-plugin/plugin.json and its parts in a standard layout: skills/
// (SKILL.md folders), .mcp.json (MCP servers), hooks/, commands/,
// agents/, output-styles/, .lsp.json, bin/ and more.
//
// ParseMarketplace and ParsePluginManifest read the two files;
// LoadMarketplace reads a marketplace from a folder or a file:// URL, and
// Fetcher.LoadGit from a clone of its git repository.
// A Fetcher brings a plugin's folder onto the machine: from the
// marketplace's folder, or by cloning its git repository at the pinned
// commit (a source that names no commit is refused unless the caller
// allows it, because only a commit pin makes an install reproducible).
// Convert turns the folder into a Kiln bundle: its skills into a
// "skills" bundle, its MCP servers into an "mcp-servers" bundle, with
// the permissions they need; what Kiln does not run is named in
// Result.Skipped. CheckPinned holds the packages an MCP server's command
// fetches when it starts (npx, uvx, docker ...) to exact versions, so
// that the pins cover what runs.
//
// Nothing in a Claude Code marketplace is signed (Unsigned): a client
// adds one only when its user trusts it explicitly.
package claude
