package core

import (
	"context"
	"encoding/json"
	"io"
)

// CallEnv is what a tool call knows of the run it serves: whose it is, the
// owner's folder grants and settings as they are when the call starts (so
// a revoked grant is gone for the next call of a running run), the run's
// working folder, the thread's attachments and its virtual files. The
// engine puts one in every tool call's context (see CallEnvFrom).
type CallEnv struct {
	RunID    string
	ThreadID string
	OwnerID  string
	// Grants are the owner's folder grants, by name.
	Grants []*Grant
	// WorkingFolder is the run's working folder (one of Grants), or nil.
	WorkingFolder *Grant
	// Memory says whether long-term memory is on; MemoryDir is the folder
	// of the memory files (<data root>/memories).
	Memory    bool
	MemoryDir string
	// Attachments are the thread's attachments; OpenAttachment reads one's
	// bytes.
	Attachments    []*Attachment
	OpenAttachment func(a *Attachment) (io.ReadCloser, error)
	// Files is the thread's virtual filesystem as the step sees it.
	Files VirtualFS
	// Skill is the skill a subagent's run follows (its files are the
	// subagent's to read), "" for a run the user started.
	Skill string
	// MaxResult is how many bytes of text the engine keeps of the call's
	// result (Config.MaxToolResult). The engine caps every result itself;
	// a tool that holds a large output may cap it sooner (CapResult) to
	// spare memory.
	MaxResult int
	// Commands are the patterns a subagent's commands must match
	// (RunAgent.Commands, CommandAllowed); empty, any command.
	Commands []string
}

// VirtualFS is a thread's virtual filesystem during a tool step: reads see
// the committed files and the step's own writes, and the writes are
// committed with the step's checkpoint, so a call cut off by a crash left
// none of them and runs again on a clean slate. Paths are absolute and
// clean ("/notes/plan.md"). It is safe for concurrent use.
type VirtualFS interface {
	// Read returns a file with its Data, or ENOTFOUND.
	Read(path string) (*File, error)
	// List returns every file, without Data, ordered by Path.
	List() ([]*File, error)
	// Write creates or replaces a file. EINVALID when the file is over
	// MaxFileSize, or the thread's files would be over MaxThreadFiles.
	Write(path string, data []byte) error
	// Delete removes a file; ENOTFOUND when there is none.
	Delete(path string) error
}

type callEnvKey struct{}

// WithCallEnv returns ctx carrying env, for a tool call.
func WithCallEnv(ctx context.Context, env *CallEnv) context.Context {
	return context.WithValue(ctx, callEnvKey{}, env)
}

// CallEnvFrom returns the CallEnv of the tool call ctx belongs to, or nil
// outside one.
func CallEnvFrom(ctx context.Context) *CallEnv {
	env, _ := ctx.Value(callEnvKey{}).(*CallEnv)
	return env
}

// LocalCaller is implemented by a tool some of whose calls change nothing
// but the thread's virtual files (see VirtualFS), which commit with the
// step's result. Such a call is held by no interruptOn rule and, whatever
// the tool's Spec says, runs again after a crash like an idempotent call:
// it had no effect that could outlive the step.
type LocalCaller interface {
	Local(args json.RawMessage) bool
}

// PageNoteRoom is the room PageSize leaves in a result for the note a
// paged read ends with (where to read on), in bytes.
const PageNoteRoom = 256

// PageSize is the most text a tool that reads in pages (read_file) may
// return in one call of ctx: limit, or less when the result the engine
// keeps (CallEnv.MaxResult, else DefaultMaxToolResult) could not hold it
// and its note of at most PageNoteRoom bytes. A page within it is never
// cut by the engine, so the note's offset to read on follows the last
// byte the model saw. It is at least 1.
func PageSize(ctx context.Context, limit int) int {
	keep := DefaultMaxToolResult
	if env := CallEnvFrom(ctx); env != nil && env.MaxResult > 0 {
		keep = env.MaxResult
	}
	return max(1, min(limit, keep-PageNoteRoom))
}
