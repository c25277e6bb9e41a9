package core

import (
	"time"
)

// Trigger kinds.
const (
	TriggerCron    = "cron"
	TriggerWebhook = "webhook"
)

// Overlap policies: what a cron occurrence does while the trigger's
// previous run is still active (running or waiting for a decision).
const (
	OverlapSkip           = "skip"            // record the occurrence as skipped (the default)
	OverlapBufferOne      = "buffer_one"      // keep one occurrence, started when the previous run ends
	OverlapCancelPrevious = "cancel_previous" // cancel the previous run, start this one
	OverlapAllowAll       = "allow_all"       // start it anyway
)

// Catch-up policies: what happens to the slots a cron trigger missed
// while Kiln was not running (or the machine slept).
const (
	CatchupSkip   = "skip"   // fire none of them
	CatchupLatest = "latest" // fire the most recent one inside the window (the default)
	CatchupAll    = "all"    // fire every one inside the window, oldest first
)

// Unattended policies: what a trigger's run does with a tool call that
// needs approval, nobody being there to give it.
const (
	UnattendedPause  = "pause"  // hold it as an Action item (the default)
	UnattendedReject = "reject" // reject it automatically; the run goes on
	UnattendedAllow  = "allow"  // run the tools in Unattended.Allow without approval; hold the others
)

// Occurrence statuses.
const (
	OccurrenceStarted  = "started"  // a run was started (RunID)
	OccurrenceBuffered = "buffered" // waiting for the previous run to end (overlap buffer_one)
	OccurrenceSkipped  = "skipped"  // not started; Reason says why
	OccurrenceFailed   = "failed"   // the run could not be started; Reason says why
)

// Occurrence causes.
const (
	CauseSchedule = "schedule" // a cron slot, on time
	CauseCatchup  = "catchup"  // a cron slot missed while Kiln was down, fired late
	CauseWebhook  = "webhook"  // a webhook delivery
	CauseManual   = "manual"   // fired by hand (kiln triggers run)
)

// Occurrence outcomes, derived from the status and the run's state.
const (
	OutcomeRunning   = "running"
	OutcomeAction    = "waiting_for_action" // the run waits for a decision: not a failure
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
	OutcomeCancelled = "cancelled"
	OutcomeQueued    = "queued"
	OutcomeBuffered  = "buffered"
	OutcomeSkipped   = "skipped"
)

// Defaults and limits of triggers.
const (
	DefaultCatchupWindow = time.Hour
	MaxCatchupWindow     = 7 * 24 * time.Hour
	// MaxCatchupFires bounds how many missed slots catchup "all" fires
	// for one trigger after one outage.
	MaxCatchupFires = 100
	// MinSecretLen is the shortest webhook secret accepted.
	MinSecretLen = 32
	// MaxPromptLen bounds a trigger's prompt template, in bytes;
	// MaxPayloadLen a webhook's body; MaxRenderedLen the filled prompt.
	MaxPromptLen   = 32 << 10
	MaxPayloadLen  = 256 << 10
	MaxRenderedLen = MaxInputLen
	// DefaultRateLimit is how many webhook deliveries a trigger accepts
	// per minute when it sets no limit.
	DefaultRateLimit = 60
	// SignatureTolerance is how far a signed X-Kiln-Timestamp may be from
	// the server's clock.
	SignatureTolerance = 5 * time.Minute
)

// Unattended says what a trigger's runs do with tool calls that need
// approval. Mode "" means UnattendedPause.
type Unattended struct {
	Mode  string   `json:"mode"`
	Allow []string `json:"allow,omitempty"`
}

// Trigger starts runs: a cron trigger on a schedule, a webhook trigger
// when a signed or authenticated request arrives. Each start is recorded
// as an Occurrence.
type Trigger struct {
	ID      string `json:"id"`
	OwnerID string `json:"owner_id"`
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	// Cron is the schedule of a cron trigger (5 fields, 6 with seconds,
	// or a descriptor such as @hourly or @every 15m), read in Timezone (an
	// IANA name; "" is UTC).
	Cron     string `json:"cron,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	// Prompt is the run's input: a text/template filled with the webhook's
	// JSON payload (a cron trigger's has none).
	Prompt  string `json:"prompt"`
	Model   string `json:"model,omitempty"`
	Enabled bool   `json:"enabled"`
	// ThreadID is the thread every run goes to; "" starts a new thread
	// for each occurrence.
	ThreadID      string        `json:"thread_id,omitempty"`
	Overlap       string        `json:"overlap,omitempty"`
	Catchup       string        `json:"catchup,omitempty"`
	CatchupWindow time.Duration `json:"catchup_window,omitempty"`
	Unattended    Unattended    `json:"unattended"`
	// RateLimit is how many webhook deliveries it accepts per minute.
	RateLimit int `json:"rate_limit,omitempty"`
	// SecretHash is the SHA-256 of the webhook secret and SecretSealed
	// the secret sealed with the server's trigger key (for HMAC
	// signatures); neither ever leaves the server.
	SecretHash   []byte `json:"-"`
	SecretSealed []byte `json:"-"`
	// Bucket is the webhook rate limiter: a token bucket refilled at
	// RateLimit tokens a minute, holding at most RateLimit. It is kept
	// with the trigger and taken from in each delivery's transaction, so
	// every replica takes from the one bucket; nil before the first
	// delivery. The API does not show it (TriggerView).
	Bucket *RateBucket `json:"rate_bucket,omitempty"`
	// LastSlot is the latest cron slot the scheduler has dealt with
	// (fired, buffered or skipped); nil before the first. The next slots
	// are those after it.
	LastSlot  *time.Time `json:"last_slot,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
}

