// Package mcpregistry reads MCP Registry server descriptions (server.json)
// and turns them into Kiln data-only bundles.
//
// Parse reads a server.json: a server's reverse-DNS name, description and
// version, its packages (npm, PyPI, OCI, NuGet or MCPB, each with a
// transport and the arguments and variables it takes) and its remotes
// (servers running at a URL). Convert writes an "mcp-servers" bundle that
// runs one of them with its version pinned (npx -y pkg@1.2.3, uvx
// pkg==1.2.3, docker run image:1.2.3, dnx Pkg@1.2.3) or connects to the
// remote; "latest", a missing version and a version range are refused,
// and an MCPB file is downloaded and checked against its fileSha256.
// Client searches a registry (the official one or a mirror) and gets a
// server's version from it through the registry's v0.1 API.
//
// Nothing a registry serves is signed (Unsigned): a client trusts the
// registry it reads from, and the pins and sums a server.json names.
package mcpregistry
