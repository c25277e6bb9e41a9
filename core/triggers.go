package core

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"time"
	"unicode/utf8"
)

// Trigger events.
const (
	EventTriggerCreated = "trigger.created"
	EventTriggerUpdated = "trigger.updated"
	EventTriggerDeleted = "trigger.deleted"
	EventTriggerFired   = "trigger.fired" // an occurrence was recorded (started, buffered, skipped or failed)
)

// TriggerInput creates a trigger. Enabled nil means true; CatchupWindow
// is a Go duration ("1h", "90m"); Secret "" has Kiln make one (webhook).
type TriggerInput struct {
	Name          string      `json:"name"`
	Kind          string      `json:"kind"`
	Cron          string      `json:"cron"`
	Timezone      string      `json:"timezone"`
	Prompt        string      `json:"prompt"`
	Model         string      `json:"model"`
	Enabled       *bool       `json:"enabled"`
	ThreadID      string      `json:"thread_id"`
	Secret        string      `json:"secret"`
	Overlap       string      `json:"overlap"`
	Catchup       string      `json:"catchup"`
	CatchupWindow string      `json:"catchup_window"`
	Unattended    *Unattended `json:"unattended"`
	RateLimit     int         `json:"rate_limit"`
}

// TriggerPatch changes a trigger; nil fields stay as they are. The kind
// cannot change. A Secret replaces the webhook secret with the one given.
type TriggerPatch struct {
	Name          *string     `json:"name"`
	Cron          *string     `json:"cron"`
	Timezone      *string     `json:"timezone"`
	Prompt        *string     `json:"prompt"`
	Model         *string     `json:"model"`
	Enabled       *bool       `json:"enabled"`
	ThreadID      *string     `json:"thread_id"`
	Secret        *string     `json:"secret"`
	Overlap       *string     `json:"overlap"`
	Catchup       *string     `json:"catchup"`
	CatchupWindow *string     `json:"catchup_window"`
	Unattended    *Unattended `json:"unattended"`
	RateLimit     *int        `json:"rate_limit"`
}

// TriggerView is a trigger as the API shows it: with its next fire times
// (a cron trigger that is enabled) and, right after it was created or its
// secret rotated, the webhook secret, shown that once.
type TriggerView struct {
	*Trigger
	Next   []time.Time `json:"next,omitempty"`
	Secret string      `json:"secret,omitempty"`
	// Bucket hides the Trigger's own (always nil here: a field of the
	// same name nearer the top wins, and omitempty leaves it out).
	Bucket *RateBucket `json:"rate_bucket,omitempty"`
}

// triggerState is what the Service keeps in memory for triggers: parsed
// schedules.
type triggerState struct {
	mu     sync.Mutex
	scheds map[string]cachedSchedule
}

type cachedSchedule struct {
	expr, tz string
	s        Schedule
}

func (s *Service) triggers() *triggerState {
	s.trOnce.Do(func() {
		s.tr = &triggerState{scheds: map[string]cachedSchedule{}}
	})
	return s.tr
}

// schedule returns tr's parsed schedule, cached by expression and zone.
func (s *Service) schedule(tr *Trigger) (Schedule, error) {
	st := s.triggers()
	st.mu.Lock()
	c, ok := st.scheds[tr.ID]
	st.mu.Unlock()
	if ok && c.expr == tr.Cron && c.tz == tr.Timezone {
		return c.s, nil
	}
	sch, err := s.parseSchedule(tr.Cron, tr.Timezone)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	st.scheds[tr.ID] = cachedSchedule{tr.Cron, tr.Timezone, sch}
	st.mu.Unlock()
	return sch, nil
}

func (s *Service) parseSchedule(expr, tz string) (Schedule, error) {
	if s.cfg.Schedules == nil {
		return nil, Errorf(EINVALID, "cron triggers are not available: the server has no schedule parser")
	}
	return s.cfg.Schedules(expr, tz)
}

