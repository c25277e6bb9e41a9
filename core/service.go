package core

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// Config configures a Service.
type Config struct {
	Store Store
	// Models resolves a run's model reference. Required.
	Models ModelResolver
	// Tools are the tools every run may call.
	Tools []Tool
	// DefaultModel is used when neither the run nor its thread names one.
	DefaultModel string
	// DefaultPolicy applies to runs that give no interrupt_on of their own.
	DefaultPolicy Policy
	// MaxSteps and MaxToolCalls bound runs that set no limits of their own;
	// zero means 200 steps and 500 tool calls.
	MaxSteps     int
	MaxToolCalls int
	// MaxToolResult is how many bytes of text one tool result keeps: the
	// engine caps every result (built-in, plugin and MCP tools alike) to
	// its first and last half with a line saying how much was left out
	// (CapResult) before it stores it. Zero means DefaultMaxToolResult.
	MaxToolResult int
	// ShutdownGrace is how long Shutdown lets a step in flight finish before
	// cancelling it; zero means 10 seconds.
	ShutdownGrace time.Duration
	Now           Clock
	Logger        *slog.Logger
	// Redactor scrubs secrets from everything the Service stores and
	// publishes (errors, messages, events); nil still removes what looks
	// like a credential.
	Redactor *Redactor
	// Observer is told about runs, steps, tool calls and model turns, for
	// metrics; nil means none.
	Observer Observer
	// DataRoot is Kiln's data folder: folder grants that overlap it need
	// acknowledgement, and long-term memory lives in its memories folder.
	// "" turns both checks and memory off.
	DataRoot string
	// Blobs keeps attachment bytes; nil means attachments are refused.
	Blobs Blobs
	// MaxSubagentDepth bounds how deep subagents nest (a run the user
	// started is at depth 0, its subagents at 1); MaxSubagents bounds how
	// many subagents one run starts. Zero means DefaultSubagentDepth and
	// DefaultSubagents.
	MaxSubagentDepth int
	MaxSubagents     int
	// Schedules parses cron triggers' expressions (plugins/builtin/cron
	// in the server); nil means cron triggers are refused.
	Schedules ScheduleParser
	// TriggerKey (at least 32 bytes) seals webhook triggers' secrets in
	// the Store; nil means webhook triggers are refused.
	TriggerKey []byte
	// SandboxRuntimes lists the sandbox runtimes enabled now: the names
	// the sandbox_runtime setting may take (besides "", the server's
	// default). nil means none is, and the setting can only be "".
	SandboxRuntimes func() []string
	// Holder names this process in the leases of the runs it drives:
	// unique among the processes that share the Store, and the same
	// across a process's restarts, so that a restarted process takes its
	// runs back at once instead of waiting for their leases to lapse.
	// "" means host:pid (unique, but new at each start).
	Holder string
	// LeaseTTL is how long a run's lease lasts without a heartbeat (the
	// driver renews it every third of that); zero means 30 seconds. On a
	// Store that several processes share (a LapsedLister), a process that
	// died leaves its runs to the others once their leases lapse, so it
	// bounds how soon they resume.
	LeaseTTL time.Duration
}

