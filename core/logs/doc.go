// Package logs is Kiln's server log: structured log/slog records that pass
// the redactor before they are written anywhere, in rotated files that can
// be queried and followed. kiln serve opens it; the logs API (web) and
// Kiln's MCP server read it. It sits beside core, not in it: core logs to
// the *slog.Logger it is given and never imports this package.
package logs
