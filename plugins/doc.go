// Package plugins is Kiln's extension host: the plugin manifest, the
// permission model and consent (consent.go), and the contracts between the
// host's parts (host.go). Kinds (a Kind, registered with RegisterKind)
// connect what a plugin provides to the server; runtimes (a Loader per
// runtime, registered with RegisterRuntime) start plugins and hand out one
// client per kind (Instance.Dispense). Both register from init and panic
// on a duplicate name; the kiln binary links its own from
// cmd/kiln/imports.go. What a plugin may call back into (its logger, its
// key/value namespace, progress events) is Callbacks, the same for every
// runtime.
//
// This package holds two runtimes: "builtin", which starts the plugins
// shipped inside the kiln binary (Builtin) in-process, and "data", which
// opens a data-only bundle's folder (Bundle) and runs nothing. It imports
// no transport; the other runtimes (plugins/wasm on wazero, plugins/process
// on go-plugin) and the kinds (plugins/toolset, plugins/providers/modelprovider,
// plugins/skillbundle, plugins/mcp/mcpservers) live in subpackages,
// plugins/integrity checks a plugin's bytes, and plugins/registry puts
// them together. The types the API and the SDK share are in
// plugins/pluginapi. Kiln's own tools and models are in plugins/builtin.
//
// # The manifest
//
// A plugin is a folder with a manifest, kiln-plugin.json, described by
// specs/kiln-plugin.schema.json (JSON Schema draft 2020-12). LoadManifest
// reads one from a folder and ParseManifest parses bytes; both return the
// *Manifest or a *ManifestError listing every problem, each with the path
// of the field and the reason:
//
//	invalid plugin manifest (2 problems):
//	  version: "1.2" is not semver (want MAJOR.MINOR.PATCH)
//	  permissions.network[2]: "http://x.com" must be host[:port] without a scheme
//
// Decoding is strict: unknown fields (at any depth), duplicate keys, null
// values and trailing data are errors. The fields:
//
//	$schema         optional string, for editors; ignored
//	apiVersion      "kiln.dev/v1" (APIVersion); any other version is refused
//	                and then nothing else is checked
//	id              lowercase letters, digits, "." and "-", starting with a
//	                letter, no empty dot-separated segment, at most 64
//	                characters: "weather", "acme.docker-sandbox"
//	version         SemVer 2.0.0 without a leading "v" ("1.2.0-rc.1+abc")
//	description     1 to 300 characters on one line, without control or
//	                bidirectional formatting characters (it is shown in the
//	                consent prompt)
//	provides        a non-empty set of "model-provider", "toolset",
//	                "sandbox-runtime", "skills", "mcp-servers" or a kind
//	                registered with RegisterKind; installing needs a kind
//	                this binary registers
//	runtime         "wasm" or "process"
//	entry           the file to load, relative to the plugin folder: clean,
//	                forward slashes, no "." or ".." segments
//	sha256          the entry file's SHA-256, 64 lowercase hex digits;
//	                plugins/integrity checks it
//	permissions     see below; may be left out (it then grants nothing but
//	                the default limits)
//	interruptOn     a core.Policy for the plugin's own tools: tool name or
//	                glob to true, false or {"allowed_decisions": [...]};
//	                checked with Policy.Validate
//	settingsSchema  optional JSON Schema (draft 2020-12 unless it says
//	                otherwise) for the plugin's settings: an object with
//	                "type" or "properties" that compiles; it may refer to
//	                itself and to the standard meta-schemas, never to a file
//	                or URL
//
// runtime, entry and sha256 come together. A manifest with none of them is
// a data-only bundle: it provides only "skills" and/or "mcp-servers", its
// folder is its content, and plugins/integrity covers the whole folder
// with one digest. ParseBuiltinManifest reads the manifests of the plugins
// built into kiln, whose runtime is "builtin" and which have no entry.
//
// The JSON Schema and ParseManifest agree on every rule the schema
// language can express (the shared regular expressions are kept equal by a
// test). ParseManifest is stricter in a few places the schema cannot
// reach: duplicate keys, the canonical form of IPv6 addresses, a
// filesystem path granted twice, malformed interruptOn globs and settings
// schemas that do not compile. testdata/manifests/goonly lists them.
//
// # Permissions
//
// Permissions are data: the manifest declares them, the user consents to
// them at install (the prompt is Consent.Lines, worded from them), the
// registry stores the Consent itself, the permission set, and the host
// asks the Permissions value before it does anything on a plugin's behalf.
// A new version asks again only for what Consent.Added finds beyond the
// consent given; rewording the prompt changes no consent. The zero value
// grants nothing.
//
//	network     host[:port] patterns. "api.example.com" is that name only;
//	            "*.example.com" is every subdomain at any depth but not
//	            example.com itself, and needs two labels after "*.".
//	            A pattern without a port allows ports 80 and 443 only.
//	            Patterns are lowercase, without scheme or path. IP literals
//	            are allowed ("203.0.113.7:8080", "[::1]:8080"); a name
//	            pattern never matches an IP, and a name that resolves to a
//	            loopback, private or other non-public address is refused
//	            unless that address is listed itself (AllowsResolvedAddr).
//	            Check with AllowsHost, then AllowsResolvedAddr per address.
//	filesystem  {path, read, write}; path is "grant:<name>[/sub/path]"
//	            (inside the user's folder grant named <name>, which the
//	            host looks up at each access with a GrantResolver: reading
//	            needs the grant, writing a writable one; Grants lists the
//	            names) or "data:/[sub/path]" (the plugin's own data
//	            folder). Never a host path. Check with FilesystemAccess.
//	env         environment variable names ([A-Z_][A-Z0-9_]*, never KILN_*).
//	            Check with AllowsEnv.
//	exec        may run other programs; runtime "process" and data-only
//	            bundles (MCP servers that run a command) only.
//	memory_mib  linear memory cap, 1..4096, default 64; runtime "wasm" only.
//	            It holds for the plugin as a whole: all its instances
//	            together (plugins/wasm runs up to 4).
//	timeout_ms  deadline of each call into the plugin, 1..600000, default
//	            30000.
//
// A wasm plugin is confined by construction: the guest reaches the world
// only through host functions, and each of them checks these permissions.
//
// A process plugin is an ordinary program running with the server's user
// account. Its permissions are declared and consented to, and the host
// applies what it controls from outside — the environment is scrubbed to
// the declared variables, each call has the deadline — but the host cannot
// enforce network, filesystem or exec permissions inside the process. A
// process plugin can do whatever the server's user can; the consent prompt
// says so on its first line (Consent.Lines), and installing one is
// trusting its author.
//
// A data-only bundle runs nothing: its permissions describe what its
// content (the MCP servers it defines) is to be given when it is used.
package plugins
