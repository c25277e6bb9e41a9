// Package logs is Kiln's server log: structured log/slog records that pass
// the redactor before they are written anywhere.
package logs