// Service is Kiln's core API: every operation a client can do, acting as a
// Principal, plus the run engine. Errors are *Error values with a code.
type Service struct {
	store Store
	runs  RunStore
	// holder names this process in the leases of the runs it drives.
	holder string
	// wsGen moves after each update that changed grants, settings or
	// attachments, here or, through EventWorkspaceChanged, on another
	// replica: runs read their workspace again (runner.loadWorkspace).
	wsGen atomic.Int64
	// leaseOK and leaseFailed are when a run lease's renewal last
	// succeeded and last failed for a reason other than a refusal (unix
	// nanoseconds): Ready's lease health.
	leaseOK, leaseFailed atomic.Int64
	// owners are the owners' grants and settings as runs last read them
	// (runner.startWorkspace).
	ownersMu sync.Mutex
	owners   map[string]ownerWorkspace
	models   ModelResolver
	cfg      Config
	now      Clock
	log      *slog.Logger
	broker   *Broker
	obs      Observer

	// tb is the current toolbox; tbMu serializes its replacement.
	tb   atomic.Pointer[toolbox]
	tbMu sync.Mutex

	// wmu orders commit and publish so subscribers see Seq order, for a
	// Store that is no CommitHooker.
	wmu    sync.Mutex
	hooked bool

	// blobMu orders storing attachment bytes and dropping unused ones.
	blobMu sync.Mutex

	// tr holds the triggers' parsed schedules and rate limiters.
	tr     *triggerState
	trOnce sync.Once

	mu       sync.Mutex
	active   map[string]*driver // run id -> its driver
	stopping bool
	stopped  chan struct{} // closed when Shutdown begins
	wg       sync.WaitGroup
	base     context.Context
	hardStop context.CancelFunc
}

// New returns a Service. Call Start to recover and resume runs.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Models == nil {
		return nil, Errorf(EINVALID, "core: Store and Models are required")
	}
	runs, ok := cfg.Store.(RunStore)
	if !ok {
		return nil, Errorf(EINVALID, "core: the Store (%T) does not implement RunStore", cfg.Store)
	}
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = 200
	}
	if cfg.MaxToolCalls <= 0 {
		cfg.MaxToolCalls = 500
	}
	if cfg.MaxToolResult <= 0 {
		cfg.MaxToolResult = DefaultMaxToolResult
	}
	if cfg.MaxSubagentDepth <= 0 {
		cfg.MaxSubagentDepth = DefaultSubagentDepth
	}
	if cfg.MaxSubagents <= 0 {
		cfg.MaxSubagents = DefaultSubagents
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 10 * time.Second
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = defaultLeaseTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if err := cfg.DefaultPolicy.Validate(); err != nil {
		return nil, err
	}
	s := &Service{
		store: cfg.Store, runs: runs, holder: cmp.Or(cfg.Holder, leaseHolder()), models: cfg.Models, cfg: cfg, now: cfg.Now, log: cfg.Logger, obs: cfg.Observer,
		broker: NewBroker(), active: map[string]*driver{}, stopped: make(chan struct{}),
	}
	tb := &toolbox{byName: map[string]Tool{}, sources: map[string][]string{}, defaults: map[string]Rule{}}
	for _, t := range cfg.Tools {
		spec := t.Spec()
		if _, dup := tb.byName[spec.Name]; dup {
			return nil, Errorf(EINVALID, "core: tool %q registered twice", spec.Name)
		}
		tb.byName[spec.Name] = t
		tb.specs = append(tb.specs, spec)
	}
	s.tb.Store(tb)
	if h, ok := cfg.Store.(CommitHooker); ok {
		h.SetCommitHook(func(evs []Event) {
			if slices.ContainsFunc(evs, func(e Event) bool { return e.Type == EventWorkspaceChanged }) {
				s.wsGen.Add(1)
			}
			s.broker.Publish(evs...)
		})
		s.hooked = true
	}
	s.base, s.hardStop = context.WithCancel(context.Background())
	return s, nil
}

// Stopping returns a channel that is closed when Shutdown begins: live
// streams of events end then.
func (s *Service) Stopping() <-chan struct{} { return s.stopped }

// Broker returns the live event broker.
func (s *Service) Broker() *Broker { return s.broker }

// Store returns the underlying store.
func (s *Service) Store() Store { return s.store }

// ToolSpecs lists the tools runs may call now.
func (s *Service) ToolSpecs() []ToolSpec { return slices.Clone(s.tb.Load().specs) }

// update commits fn and publishes its events in commit order (through the
// Store's commit hook when it has one), then tells the Observer about the
// runs they started and finished.
func (s *Service) update(ctx context.Context, fn func(Tx) error) error {
	var ws bool
	redacted := func(tx Tx) error {
		ws = false
		return fn(redactTx{Tx: tx, r: s.cfg.Redactor, ws: &ws})
	}
	evs, err := s.commitOrdered(func() ([]Event, error) { return s.store.Update(ctx, redacted) })
	if err != nil {
		return err
	}
	if ws {
		s.wsGen.Add(1)
	}
	s.observeEvents(evs)
	return nil
}

