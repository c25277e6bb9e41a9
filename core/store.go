package core

import (
	"context"
	"time"
)

// Store persists Kiln's state. All reads go through View and all writes
// through Update; a Store implementation is safe for concurrent use.
//
// Every Store runs the conformance suite in core/coretest.
type Store interface {
	// View runs fn in a read-only transaction with a consistent snapshot.
	// fn may be run more than once: a Store may end a run of fn with an
	// error of a ReadTx method and answer it by running fn again on a
	// newer snapshot (the sqlite Store does when a search meets texts it
	// has not indexed yet). So fn only reads, and passes on the errors of
	// ReadTx's methods that it cannot go on without.
	View(ctx context.Context, fn func(ReadTx) error) error

	// Update runs fn in a read-write transaction. If fn returns nil the
	// transaction commits and Update returns the events emitted through
	// Tx.Emit, with their Seq assigned, in emission order. If fn returns an
	// error, or the commit fails, nothing fn did is kept and no events are
	// returned. Seq values of committed events are strictly increasing across
	// all Updates in commit order.
	Update(ctx context.Context, fn func(Tx) error) ([]Event, error)

	// Close releases the Store. It is an error to use it afterwards.
	Close() error
}

// CommitHooker is implemented by Stores that report each Update's committed
// events through a hook, in commit order, before the Update returns. With
// one, a Service publishes live events from the hook and lets Updates run
// concurrently (so a Store may commit them in groups); without one it
// serializes Updates to publish in order.
type CommitHooker interface {
	SetCommitHook(hook func([]Event))
}

// ReadTx reads inside a transaction: the read halves of the Store's
// parts, one per owner, so that a backend can build and test them one at
// a time (core/coretest has a suite per part). Lookups by ID return an
// *Error with ENOTFOUND when the object does not exist.
//
// Sandbox records are not part of it: the sandbox service
// (sandbox/service) owns them and finds them on a Store's transactions
// by type assertion.
type ReadTx interface {
	ThreadReadTx
	RunReadTx
	LogReadTx
	WorkspaceReadTx
	SettingsReadTx
	TriggerReadTx
}

// Tx writes inside a transaction: the Store's parts, as ReadTx. Put
// methods insert or replace the whole object by ID.
type Tx interface {
	ReadTx
	ThreadTx
	RunTx
	LogTx
	WorkspaceTx
	SettingsTx
	TriggerTx
}

// ThreadReadTx reads the threads-and-inbox part: threads, folders, the
// search over them and the Unread and Action queues. A thread's derived
// fields are what the last PutThread stored (settle decides them), except
// Unread, which follows from UnreadRunID (Thread.Derive). The Action queue
// lists the open interrupts of the runs part, so a backend builds the two
// parts together.
type ThreadReadTx interface {
	Thread(id string) (*Thread, error)
	// Threads lists threads matching q, ordered pinned first, then by
	// UpdatedAt descending, then ID descending. It returns the cursor of the
	// next page, or "" on the last page.
	Threads(q ThreadQuery) ([]*Thread, string, error)

	Folder(id string) (*Folder, error)
	// Folders lists the owner's folders by Position, then Name.
	Folders(ownerID string) ([]*Folder, error)

	// Inbox lists one queue, newest first, and the cursor of the next page.
	Inbox(q InboxQuery) ([]*InboxItem, string, error)
	// InboxCounts counts both queues for the owner.
	InboxCounts(ownerID string) (InboxCounts, error)
}

// ThreadTx writes the threads-and-inbox part.
type ThreadTx interface {
	ThreadReadTx

	PutThread(t *Thread) error
	// DeleteThread removes the thread with its runs, messages, checkpoints,
	// interrupts, virtual files and attachment records. Events stay in
	// the log.
	DeleteThread(id string) error

	PutFolder(f *Folder) error
	// DeleteFolder removes the folder; its threads move to no folder.
	DeleteFolder(id string) error
}

// RunReadTx reads the runs-and-steps part: runs, the messages of their
// threads, checkpoints and interrupts, which is what the engine writes at
// each step.
type RunReadTx interface {
	Run(id string) (*Run, error)
	// Runs lists runs matching q, oldest first (newest first with
	// q.Newest), and returns the cursor of the next page when q.Limit cut
	// the list, or "".
	Runs(q RunQuery) ([]*Run, string, error)

	// Messages returns the thread's messages with Index >= from, in order,
	// at most limit of them (limit <= 0 means all), of every namespace.
	Messages(threadID string, from, limit int) ([]*Message, error)

	// Checkpoint returns the run's checkpoint with the given version; version
	// 0 means the latest. ENOTFOUND if there is none.
	Checkpoint(runID string, version int) (*Checkpoint, error)

	Interrupt(id string) (*Interrupt, error)
	// Interrupts lists interrupts matching q, oldest first.
	Interrupts(q InterruptQuery) ([]*Interrupt, error)
}

// RunTx writes the runs-and-steps part.
type RunTx interface {
	RunReadTx

	PutRun(r *Run) error

	// AppendMessages appends messages to their thread, setting each Index to
	// the next position in that thread (one sequence for all namespaces).
	// A message's Parts are kept as they are: nil stays nil (the content is
	// the text alone).
	AppendMessages(msgs ...*Message) error

	// PutCheckpoint stores a new checkpoint. Storing a version that exists
	// for the run is an ECONFLICT error.
	PutCheckpoint(c *Checkpoint) error

	PutInterrupt(i *Interrupt) error

	// ClaimRun takes the lease of a running run for holder inside the
	// transaction, as RunStore.ClaimRun does (a token one past the
	// previous claim's; the same refusals, which fail the Update), and
	// returns it without the state to resume from (ReadClaim reads it).
	// The Update that starts a run claims it, so its driver begins
	// without a transaction of its own; a claim rolled back with its
	// Update takes no token.
	ClaimRun(runID, holder string, ttl time.Duration) (Lease, error)
}

