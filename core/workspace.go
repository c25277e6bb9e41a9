package core

import "time"

// Grant is a local folder its owner lets runs reach, mounted in every
// run's file view at /grants/<Name>/. Path is the folder's real path
// (absolute, symlinks resolved) as it was when granted; every access
// resolves again inside it and refuses what leads out (see
// plugins/grantfs). Read-only unless Writable.
type Grant struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Path     string `json:"path"`
	Writable bool   `json:"writable"`
	// DataRoot records that the owner acknowledged granting Kiln's data
	// root or a folder that overlaps it.
	DataRoot  bool      `json:"data_root,omitempty"`
	OwnerID   string    `json:"owner_id"`
	CreatedAt time.Time `json:"created_at"`
}

// Themes the web UI offers.
const (
	ThemeSystem = "system"
	ThemeLight  = "light"
	ThemeDark   = "dark"
)

// MaxPromptAddendum is the longest prompt addendum, in characters.
const MaxPromptAddendum = 8000

// Settings are an owner's preferences: a prompt addendum appended to
// Kiln's base prompt, the default limits of runs that set none, whether
// long-term memory is on, the web UI's theme, and the sandbox runtime of
// the sandboxes they create without naming one.
type Settings struct {
	OwnerID        string `json:"-"`
	PromptAddendum string `json:"prompt_addendum"`
	Limits         Limits `json:"limits"`
	Memory         bool   `json:"memory"`
	Theme          string `json:"theme"`
	// SandboxRuntime names the sandbox runtime (the ID of a
	// sandbox-runtime plugin) of the owner's sandboxes created without
	// one: over the sandbox API and their agents' thread sandboxes. ""
	// leaves it to the server ($KILN_SANDBOX_RUNTIME, else the first
	// built-in runtime enabled). While it names a runtime that is no
	// longer enabled, those sandboxes go to the server's default.
	SandboxRuntime string    `json:"sandbox_runtime"`
	UpdatedAt      time.Time `json:"updated_at,omitzero"`
}

// DefaultSettings are the settings of an owner who never changed any:
// memory off, the system theme, the engine's limits.
func DefaultSettings(ownerID string) *Settings {
	return &Settings{OwnerID: ownerID, Theme: ThemeSystem}
}

// Attachment is a file the owner uploaded to send with a message. Its
// bytes are stored once per content (by SHA256) outside the database; a
// message refers to it as "attachment://<ID>" and checkpoints never hold
// the bytes. ThreadID is "" until a run's input uses it; the attachment
// is then the thread's and is deleted with it.
type Attachment struct {
	ID        string    `json:"id"`
	OwnerID   string    `json:"owner_id"`
	ThreadID  string    `json:"thread_id,omitempty"`
	Name      string    `json:"name"`
	MIME      string    `json:"mime_type"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"`
	CreatedAt time.Time `json:"created_at"`
}

// AttachmentURI is the URI of an attachment in a message part.
func AttachmentURI(id string) string { return "attachment://" + id }

// AttachmentQuery filters Attachments; empty fields match everything, but
// at least one must be set.
type AttachmentQuery struct {
	OwnerID  string
	ThreadID string
	SHA256   string
}

// File is one version of a file in a thread's virtual filesystem: the
// files runs write outside any grant, which belong to the thread and are
// committed with the step that wrote them. Path is absolute and clean
// ("/notes/plan.md"). Seq is the number of the thread's messages when the
// version was committed, so the files as of a message are the latest
// versions with Seq up to it (what a fork copies). Deleted marks a
// version that removed the file.
type File struct {
	ThreadID  string    `json:"-"`
	Path      string    `json:"path"`
	Data      []byte    `json:"-"`
	Size      int       `json:"size"`
	Seq       int       `json:"seq"`
	RunID     string    `json:"run_id,omitempty"`
	Deleted   bool      `json:"-"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Limits of the virtual filesystem.
const (
	MaxFileSize    = 1 << 20  // bytes in one virtual file
	MaxThreadFiles = 32 << 20 // bytes in a thread's virtual files
)