// submitStep submits a run's step (RunStore.SubmitStep) redacted, and
// returns the wait that completes it as update completes an Update: the
// message indexes and the checkpoint's Messages the Store sets are
// copied to c's own, the events observed. The Store is given copies of
// the messages and the checkpoint, which it writes to while the caller
// goes on. A Store without a commit hook commits the step at once,
// serialized with the others to publish in commit order.
func (s *Service) submitStep(ctx context.Context, c *StepCommit) func() (*StepResult, error) {
	ws := new(bool)
	stored := redactTx{r: s.cfg.Redactor, ws: ws}.redactStep(c)
	msgs := make([]*Message, len(stored.Messages))
	for i, m := range stored.Messages {
		cm := *m
		msgs[i] = &cm
	}
	stored.Messages = msgs
	var cp Checkpoint
	if stored.Checkpoint != nil {
		cp = *stored.Checkpoint
		stored.Checkpoint = &cp
	}
	var wait func() (*StepResult, error)
	if s.hooked {
		wait = s.runs.SubmitStep(ctx, stored)
	} else {
		var res *StepResult
		_, err := s.commitOrdered(func() (_ []Event, err error) {
			if res, err = s.runs.CommitStep(ctx, stored); err != nil {
				return nil, err
			}
			return res.Events, nil
		})
		wait = func() (*StepResult, error) { return res, err }
	}
	return func() (*StepResult, error) {
		res, err := wait()
		if err != nil {
			return nil, err
		}
		for i, m := range c.Messages {
			m.Index = stored.Messages[i].Index
		}
		if c.Checkpoint != nil {
			c.Checkpoint.Messages = cp.Messages
		}
		if *ws {
			s.wsGen.Add(1)
		}
		s.observeEvents(res.Events)
		return res, nil
	}
}

// commitOrdered runs commit, a write to the Store, and publishes the
// events it returns in commit order: the Store's commit hook does when
// it has one; otherwise commits are serialized to publish in order.
func (s *Service) commitOrdered(commit func() ([]Event, error)) ([]Event, error) {
	if s.hooked {
		return commit()
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	evs, err := commit()
	if err == nil {
		s.broker.Publish(evs...)
	}
	return evs, err
}

// publish delivers an ephemeral event (Seq 0) live, its payload redacted.
func (s *Service) publish(e Event) {
	e.Payload = s.cfg.Redactor.RedactJSON(e.Payload)
	s.broker.Publish(e)
}

// Redactor returns the Service's redactor (possibly nil).
func (s *Service) Redactor() *Redactor { return s.cfg.Redactor }

func (s *Service) view(ctx context.Context, fn func(ReadTx) error) error {
	return s.store.View(ctx, fn)
}

func emit(tx Tx, owner, thread, run, typ string, payload any) error {
	return emitNS(tx, owner, thread, run, "", typ, payload)
}

// emitRun emits an event of run, in its namespace.
func emitRun(tx Tx, run *Run, typ string, payload any) error {
	return emitNS(tx, run.OwnerID, run.ThreadID, run.ID, run.Namespace, typ, payload)
}

func emitNS(tx Tx, owner, thread, run, ns, typ string, payload any) error {
	var raw json.RawMessage
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			return err
		}
		raw = b
	}
	return tx.Emit(Event{OwnerID: owner, ThreadID: thread, RunID: run, Namespace: ns, Type: typ, Payload: raw})
}

// ownThread loads a thread the principal may see.
func ownThread(tx ReadTx, p Principal, id string) (*Thread, error) {
	t, err := tx.Thread(id)
	if err != nil {
		return nil, err
	}
	if t.OwnerID != p.ID {
		return nil, Errorf(ENOTFOUND, "thread %q not found", id)
	}
	return t, nil
}