// checkTrigger validates tr in full (after a create or a patch).
func (s *Service) checkTrigger(tr *Trigger) error {
	var err error
	if tr.Name, err = cleanName("name", tr.Name, MaxTitleLen, false); err != nil {
		return err
	}
	switch tr.Kind {
	case TriggerCron:
		if _, err := s.parseSchedule(tr.Cron, tr.Timezone); err != nil {
			return err
		}
	case TriggerWebhook:
		if tr.Cron != "" || tr.Timezone != "" {
			return Errorf(EINVALID, "a webhook trigger has no cron or timezone")
		}
	default:
		return Errorf(EINVALID, "kind must be %q or %q", TriggerCron, TriggerWebhook)
	}
	if strings.TrimSpace(tr.Prompt) == "" {
		return Errorf(EINVALID, "prompt must not be empty")
	}
	if len(tr.Prompt) > MaxPromptLen {
		return Errorf(EINVALID, "prompt is %d bytes; the limit is %d", len(tr.Prompt), MaxPromptLen)
	}
	if err := CheckText("prompt", tr.Prompt, true); err != nil {
		return err
	}
	if _, err := promptTemplate(tr.Prompt); err != nil {
		return err
	}
	if tr.Model != "" {
		if _, err := s.models(tr.Model); err != nil {
			return err
		}
	}
	switch tr.Overlap {
	case "":
		tr.Overlap = OverlapSkip
	case OverlapSkip, OverlapBufferOne, OverlapCancelPrevious, OverlapAllowAll:
	default:
		return Errorf(EINVALID, "overlap must be one of skip, buffer_one, cancel_previous, allow_all")
	}
	switch tr.Catchup {
	case "":
		tr.Catchup = CatchupLatest
	case CatchupSkip, CatchupLatest, CatchupAll:
	default:
		return Errorf(EINVALID, "catchup must be one of skip, latest, all")
	}
	if tr.CatchupWindow == 0 {
		tr.CatchupWindow = DefaultCatchupWindow
	}
	if tr.CatchupWindow < time.Second || tr.CatchupWindow > MaxCatchupWindow {
		return Errorf(EINVALID, "catchup_window must be between 1s and %s", MaxCatchupWindow)
	}
	switch tr.Unattended.Mode {
	case "":
		tr.Unattended.Mode = UnattendedPause
		fallthrough
	case UnattendedPause, UnattendedReject:
		if len(tr.Unattended.Allow) > 0 {
			return Errorf(EINVALID, "unattended.allow needs mode %q", UnattendedAllow)
		}
	case UnattendedAllow:
		if len(tr.Unattended.Allow) == 0 {
			return Errorf(EINVALID, "unattended mode %q needs the tools to allow in unattended.allow", UnattendedAllow)
		}
		if err := tr.unattendedPolicy().Validate(); err != nil {
			return err
		}
	default:
		return Errorf(EINVALID, "unattended.mode must be one of pause, reject, allow")
	}
	if tr.RateLimit == 0 {
		tr.RateLimit = DefaultRateLimit
	}
	if tr.RateLimit < 1 || tr.RateLimit > 100000 {
		return Errorf(EINVALID, "rate_limit must be between 1 and 100000 per minute")
	}
	return nil
}

// unattendedPolicy is the interruptOn a trigger's runs add: the allowed
// tools never interrupt.
func (tr *Trigger) unattendedPolicy() Policy {
	if tr.Unattended.Mode != UnattendedAllow {
		return nil
	}
	p := Policy{}
	for _, name := range tr.Unattended.Allow {
		p[name] = Rule{}
	}
	return p
}

func promptTemplate(text string) (*template.Template, error) {
	t, err := template.New("prompt").Option("missingkey=zero").Parse(text)
	if err != nil {
		return nil, Errorf(EINVALID, "prompt is not a valid template: %s", strings.TrimPrefix(err.Error(), "template: "))
	}
	return t, nil
}

// renderPrompt fills the trigger's prompt with data (a webhook's payload,
// nil for a cron slot): EINVALID when it fails or grows past
// MaxRenderedLen.
func renderPrompt(tr *Trigger, data any) (string, error) {
	out := tr.Prompt
	// A prompt without an action is its own output (a cron trigger's
	// usually is): no template to parse for every fire.
	if strings.Contains(out, "{{") {
		t, err := promptTemplate(tr.Prompt)
		if err != nil {
			return "", err
		}
		var b limitedBuffer
		b.max = MaxRenderedLen
		if err := t.Execute(&b, data); err != nil {
			if b.over {
				return "", Errorf(EINVALID, "the filled prompt exceeds %d bytes", MaxRenderedLen)
			}
			return "", Errorf(EINVALID, "the prompt template failed on this payload: %s", strings.TrimPrefix(err.Error(), "template: "))
		}
		out = b.String()
	} else if len(out) > MaxRenderedLen {
		return "", Errorf(EINVALID, "the filled prompt exceeds %d bytes", MaxRenderedLen)
	}
	out = strings.TrimSpace(out)
	if out == "" {
		return "", Errorf(EINVALID, "the filled prompt is empty")
	}
	return out, nil
}

type limitedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		b.over = true
		return 0, fmt.Errorf("output too large")
	}
	return b.Buffer.Write(p)
}

// parseWindow reads a catch-up window: "" is 0 (the default).
func parseWindow(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, Errorf(EINVALID, "catchup_window must be a duration such as 1h or 30m, not %q", s)
	}
	return d, nil
}

// newSecret returns a random webhook secret.
func newSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("core: crypto/rand failed: " + err.Error())
	}
	return "whsec_" + hex.EncodeToString(b[:])
}

// setSecret stores secret on tr: its SHA-256, and the secret sealed
// (AES-256-GCM) with a key derived from the server's trigger key, for
// HMAC signatures. EINVALID for a short secret or without a trigger key.
func (s *Service) setSecret(tr *Trigger, secret string) error {
	if len(secret) < MinSecretLen {
		return Errorf(EINVALID, "secret must be at least %d characters", MinSecretLen)
	}
	if err := CheckText("secret", secret, false); err != nil {
		return err
	}
	aead, err := s.secretAEAD()
	if err != nil {
		return err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return fmt.Errorf("seal secret: %w", err)
	}
	sum := sha256.Sum256([]byte(secret))
	tr.SecretHash = sum[:]
	tr.SecretSealed = aead.Seal(nonce, nonce, []byte(secret), []byte(tr.ID))
	return nil
}

// openSecret returns tr's webhook secret.
func (s *Service) openSecret(tr *Trigger) ([]byte, error) {
	aead, err := s.secretAEAD()
	if err != nil {
		return nil, err
	}
	n := aead.NonceSize()
	if len(tr.SecretSealed) < n {
		return nil, Errorf(EINTERNAL, "trigger %q has no sealed secret", tr.ID)
	}
	secret, err := aead.Open(nil, tr.SecretSealed[:n], tr.SecretSealed[n:], []byte(tr.ID))
	if err != nil {
		return nil, fmt.Errorf("open the secret of trigger %q (was the trigger key replaced?): %w", tr.ID, err)
	}
	return secret, nil
}

