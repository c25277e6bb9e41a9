package core

import (
	"encoding/json"
	"time"
)

// Sandbox is the record of a sandbox Kiln runs for an owner: what was
// asked, which runtime runs it with its handle, its state and when it
// expires. The sandbox service (sandbox/service) owns what the fields
// mean and every transition, and declares the Store methods that keep the
// records (service.RecordReader and RecordTx), which a Store's
// transactions implement beside core.ReadTx and core.Tx. The type stays in
// core so that a Store (core/sqlite) can implement them without importing
// the sandbox service; core keeps the record so that expiry and the
// runtime's handle survive a restart. It holds no secret: the
// environment's values reach the runtime and nothing else, and the
// sandbox's access token is derived, never stored.
type Sandbox struct {
	ID      string `json:"id"`
	OwnerID string `json:"owner_id"`
	// Runtime names the runtime that runs it (its plugin's ID); Pool is
	// the warm pool it was claimed from, or "".
	Runtime string `json:"runtime"`
	Pool    string `json:"pool,omitempty"`
	// Replica names the server whose runtime holds it (its replica-id),
	// when several share one database: the others send its requests
	// there, and mark it lost when that server is gone. "" is this
	// server's on a single one.
	Replica string `json:"replica,omitempty"`
	// Request is the create request as accepted, without env values.
	Request json.RawMessage `json:"request,omitempty"`
	// Metadata is the user's key/value metadata.
	Metadata map[string]string `json:"metadata,omitempty"`
	// State is the sandbox's state in the sandbox API's terms, with the
	// reason and message of its last transition.
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Handle is the runtime's opaque handle, as JSON.
	Handle json.RawMessage `json:"handle,omitempty"`
	// ExpiresAt is when it is destroyed; nil means never (manual
	// cleanup).
	ExpiresAt    *time.Time `json:"expires_at,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	TransitionAt time.Time  `json:"transition_at"`
}

// SandboxQuery filters Sandboxes. Empty fields match everything; OwnerID
// "" lists every owner's (the sandbox service at start-up).
// ExpiresBefore keeps those whose ExpiresAt is set and before it.
type SandboxQuery struct {
	OwnerID       string
	States        []string
	Runtime       string
	Pool          *string
	ExpiresBefore *time.Time
}