func ownRun(tx ReadTx, p Principal, id string) (*Run, error) {
	r, err := tx.Run(id)
	if err != nil {
		return nil, err
	}
	if r.OwnerID != p.ID {
		return nil, Errorf(ENOTFOUND, "run %q not found", id)
	}
	return r, nil
}

func ownFolder(tx ReadTx, p Principal, id string) (*Folder, error) {
	f, err := tx.Folder(id)
	if err != nil {
		return nil, err
	}
	if f.OwnerID != p.ID {
		return nil, Errorf(ENOTFOUND, "folder %q not found", id)
	}
	return f, nil
}

// Limits on names.
const (
	MaxTitleLen      = 200
	MaxFolderNameLen = 80
	MaxInputLen      = 256 << 10
)

// cleanName trims a single-line field (a title, a name) and checks it:
// not empty when required, at most max characters, valid UTF-8, and no
// control characters (NUL, newlines and tabs included) or line separators.
func cleanName(kind, s string, max int, required bool) (string, error) {
	s = strings.TrimSpace(s)
	if required && s == "" {
		return "", Errorf(EINVALID, "%s must not be empty", kind)
	}
	if n := utf8.RuneCountInString(s); n > max {
		return "", Errorf(EINVALID, "%s is %d characters; the limit is %d", kind, n, max)
	}
	if err := CheckText(kind, s, false); err != nil {
		return "", err
	}
	return s, nil
}

// CheckText returns EINVALID unless s is valid UTF-8 without control
// characters. multiline allows newlines, carriage returns and tabs (a
// message's text); a single-line field (a title, a name) allows none of
// them, nor the Unicode line and paragraph separators.
func CheckText(kind, s string, multiline bool) error {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return Errorf(EINVALID, "%s is not valid UTF-8 (at byte %d)", kind, i)
			}
		case multiline && (r == '\n' || r == '\r' || r == '\t'):
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			return Errorf(EINVALID, "%s contains the control character %U (at byte %d)", kind, r, i)
		}
	}
	return nil
}

// ThreadInput creates a thread.
type ThreadInput struct {
	Title    string `json:"title"`
	FolderID string `json:"folder_id"`
	Pinned   bool   `json:"pinned"`
}