// LogReadTx reads the event log: append-only, with a global, strictly
// increasing Seq (Store.Update says when Seq is assigned).
type LogReadTx interface {
	// Events returns stored events with Seq > q.After, in Seq order, at most
	// q.Limit of them.
	Events(q EventQuery) ([]Event, error)
	// LastSeq returns the highest committed Seq, or 0.
	LastSeq() (int64, error)
}

// LogTx appends to the event log.
type LogTx interface {
	LogReadTx

	// Emit appends an event to the log. Seq and, when zero, Time are
	// assigned; the events are returned by Update after commit.
	Emit(e Event) error
}

// WorkspaceReadTx reads the workspace part: folder grants, attachment
// records and the threads' virtual files. (Memories are files in the data
// root, not in the Store; attachments' bytes are blobs beside it.)
type WorkspaceReadTx interface {
	Grant(id string) (*Grant, error)
	// Grants lists the owner's grants by Name.
	Grants(ownerID string) ([]*Grant, error)

	Attachment(id string) (*Attachment, error)
	// Attachments lists the attachments matching q, oldest first (then by
	// ID). A query with no field set is EINVALID.
	Attachments(q AttachmentQuery) ([]*Attachment, error)

	// File returns the latest version of a path in the thread's virtual
	// filesystem, with its Data; ENOTFOUND when there is none or the
	// latest version deleted it.
	File(threadID, path string) (*File, error)
	// Files returns the thread's virtual files as of upTo messages: for
	// each path its latest version with Seq <= upTo (any Seq when upTo <
	// 0), left out when that version deleted it; ordered by Path, with
	// Data when withData.
	Files(threadID string, upTo int, withData bool) ([]*File, error)
	// FileVersions returns every stored version of the thread's virtual
	// files with Seq <= upTo, deletions included, with Data, ordered by
	// Path then Seq: the history a fork copies.
	FileVersions(threadID string, upTo int) ([]*File, error)
}

// WorkspaceTx writes the workspace part.
type WorkspaceTx interface {
	WorkspaceReadTx

	// PutGrant inserts or replaces a grant; DeleteGrant removes one
	// (ENOTFOUND when there is none).
	PutGrant(g *Grant) error
	DeleteGrant(id string) error

	// PutAttachment inserts or replaces an attachment record;
	// DeleteAttachment removes one (ENOTFOUND when there is none).
	PutAttachment(a *Attachment) error
	DeleteAttachment(id string) error

	// PutFile stores a version of a virtual file; a version of the same
	// thread, path and Seq is replaced. ENOTFOUND for an unknown thread.
	PutFile(f *File) error
}

// SettingsReadTx reads the owners' settings. (Plugins' key/value data is
// the other half of this part, outside transactions: KVStore.)
type SettingsReadTx interface {
	// Settings returns the owner's stored settings, ENOTFOUND when they
	// never stored any.
	Settings(ownerID string) (*Settings, error)
}

// SettingsTx writes the owners' settings.
type SettingsTx interface {
	SettingsReadTx

	// PutSettings stores s as its owner's settings.
	PutSettings(s *Settings) error
}

// ThreadQuery filters Threads. OwnerID is required. FolderID "" means any
// folder; NoFolder lists only threads in no folder. Limit <= 0 means 50; at
// most 500.
//
// Search, when it has terms (SearchTerms), lists only the threads whose
// title or the text of a user or assistant message has a word starting
// with each term, ignoring case and diacritics (the rules in search.go),
// ranked by relevance (best first; ties by ID) instead of the list order,
// each with its Match: where the best match is and its Highlight. A
// Search without terms matches nothing.
type ThreadQuery struct {
	OwnerID  string
	FolderID string
	NoFolder bool
	Search   string
	Limit    int
	Cursor   string
}

// RunQuery filters Runs. Empty fields match everything; Limit <= 0 means
// no limit. Newest orders newest first; Cursor continues a list where the
// page before it ended (a cursor from the same query).
type RunQuery struct {
	ThreadID string
	OwnerID  string
	Statuses []RunStatus
	Limit    int
	Newest   bool
	Cursor   string
}

// InterruptQuery filters Interrupts. Empty fields match everything.
type InterruptQuery struct {
	RunID    string
	ThreadID string
	OwnerID  string
	Status   string
	Limit    int
}

// InboxQuery selects a queue (QueueUnread or QueueAction) for an owner.
// Limit <= 0 means 50; at most 500. Search keeps the items whose thread
// matches it as ThreadQuery.Search says (and Action items whose tool name
// starts with a term), in the queue's order, each with its Match.
type InboxQuery struct {
	OwnerID string
	Queue   string
	Search  string
	Limit   int
	Cursor  string
}

// EventQuery selects stored events after a Seq. ThreadID and OwnerID filter
// when set. Limit <= 0 means 500.
type EventQuery struct {
	After    int64
	ThreadID string
	OwnerID  string
	Limit    int
}

// Clock returns the current time; Stores and the engine take one so tests
// can fix it.
type Clock func() time.Time
