// Package web serves Kiln's HTTP API: a JSON API under /api/v1 over the
// core.Service, Server-Sent Event streams of the durable event log,
// /healthz, and the web UI embedded from web/ui/dist at / and /{asset}.
// The routes are described by specs/openapi.yaml; a test keeps the router
// and the spec in step.
//
// # Wire format
//
// Request and response bodies are JSON (application/json); the domain types
// of package core, with their JSON tags, are the wire format. Request bodies
// are decoded strictly: at most 1 MiB, exactly one JSON object, no unknown
// fields. Every error is
//
//	{"error": {"code": "...", "message": "..."}}
//
// with one HTTP status per code (see statusOf): the core codes (invalid,
// not_found, conflict, forbidden, limit, unavailable, internal) plus the
// web-level codes unauthorized, too_large, invalid_json,
// unsupported_media_type and method_not_allowed. An unknown route is
// not_found. Internal errors are logged and shown to clients only as
// "internal error".
//
// # Security
//
// New installs, outermost first: security headers, panic recovery, request
// logging (debug level, never the Authorization header), the Host check
// against DNS rebinding (loopback servers only), the Origin check with CORS
// for allowed origins, and bearer-token authentication for /api when a
// token is configured. The token is compared in constant time on SHA-256
// digests, so neither its content nor its length leaks through timing.
//
// Every response is nosniff, no-referrer and carries a
// Content-Security-Policy: default-src 'none' for the API, and for the UI
// files (which need no token: the page asks for it) a policy that allows
// the page's own origin only (see uiCSP). UI files are served from memory
// with a content-hash ETag, Cache-Control: no-cache and, when the client
// accepts it, gzipped (compressed once, when the first server starts).
//
// # Event streams
//
// GET /api/v1/events and GET /api/v1/threads/{id}/events stream events as
// text/event-stream. Durable events carry their Seq as the SSE id, so a
// client resumes with Last-Event-ID (or ?since=) and receives every later
// event exactly once, in Seq order, across server restarts. See
// streamEvents for the algorithm.
package web