func (s *Service) secretAEAD() (cipher.AEAD, error) {
	if len(s.cfg.TriggerKey) < 32 {
		return nil, Errorf(EINVALID, "webhook triggers are not available: the server has no trigger key")
	}
	mac := hmac.New(sha256.New, s.cfg.TriggerKey)
	mac.Write([]byte("kiln trigger secrets v1"))
	block, err := aes.NewCipher(mac.Sum(nil))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func ownTrigger(tx ReadTx, p Principal, id string) (*Trigger, error) {
	tr, err := tx.Trigger(id)
	if err != nil {
		return nil, err
	}
	if tr.OwnerID != p.ID {
		return nil, Errorf(ENOTFOUND, "trigger %q not found", id)
	}
	return tr, nil
}

// view returns tr as the API shows it, with up to n next fire times.
func (s *Service) triggerView(tr *Trigger, n int, secret string) *TriggerView {
	v := &TriggerView{Trigger: tr, Secret: secret}
	if tr.Kind == TriggerCron && tr.Enabled {
		v.Next, _ = s.nextFires(tr, n)
	}
	return v
}

// nextFires returns tr's next n fire times after now (or its last slot,
// when that is later).
func (s *Service) nextFires(tr *Trigger, n int) ([]time.Time, error) {
	sch, err := s.schedule(tr)
	if err != nil {
		return nil, err
	}
	at := s.now()
	if tr.LastSlot != nil && tr.LastSlot.After(at) {
		at = *tr.LastSlot
	}
	out := []time.Time{}
	for range n {
		at = sch.Next(at)
		if at.IsZero() {
			break
		}
		out = append(out, at)
	}
	return out, nil
}

// CreateTrigger creates a trigger owned by p. A webhook trigger gets the
// secret given, or a new one, returned in the view this once. EINVALID
// for a bad field (a bad cron expression or time zone with the reason),
// ENOTFOUND for an unknown thread_id; nothing is stored then.
func (s *Service) CreateTrigger(ctx context.Context, p Principal, in TriggerInput) (*TriggerView, error) {
	now := s.now()
	win, err := parseWindow(in.CatchupWindow)
	if err != nil {
		return nil, err
	}
	tr := &Trigger{
		ID: NewID("trg", now), OwnerID: p.ID, Name: in.Name, Kind: in.Kind, Cron: strings.TrimSpace(in.Cron), Timezone: in.Timezone,
		Prompt: in.Prompt, Model: in.Model, Enabled: in.Enabled == nil || *in.Enabled, ThreadID: in.ThreadID,
		Overlap: in.Overlap, Catchup: in.Catchup, CatchupWindow: win, RateLimit: in.RateLimit, CreatedAt: now, UpdatedAt: now,
	}
	if in.Unattended != nil {
		tr.Unattended = *in.Unattended
	}
	if err := s.checkTrigger(tr); err != nil {
		return nil, err
	}
	secret := ""
	if tr.Kind == TriggerWebhook {
		secret = in.Secret
		if secret == "" {
			secret = newSecret()
		}
		if err := s.setSecret(tr, secret); err != nil {
			return nil, err
		}
	} else if in.Secret != "" {
		return nil, Errorf(EINVALID, "a cron trigger has no secret")
	}
	// A new trigger's first slot is its schedule's first after now.
	tr.LastSlot = &now
	err = s.update(ctx, func(tx Tx) error {
		if tr.ThreadID != "" {
			if _, err := ownThread(tx, p, tr.ThreadID); err != nil {
				return err
			}
		}
		if err := tx.PutTrigger(tr); err != nil {
			return err
		}
		return emit(tx, p.ID, "", "", EventTriggerCreated, &TriggerView{Trigger: tr})
	})
	if err != nil {
		return nil, err
	}
	return s.triggerView(tr, 5, secret), nil
}

// ListTriggers lists p's triggers, oldest first, each with its next fire
// time.
func (s *Service) ListTriggers(ctx context.Context, p Principal) ([]*TriggerView, error) {
	var trs []*Trigger
	err := s.view(ctx, func(tx ReadTx) (err error) {
		trs, err = tx.Triggers(TriggerQuery{OwnerID: p.ID})
		return err
	})
	out := make([]*TriggerView, 0, len(trs))
	for _, tr := range trs {
		out = append(out, s.triggerView(tr, 1, ""))
	}
	return out, err
}

// GetTrigger returns one of p's triggers with its next five fire times.
func (s *Service) GetTrigger(ctx context.Context, p Principal, id string) (*TriggerView, error) {
	var tr *Trigger
	err := s.view(ctx, func(tx ReadTx) (err error) {
		tr, err = ownTrigger(tx, p, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.triggerView(tr, 5, ""), nil
}

// PreviewTrigger returns the next n (1..100) fire times of one of p's
// cron triggers, whether it is enabled or not. EINVALID for a webhook
// trigger.
func (s *Service) PreviewTrigger(ctx context.Context, p Principal, id string, n int) ([]time.Time, error) {
	if n < 1 || n > 100 {
		return nil, Errorf(EINVALID, "n must be between 1 and 100")
	}
	var tr *Trigger
	err := s.view(ctx, func(tx ReadTx) (err error) {
		tr, err = ownTrigger(tx, p, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	if tr.Kind != TriggerCron {
		return nil, Errorf(EINVALID, "trigger %q is a webhook trigger; it has no schedule", id)
	}
	return s.nextFires(tr, n)
}

// PreviewSchedule returns the next n (1..100) fire times of an
// expression in a zone, after now: EINVALID with the reason for a bad one.
func (s *Service) PreviewSchedule(expr, tz string, n int) ([]time.Time, error) {
	if n < 1 || n > 100 {
		return nil, Errorf(EINVALID, "n must be between 1 and 100")
	}
	sch, err := s.parseSchedule(expr, tz)
	if err != nil {
		return nil, err
	}
	out := []time.Time{}
	at := s.now()
	for range n {
		if at = sch.Next(at); at.IsZero() {
			break
		}
		out = append(out, at)
	}
	return out, nil
}

// UpdateTrigger applies a patch. Enabling a disabled cron trigger starts
// its schedule from now: the slots it missed while disabled are not
// caught up. EINVALID for a bad field, with nothing changed.
func (s *Service) UpdateTrigger(ctx context.Context, p Principal, id string, patch TriggerPatch) (*TriggerView, error) {
	var tr *Trigger
	err := s.update(ctx, func(tx Tx) (err error) {
		if tr, err = ownTrigger(tx, p, id); err != nil {
			return err
		}
		wasEnabled := tr.Enabled
		set := func(dst *string, src *string) {
			if src != nil {
				*dst = *src
			}
		}
		set(&tr.Name, patch.Name)
		set(&tr.Cron, patch.Cron)
		set(&tr.Timezone, patch.Timezone)
		set(&tr.Prompt, patch.Prompt)
		set(&tr.Model, patch.Model)
		set(&tr.ThreadID, patch.ThreadID)
		set(&tr.Overlap, patch.Overlap)
		set(&tr.Catchup, patch.Catchup)
		tr.Cron = strings.TrimSpace(tr.Cron)
		if patch.Enabled != nil {
			tr.Enabled = *patch.Enabled
		}
		if patch.CatchupWindow != nil {
			if tr.CatchupWindow, err = parseWindow(*patch.CatchupWindow); err != nil {
				return err
			}
		}
		if patch.Unattended != nil {
			tr.Unattended = *patch.Unattended
		}
		if patch.RateLimit != nil {
			tr.RateLimit = *patch.RateLimit
		}
		if err := s.checkTrigger(tr); err != nil {
			return err
		}
		if patch.ThreadID != nil && tr.ThreadID != "" {
			if _, err := ownThread(tx, p, tr.ThreadID); err != nil {
				return err
			}
		}
		if patch.Secret != nil {
			if tr.Kind != TriggerWebhook {
				return Errorf(EINVALID, "a cron trigger has no secret")
			}
			if err := s.setSecret(tr, *patch.Secret); err != nil {
				return err
			}
		}
		now := s.now()
		if tr.Enabled && !wasEnabled || patch.Cron != nil || patch.Timezone != nil {
			tr.LastSlot = &now
		}
		tr.UpdatedAt = now
		if err := tx.PutTrigger(tr); err != nil {
			return err
		}
		return emit(tx, p.ID, "", "", EventTriggerUpdated, &TriggerView{Trigger: tr})
	})
	if err != nil {
		return nil, err
	}
	return s.triggerView(tr, 5, ""), nil
}

// RotateSecret gives one of p's webhook triggers a new secret and returns
// it in the view, this once; the old one stops working at once.
func (s *Service) RotateSecret(ctx context.Context, p Principal, id string) (*TriggerView, error) {
	secret := newSecret()
	var tr *Trigger
	err := s.update(ctx, func(tx Tx) (err error) {
		if tr, err = ownTrigger(tx, p, id); err != nil {
			return err
		}
		if tr.Kind != TriggerWebhook {
			return Errorf(EINVALID, "trigger %q is a cron trigger; it has no secret", id)
		}
		if err := s.setSecret(tr, secret); err != nil {
			return err
		}
		tr.UpdatedAt = s.now()
		if err := tx.PutTrigger(tr); err != nil {
			return err
		}
		return emit(tx, p.ID, "", "", EventTriggerUpdated, &TriggerView{Trigger: tr})
	})
	if err != nil {
		return nil, err
	}
	return s.triggerView(tr, 0, secret), nil
}

// DeleteTrigger deletes one of p's triggers and its history; the runs it
// started stay.
func (s *Service) DeleteTrigger(ctx context.Context, p Principal, id string) error {
	err := s.update(ctx, func(tx Tx) error {
		if _, err := ownTrigger(tx, p, id); err != nil {
			return err
		}
		if err := tx.DeleteTrigger(id); err != nil {
			return err
		}
		return emit(tx, p.ID, "", "", EventTriggerDeleted, map[string]string{"id": id})
	})
	if err == nil {
		st := s.triggers()
		st.mu.Lock()
		delete(st.scheds, id)
		st.mu.Unlock()
	}
	return err
}

// OccurrencePage is one page of a trigger's history, newest first.
type OccurrencePage struct {
	Occurrences []*Occurrence `json:"occurrences"`
	// NextBefore continues the list (as before=) when the page was full.
	NextBefore *time.Time `json:"next_before,omitempty"`
}

// ListOccurrences lists the history of one of p's triggers, newest first,
// each occurrence with its run's state and its outcome: an occurrence
// whose run waits for a decision is waiting_for_action, not failed.
func (s *Service) ListOccurrences(ctx context.Context, p Principal, id string, limit int, before *time.Time) (OccurrencePage, error) {
	var page OccurrencePage
	err := s.view(ctx, func(tx ReadTx) error {
		if _, err := ownTrigger(tx, p, id); err != nil {
			return err
		}
		occs, err := tx.Occurrences(OccurrenceQuery{TriggerID: id, Limit: limit, Before: before})
		if err != nil {
			return err
		}
		for _, o := range occs {
			if err := fillOutcome(tx, o); err != nil {
				return err
			}
		}
		page.Occurrences = occs
		if n := len(occs); n > 0 && n == min(max(limit, 1), 500) && limit > 0 {
			page.NextBefore = &occs[n-1].ScheduledAt
		}
		return nil
	})
	return page, err
}

// fillOutcome sets o's RunStatus and Outcome.
func fillOutcome(tx ReadTx, o *Occurrence) error {
	switch o.Status {
	case OccurrenceBuffered:
		o.Outcome = OutcomeBuffered
	case OccurrenceSkipped:
		o.Outcome = OutcomeSkipped
	case OccurrenceFailed:
		o.Outcome = OutcomeFailed
	case OccurrenceStarted:
		r, err := tx.Run(o.RunID)
		if IsNotFound(err) {
			o.Outcome = OutcomeCancelled // its thread was deleted
			return nil
		}
		if err != nil {
			return err
		}
		o.RunStatus = r.Status
		switch r.Status {
		case RunQueued:
			o.Outcome = OutcomeQueued
		case RunRunning:
			o.Outcome = OutcomeRunning
		case RunInterrupted:
			o.Outcome = OutcomeAction
		case RunSucceeded:
			o.Outcome = OutcomeSucceeded
		case RunFailed:
			o.Outcome = OutcomeFailed
		case RunCancelled:
			o.Outcome = OutcomeCancelled
		}
	}
	return nil
}

// FireTrigger fires one of p's triggers now, by hand, whatever its
// schedule and whether it is enabled; the overlap policy applies.
func (s *Service) FireTrigger(ctx context.Context, p Principal, id string) (*Occurrence, error) {
	var tr *Trigger
	err := s.view(ctx, func(tx ReadTx) (err error) {
		tr, err = ownTrigger(tx, p, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	input, err := renderPrompt(tr, nil)
	if err != nil {
		return nil, err
	}
	now := s.now()
	occ := &Occurrence{ID: NewID("occ", now), Cause: CauseManual, ScheduledAt: now, Input: input}
	occ.Key = "manual:" + occ.ID
	return s.fire(ctx, tr, occ, nil, true)
}

// Delivery is a webhook request as the core sees it: the raw body and
// the authentication headers.
type Delivery struct {
	Body []byte
	// Token is the bearer token or X-Kiln-Token header. Signatures maps
	// each signature header sent (X-Kiln-Signature, X-Hub-Signature-256)
	// to its "sha256=<hex>" HMAC of the body, or of "<Timestamp>.<body>"
	// when Timestamp, unix seconds, is given. Every credential sent must
	// verify: one right signature does not excuse a wrong one.
	Token      string
	Signatures map[string]string
	Timestamp  string
	DeliveryID string
}

// Deliver authenticates a webhook delivery and fires the trigger with
// the payload. ENOTFOUND for no such webhook trigger, EUNAUTHORIZED for
// a missing or wrong secret or signature or a stale timestamp, ECONFLICT
// for a disabled trigger or a delivery ID seen before, ELIMIT past the
// trigger's rate limit, EINVALID for a body that is not UTF-8 JSON or a
// prompt that cannot be filled; nothing is started in all those cases.
func (s *Service) Deliver(ctx context.Context, triggerID string, d Delivery) (*Occurrence, error) {
	var tr *Trigger
	err := s.view(ctx, func(tx ReadTx) (err error) {
		tr, err = tx.Trigger(triggerID)
		return err
	})
	if err == nil && tr.Kind != TriggerWebhook {
		err = Errorf(ENOTFOUND, "trigger %q not found", triggerID)
	}
	if err != nil {
		return nil, err
	}
	if err := s.authenticate(tr, d); err != nil {
		return nil, err
	}
	if !tr.Enabled {
		return nil, Errorf(ECONFLICT, "trigger %q is disabled", tr.ID)
	}
	if len(d.Body) > MaxPayloadLen {
		return nil, Errorf(EINVALID, "the payload exceeds %d bytes", MaxPayloadLen)
	}
	if len(d.DeliveryID) > 200 {
		return nil, Errorf(EINVALID, "the delivery id is longer than 200 bytes")
	}
	data, err := parsePayload(d.Body)
	if err != nil {
		return nil, err
	}
	input, err := renderPrompt(tr, data)
	if err != nil {
		return nil, err
	}
	if err := s.takeToken(ctx, tr.ID); err != nil {
		return nil, err
	}
	now := s.now()
	occ := &Occurrence{ID: NewID("occ", now), Cause: CauseWebhook, ScheduledAt: now, Input: input}
	occ.Key = "webhook:" + occ.ID
	if d.DeliveryID != "" {
		occ.Key = "delivery:" + d.DeliveryID
	}
	o, err := s.fire(ctx, tr, occ, nil, true)
	if ErrorCode(err) == ECONFLICT && d.DeliveryID != "" {
		return nil, Errorf(ECONFLICT, "delivery %q was seen before; a replay is refused", d.DeliveryID)
	}
	return o, err
}

// takeToken takes a token from the webhook rate limiter of trigger id
// (Trigger.Bucket) in a transaction of its own, committed whatever the
// delivery comes to: a refused replay or a run that cannot start counts
// too. ELIMIT when none is left. The bucket is in the trigger's row, so
// the replicas of one database share it.
func (s *Service) takeToken(ctx context.Context, id string) error {
	return s.update(ctx, func(tx Tx) error {
		tr, err := tx.Trigger(id)
		if err != nil {
			return err
		}
		if tr.Bucket == nil {
			tr.Bucket = &RateBucket{}
		}
		if !tr.Bucket.take(tr.RateLimit, s.now()) {
			return Errorf(ELIMIT, "trigger %q accepts %d deliveries a minute; try again later", tr.ID, tr.RateLimit)
		}
		return tx.PutTrigger(tr)
	})
}

// parsePayload decodes a webhook body: nil for an empty one, else JSON
// in valid UTF-8. EINVALID otherwise (encoding/json would quietly turn
// bytes that are not UTF-8 into U+FFFD, so they are refused first).
func parsePayload(body []byte) (any, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	if !utf8.Valid(body) {
		return nil, Errorf(EINVALID, "the payload is not valid UTF-8")
	}
	var data any
	if err := json.Unmarshal(body, &data); err != nil {
		return nil, Errorf(EINVALID, "the payload is not JSON: %s", err)
	}
	return data, nil
}

// authenticate checks a delivery's secret and signatures in constant
// time. At least one credential must be sent, and every one sent must
// verify.
func (s *Service) authenticate(tr *Trigger, d Delivery) error {
	unauthorized := Errorf(EUNAUTHORIZED, "the webhook secret or signature is missing or wrong")
	if d.Token == "" && len(d.Signatures) == 0 {
		return unauthorized
	}
	if d.Token != "" {
		sum := sha256.Sum256([]byte(d.Token))
		if len(tr.SecretHash) != len(sum) || subtle.ConstantTimeCompare(sum[:], tr.SecretHash) != 1 {
			return unauthorized
		}
	}
	if len(d.Signatures) == 0 {
		return nil
	}
	secret, err := s.openSecret(tr)
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, secret)
	if d.Timestamp != "" {
		ts, err := strconv.ParseInt(d.Timestamp, 10, 64)
		if err != nil {
			return Errorf(EUNAUTHORIZED, "X-Kiln-Timestamp must be unix seconds")
		}
		if skew := s.now().Sub(time.Unix(ts, 0)); skew > SignatureTolerance || skew < -SignatureTolerance {
			return Errorf(EUNAUTHORIZED, "the signed timestamp is more than %s from the server's clock", SignatureTolerance)
		}
		mac.Write([]byte(d.Timestamp + "."))
	}
	mac.Write(d.Body)
	want := mac.Sum(nil)
	for _, name := range slices.Sorted(maps.Keys(d.Signatures)) {
		hexSig, ok := strings.CutPrefix(d.Signatures[name], "sha256=")
		got, err := hex.DecodeString(hexSig)
		if !ok || err != nil || !hmac.Equal(want, got) {
			return Errorf(EUNAUTHORIZED, "the %s signature is malformed or does not match the body", name)
		}
	}
	return nil
}