// CreateThread creates a thread owned by p. EINVALID for a bad title,
// ENOTFOUND for an unknown folder.
func (s *Service) CreateThread(ctx context.Context, p Principal, in ThreadInput) (*Thread, error) {
	title, err := cleanName("title", in.Title, MaxTitleLen, false)
	if err != nil {
		return nil, err
	}
	if title == "" {
		title = "New thread"
	}
	now := s.now()
	t := &Thread{
		ID: NewID("thr", now), Title: title, FolderID: in.FolderID, Pinned: in.Pinned,
		Source: SourceUser, OwnerID: p.ID, Status: ThreadIdle, CreatedAt: now, UpdatedAt: now,
	}
	err = s.update(ctx, func(tx Tx) error {
		if t.FolderID != "" {
			if _, err := ownFolder(tx, p, t.FolderID); err != nil {
				return err
			}
		}
		if err := tx.PutThread(t); err != nil {
			return err
		}
		return emit(tx, p.ID, t.ID, "", EventThreadCreated, t)
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// ThreadPage is one page of a thread list.
type ThreadPage struct {
	Threads    []*Thread `json:"threads"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// ListThreads lists p's threads; q.OwnerID is set from p.
func (s *Service) ListThreads(ctx context.Context, p Principal, q ThreadQuery) (ThreadPage, error) {
	q.OwnerID = p.ID
	var page ThreadPage
	err := s.view(ctx, func(tx ReadTx) error {
		ts, next, err := tx.Threads(q)
		page = ThreadPage{Threads: ts, NextCursor: next}
		if err != nil {
			return err
		}
		return describeFires(tx, ts...)
	})
	if page.Threads == nil {
		page.Threads = []*Thread{}
	}
	return page, err
}

// GetThread returns one of p's threads.
func (s *Service) GetThread(ctx context.Context, p Principal, id string) (*Thread, error) {
	var t *Thread
	err := s.view(ctx, func(tx ReadTx) (err error) {
		if t, err = ownThread(tx, p, id); err != nil {
			return err
		}
		return describeFires(tx, t)
	})
	return t, err
}

// describeFires fills in the Trigger of each thread a trigger started,
// from the occurrence it was started for and that trigger: the one place
// a thread's fire is described. A thread whose occurrence is gone (its
// trigger was deleted) keeps a nil Trigger.
func describeFires(tx ReadTx, ts ...*Thread) error {
	for _, t := range ts {
		if t.OccurrenceID == "" {
			continue
		}
		occ, err := tx.Occurrence(t.OccurrenceID)
		if IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("describe thread %s's fire: %w", t.ID, err)
		}
		tr, err := tx.Trigger(occ.TriggerID)
		if IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("describe thread %s's fire: %w", t.ID, err)
		}
		t.Trigger = &ThreadTrigger{ID: tr.ID, Name: tr.Name, Kind: tr.Kind, Timezone: tr.Timezone, OccurrenceID: occ.ID,
			Cause: occ.Cause, ScheduledAt: occ.ScheduledAt, Summary: preview(occ.Input)}
	}
	return nil
}

// ThreadPatch changes a thread; nil fields stay as they are. FolderID ""
// moves the thread to no folder.
type ThreadPatch struct {
	Title    *string
	FolderID *string
	Pinned   *bool
}

// UpdateThread applies a patch.
func (s *Service) UpdateThread(ctx context.Context, p Principal, id string, patch ThreadPatch) (*Thread, error) {
	var t *Thread
	err := s.update(ctx, func(tx Tx) (err error) {
		if t, err = ownThread(tx, p, id); err != nil {
			return err
		}
		if patch.Title != nil {
			if t.Title, err = cleanName("title", *patch.Title, MaxTitleLen, true); err != nil {
				return err
			}
		}
		if patch.FolderID != nil {
			if *patch.FolderID != "" {
				if _, err := ownFolder(tx, p, *patch.FolderID); err != nil {
					return err
				}
			}
			t.FolderID = *patch.FolderID
		}
		if patch.Pinned != nil {
			t.Pinned = *patch.Pinned
		}
		if err := tx.PutThread(t); err != nil {
			return err
		}
		return emit(tx, p.ID, t.ID, "", EventThreadUpdated, t)
	})
	return t, err
}

// DeleteThread deletes a thread and everything in it. A thread with a
// running or interrupted run is refused with ECONFLICT: cancel it first.
// Its attachments' bytes go too, unless another attachment has the same
// content.
func (s *Service) DeleteThread(ctx context.Context, p Principal, id string) error {
	var sums []string
	err := s.update(ctx, func(tx Tx) error {
		t, err := ownThread(tx, p, id)
		if err != nil {
			return err
		}
		if t.ActiveRunID != "" {
			return Errorf(ECONFLICT, "thread %q has an active run %q; cancel it first", id, t.ActiveRunID)
		}
		atts, err := tx.Attachments(AttachmentQuery{ThreadID: id})
		if err != nil {
			return err
		}
		sums = sums[:0]
		for _, a := range atts {
			sums = append(sums, a.SHA256)
		}
		if err := tx.DeleteThread(id); err != nil {
			return err
		}
		return emit(tx, p.ID, id, "", EventThreadDeleted, map[string]string{"id": id})
	})
	if err == nil {
		s.dropBlobs(ctx, sums...)
	}
	return err
}

// MarkRead clears the thread's unread state.
func (s *Service) MarkRead(ctx context.Context, p Principal, id string) (*Thread, error) {
	var t *Thread
	err := s.update(ctx, func(tx Tx) (err error) {
		if t, err = ownThread(tx, p, id); err != nil {
			return err
		}
		if t.UnreadRunID == "" {
			return nil
		}
		return s.markRead(tx, p, t)
	})
	return t, err
}

// markRead clears t's unread state (settle) and records it (a
// thread.read event).
func (s *Service) markRead(tx Tx, p Principal, t *Thread) error {
	settle(t, threadChange{read: true}, s.now())
	if err := tx.PutThread(t); err != nil {
		return err
	}
	return emit(tx, p.ID, t.ID, "", EventThreadRead, map[string]string{"id": t.ID})
}

// MarkAllRead clears the unread state of every one of p's unread threads
// (a thread.read event each) and returns how many there were.
func (s *Service) MarkAllRead(ctx context.Context, p Principal) (int, error) {
	n := 0
	err := s.update(ctx, func(tx Tx) error {
		n = 0
		for {
			items, _, err := tx.Inbox(InboxQuery{OwnerID: p.ID, Queue: QueueUnread, Limit: 500})
			if err != nil || len(items) == 0 {
				return err
			}
			for _, it := range items {
				t, err := ownThread(tx, p, it.ThreadID)
				if err != nil {
					return err
				}
				if err := s.markRead(tx, p, t); err != nil {
					return err
				}
				n++
			}
		}
	})
	return n, err
}

// Messages returns the thread's conversation as of its latest checkpoint.
func (s *Service) Messages(ctx context.Context, p Principal, threadID string) ([]*Message, error) {
	var msgs []*Message
	err := s.view(ctx, func(tx ReadTx) (err error) {
		if _, err = ownThread(tx, p, threadID); err != nil {
			return err
		}
		msgs, err = tx.Messages(threadID, 0, 0)
		return err
	})
	if msgs == nil {
		msgs = []*Message{}
	}
	return msgs, err
}

// FolderInput creates a folder.
type FolderInput struct {
	Name     string `json:"name"`
	Position *int   `json:"position"`
}

// CreateFolder creates a folder; names are unique per owner,
// case-insensitively (ECONFLICT). Positions are a dense order 0..n-1:
// without a position the folder goes last, with one it is inserted there
// (clamped to the ends) and the folders after it move down.
func (s *Service) CreateFolder(ctx context.Context, p Principal, in FolderInput) (*Folder, error) {
	name, err := cleanName("folder name", in.Name, MaxFolderNameLen, true)
	if err != nil {
		return nil, err
	}
	now := s.now()
	f := &Folder{ID: NewID("fld", now), Name: name, OwnerID: p.ID, CreatedAt: now, UpdatedAt: now}
	err = s.update(ctx, func(tx Tx) error {
		fs, err := tx.Folders(p.ID)
		if err != nil {
			return err
		}
		for _, o := range fs {
			if strings.EqualFold(o.Name, name) {
				return Errorf(ECONFLICT, "a folder named %q exists", o.Name)
			}
		}
		pos := len(fs)
		if in.Position != nil {
			pos = *in.Position
		}
		if err := tx.PutFolder(f); err != nil {
			return err
		}
		if err := emit(tx, p.ID, "", "", EventFolderCreated, f); err != nil {
			return err
		}
		return s.placeFolder(tx, append(fs, f), f, pos)
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// placeFolder moves f (one of fs, the owner's folders in order) to index
// pos, clamped to the ends, and renumbers the folders 0..n-1 in their new
// order, storing and announcing (folder.updated) each one whose position
// changed, f included.
func (s *Service) placeFolder(tx Tx, fs []*Folder, f *Folder, pos int) error {
	order := make([]*Folder, 0, len(fs))
	for _, o := range fs {
		if o.ID != f.ID {
			order = append(order, o)
		}
	}
	pos = min(max(pos, 0), len(order))
	order = slices.Insert(order, pos, f)
	now := s.now()
	for i, o := range order {
		if o.Position == i {
			continue
		}
		o.Position = i
		if o != f {
			o.UpdatedAt = now
		}
		if err := tx.PutFolder(o); err != nil {
			return err
		}
		if err := emit(tx, o.OwnerID, "", "", EventFolderUpdated, o); err != nil {
			return err
		}
	}
	return nil
}

// ListFolders lists p's folders in order.
func (s *Service) ListFolders(ctx context.Context, p Principal) ([]*Folder, error) {
	var fs []*Folder
	err := s.view(ctx, func(tx ReadTx) (err error) {
		fs, err = tx.Folders(p.ID)
		return err
	})
	if fs == nil {
		fs = []*Folder{}
	}
	return fs, err
}

// GetFolder returns one of p's folders.
func (s *Service) GetFolder(ctx context.Context, p Principal, id string) (*Folder, error) {
	var f *Folder
	err := s.view(ctx, func(tx ReadTx) (err error) {
		f, err = ownFolder(tx, p, id)
		return err
	})
	return f, err
}

// FolderPatch renames or moves a folder.
type FolderPatch struct {
	Name     *string
	Position *int
}

// UpdateFolder applies a patch. A new position moves the folder there in
// the dense order (clamped to the ends) and renumbers the others.
func (s *Service) UpdateFolder(ctx context.Context, p Principal, id string, patch FolderPatch) (*Folder, error) {
	var f *Folder
	err := s.update(ctx, func(tx Tx) (err error) {
		if f, err = ownFolder(tx, p, id); err != nil {
			return err
		}
		fs, err := tx.Folders(p.ID)
		if err != nil {
			return err
		}
		if patch.Name != nil {
			name, err := cleanName("folder name", *patch.Name, MaxFolderNameLen, true)
			if err != nil {
				return err
			}
			for _, o := range fs {
				if o.ID != id && strings.EqualFold(o.Name, name) {
					return Errorf(ECONFLICT, "a folder named %q exists", o.Name)
				}
			}
			f.Name = name
		}
		f.UpdatedAt = s.now()
		if err := tx.PutFolder(f); err != nil {
			return err
		}
		if err := emit(tx, p.ID, "", "", EventFolderUpdated, f); err != nil {
			return err
		}
		if patch.Position == nil {
			return nil
		}
		for i, o := range fs {
			if o.ID == id {
				fs[i] = f
			}
		}
		return s.placeFolder(tx, fs, f, *patch.Position)
	})
	return f, err
}

// DeleteFolder deletes a folder; its threads move to no folder and the
// folders after it move up.
func (s *Service) DeleteFolder(ctx context.Context, p Principal, id string) error {
	return s.update(ctx, func(tx Tx) error {
		if _, err := ownFolder(tx, p, id); err != nil {
			return err
		}
		if err := tx.DeleteFolder(id); err != nil {
			return err
		}
		if err := emit(tx, p.ID, "", "", EventFolderDeleted, map[string]string{"id": id}); err != nil {
			return err
		}
		fs, err := tx.Folders(p.ID)
		if err != nil || len(fs) == 0 {
			return err
		}
		return s.placeFolder(tx, fs, fs[0], 0)
	})
}

// InboxPage is one page of a queue plus both counts.
type InboxPage struct {
	Queue      string       `json:"queue"`
	Items      []*InboxItem `json:"items"`
	Counts     InboxCounts  `json:"counts"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// Inbox lists a queue (QueueUnread or QueueAction) for p.
func (s *Service) Inbox(ctx context.Context, p Principal, q InboxQuery) (InboxPage, error) {
	if q.Queue != QueueUnread && q.Queue != QueueAction {
		return InboxPage{}, Errorf(EINVALID, "queue must be %q or %q", QueueUnread, QueueAction)
	}
	q.OwnerID = p.ID
	page := InboxPage{Queue: q.Queue}
	err := s.view(ctx, func(tx ReadTx) (err error) {
		if page.Items, page.NextCursor, err = tx.Inbox(q); err != nil {
			return err
		}
		page.Counts, err = tx.InboxCounts(p.ID)
		return err
	})
	if page.Items == nil {
		page.Items = []*InboxItem{}
	}
	return page, err
}

// InboxCounts returns both queue sizes.
func (s *Service) InboxCounts(ctx context.Context, p Principal) (InboxCounts, error) {
	var c InboxCounts
	err := s.view(ctx, func(tx ReadTx) (err error) {
		c, err = tx.InboxCounts(p.ID)
		return err
	})
	return c, err
}

// GetRun returns one of p's runs.
func (s *Service) GetRun(ctx context.Context, p Principal, id string) (*Run, error) {
	var r *Run
	err := s.view(ctx, func(tx ReadTx) (err error) {
		r, err = ownRun(tx, p, id)
		return err
	})
	return r, err
}

// RunPage is one page of a run list.
type RunPage struct {
	Runs       []*Run `json:"runs"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// ListRuns lists p's runs, of one thread when q.ThreadID is set (it must
// be one of p's), filtered by q.Statuses, oldest first or q.Newest, paged
// by q.Limit and q.Cursor. q.OwnerID is set from p.
func (s *Service) ListRuns(ctx context.Context, p Principal, q RunQuery) (RunPage, error) {
	for _, st := range q.Statuses {
		if !slices.Contains(RunStatuses, st) {
			return RunPage{}, Errorf(EINVALID, "unknown run status %q; want one of %s", st, joinStatuses(RunStatuses))
		}
	}
	q.OwnerID = p.ID
	var page RunPage
	err := s.view(ctx, func(tx ReadTx) (err error) {
		if q.ThreadID != "" {
			if _, err = ownThread(tx, p, q.ThreadID); err != nil {
				return err
			}
		}
		page.Runs, page.NextCursor, err = tx.Runs(q)
		return err
	})
	if page.Runs == nil {
		page.Runs = []*Run{}
	}
	return page, err
}

func joinStatuses(ss []RunStatus) string {
	parts := make([]string, len(ss))
	for i, st := range ss {
		parts[i] = string(st)
	}
	return strings.Join(parts, ", ")
}

// GetInterrupt returns one of p's interrupts.
func (s *Service) GetInterrupt(ctx context.Context, p Principal, id string) (*Interrupt, error) {
	var in *Interrupt
	err := s.view(ctx, func(tx ReadTx) (err error) {
		in, err = tx.Interrupt(id)
		if err == nil && in.OwnerID != p.ID {
			err = Errorf(ENOTFOUND, "interrupt %q not found", id)
		}
		return err
	})
	return in, err
}

// ListInterrupts lists the interrupts of one of p's runs.
func (s *Service) ListInterrupts(ctx context.Context, p Principal, runID string) ([]*Interrupt, error) {
	var ins []*Interrupt
	err := s.view(ctx, func(tx ReadTx) (err error) {
		if _, err = ownRun(tx, p, runID); err != nil {
			return err
		}
		ins, err = tx.Interrupts(InterruptQuery{RunID: runID})
		return err
	})
	if ins == nil {
		ins = []*Interrupt{}
	}
	return ins, err
}

// Events returns stored events visible to p after q.After.
// q.ThreadID, when set, must be one of p's threads.
func (s *Service) Events(ctx context.Context, p Principal, q EventQuery) ([]Event, error) {
	q.OwnerID = p.ID
	var evs []Event
	err := s.view(ctx, func(tx ReadTx) (err error) {
		evs, err = tx.Events(q)
		return err
	})
	return evs, err
}

// CheckThread returns ENOTFOUND unless the thread exists and p may see it.
func (s *Service) CheckThread(ctx context.Context, p Principal, id string) error {
	_, err := s.GetThread(ctx, p, id)
	return err
}

// Subscribe returns a live subscription to the events p may see (of one
// thread when threadID is set). Pair it with Events for replay: subscribe
// first, replay after the last seen Seq, then skip live events with a Seq
// already seen (ephemeral events have Seq 0 and are never replayed).
func (s *Service) Subscribe(p Principal, threadID string) *Subscription {
	return s.broker.Subscribe(Filter{OwnerID: p.ID, ThreadID: threadID}, 4096)
}