// RateBucket is a webhook trigger's token bucket as of At.
type RateBucket struct {
	Tokens float64   `json:"tokens"`
	At     time.Time `json:"at"`
}

// take refills b to now for rate tokens a minute and takes one, unless
// fewer than one is left; false then.
func (b *RateBucket) take(rate int, now time.Time) bool {
	r := float64(rate)
	if b.At.IsZero() {
		b.Tokens, b.At = r, now
	}
	b.Tokens = min(r, b.Tokens+max(0, now.Sub(b.At).Minutes())*r)
	b.At = now
	if b.Tokens < 1 {
		return false
	}
	b.Tokens--
	return true
}

// Occurrence is one fire of a trigger, recorded once: Key is unique per
// trigger (the slot's time for a cron slot, the delivery ID for a
// webhook delivery), so a slot or a delivery never starts two runs.
type Occurrence struct {
	ID          string    `json:"id"`
	TriggerID   string    `json:"trigger_id"`
	OwnerID     string    `json:"owner_id"`
	Key         string    `json:"key"`
	Cause       string    `json:"cause"`
	ScheduledAt time.Time `json:"scheduled_at"`
	Status      string    `json:"status"`
	Reason      string    `json:"reason,omitempty"`
	RunID       string    `json:"run_id,omitempty"`
	ThreadID    string    `json:"thread_id,omitempty"`
	// Input is the run's input (the filled prompt), kept for a buffered
	// occurrence until its run starts.
	Input     string    `json:"input,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// RunStatus and Outcome are filled in when listed: the run's state,
	// and what the occurrence came to (an Outcome* constant).
	RunStatus RunStatus `json:"run_status,omitempty"`
	Outcome   string    `json:"outcome,omitempty"`
}

// TriggerQuery filters Triggers. Empty fields match everything; OwnerID
// "" lists every owner's (the scheduler).
type TriggerQuery struct {
	OwnerID string
	Kind    string
	Enabled *bool
}

// OccurrenceQuery filters Occurrences, newest first (by ScheduledAt, then
// ID). TriggerID or Status is required; Limit <= 0 means 50, at most 500.
type OccurrenceQuery struct {
	TriggerID string
	Status    string
	Before    *time.Time
	Limit     int
}

// TriggerReadTx reads the triggers-and-occurrences part of the Store,
// which the Scheduler and the Service's trigger commands (triggers.go)
// own.
type TriggerReadTx interface {
	// Trigger returns a trigger (ENOTFOUND when there is none); Triggers
	// lists those matching q, oldest first (by CreatedAt, then ID).
	Trigger(id string) (*Trigger, error)
	Triggers(q TriggerQuery) ([]*Trigger, error)
	// Occurrence returns an occurrence (ENOTFOUND when there is none);
	// Occurrences lists those matching q as OccurrenceQuery says, without
	// RunStatus and Outcome.
	Occurrence(id string) (*Occurrence, error)
	Occurrences(q OccurrenceQuery) ([]*Occurrence, error)
}

// TriggerTx writes the triggers-and-occurrences part.
type TriggerTx interface {
	TriggerReadTx

	// PutTrigger inserts or replaces a trigger; DeleteTrigger removes one
	// with its occurrences (ENOTFOUND when there is none).
	PutTrigger(tr *Trigger) error
	DeleteTrigger(id string) error
	// PutOccurrence inserts or replaces an occurrence by ID. Another
	// occurrence of the same trigger with the same Key is ECONFLICT: a
	// slot or a delivery is recorded once. ENOTFOUND for an unknown
	// trigger.
	PutOccurrence(o *Occurrence) error
}

// Schedule is a parsed cron expression: Next returns the first fire time
// strictly after t, or the zero time when there is none.
type Schedule interface {
	Next(t time.Time) time.Time
}

// ScheduleParser parses a trigger's cron expression in an IANA time zone
// ("" is UTC). It returns an *Error with EINVALID and the reason for a
// bad expression or zone. Kiln's lives in plugins/builtin/cron, outside
// core, and is injected through Config.Schedules.
type ScheduleParser func(expr, timezone string) (Schedule, error)
