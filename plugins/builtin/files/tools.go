package files

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"strings"

	"github.com/kilnhq/kiln/core"
)

// Tools returns the file tools without skill folders: ToolsWith(Options{}).
func Tools() []core.Tool { return ToolsWith(Options{}) }

// Options are what the file tools see beyond a call's core.CallEnv.
type Options struct {
	// SkillFiles returns the folder of the named skill, its root holding
	// SKILL.md, or false when there is none; it is called once per tool
	// call of a run whose CallEnv.Skill names a skill, and the tools show
	// that folder, read-only, at /skills/<name>/. A file system with
	// symbolic links must implement fs.ReadLinkFS (os.DirFS and fs.Sub of
	// it do), since the tools refuse links by fs.Lstat. Nil: no run sees
	// a skill's folder.
	SkillFiles func(name string) (fs.FS, bool)
}

// ToolsWith returns the file tools, ls, read_file, write_file, edit_file,
// glob and grep, over the view o completes. write_file and edit_file are
// core.LocalCallers.
func ToolsWith(o Options) []core.Tool {
	sk := o.SkillFiles
	return []core.Tool{
		&tool{spec: lsSpec, run: runLs, skills: sk},
		&tool{spec: readSpec, run: runRead, skills: sk},
		&writer{tool{spec: writeSpec, run: runWrite, skills: sk}},
		&writer{tool{spec: editSpec, run: runEdit, skills: sk}},
		&tool{spec: globSpec, run: runGlob, skills: sk},
		&tool{spec: grepSpec, run: runGrep, skills: sk},
	}
}

// ReadOnly are the names of the file tools that change nothing: a
// subagent may always call them, to read its skill's folder.
var ReadOnly = []string{"ls", "read_file", "glob", "grep"}

// viewHelp is the part of every description that explains the view.
const viewHelp = "Paths: /grants/<name>/... are the folders the user granted (read-only unless granted writable); " +
	"/memories/<name>.md are long-term memory files, when memory is on; /attachments/<id>/<name> are the thread's attachments (read-only); " +
	"/skills/<name>/ is, for a subagent that follows a skill, that skill's folder (read-only); " +
	"any other absolute path is the thread's own scratch files, kept with the thread. " +
	"A relative path starts in the run's working folder (/grants/<name>/) or, without one, at /. " +
	"Host paths such as /etc or /home are never reachable, and paths may not contain \"..\"."

// tool is a file tool: its spec and what a call runs. run returns the
// text shown to the model, or an error: a *core.Error is the tool's own
// failure, shown to the model; anything else is a failure to run it.
type tool struct {
	spec   core.ToolSpec
	run    func(ctx context.Context, env *view, args json.RawMessage) (string, error)
	skills func(name string) (fs.FS, bool) // Options.SkillFiles
}

// view is what one call sees: its run's CallEnv and, for a subagent that
// follows a skill, that skill's folder.
type view struct {
	*core.CallEnv
	// skill is the folder of CallEnv.Skill, nil when the run follows no
	// skill or its folder is not to be had.
	skill fs.FS
}

// Spec describes the tool.
func (t *tool) Spec() core.ToolSpec { return t.spec }

// Call runs the tool over the view of the run the call belongs to
// (core.CallEnvFrom), with its skill's folder when it follows one; outside
// a run it fails.
func (t *tool) Call(ctx context.Context, args json.RawMessage) (core.ToolResult, error) {
	env := core.CallEnvFrom(ctx)
	if env == nil {
		return core.ErrorResult(t.spec.Name + " needs a run: it was called without one (no call environment)"), nil
	}
	v := &view{CallEnv: env}
	if env.Skill != "" && t.skills != nil {
		if fsys, ok := t.skills(env.Skill); ok {
			v.skill = fsys
		}
	}
	out, err := t.run(ctx, v, args)
	if err == nil {
		return core.TextResult(out), nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return core.ToolResult{}, cerr
	}
	var ce *core.Error
	if errors.As(err, &ce) {
		return core.ErrorResult(ce.Message), nil
	}
	return core.ToolResult{}, err
}

// writer is a tool that writes one file, named by its "path" argument.
type writer struct{ tool }

// Local reports whether the call only changes the thread's virtual files:
// its path is absolute and outside the mounts and the host's root names
// (so a refused host path is not local either). A relative path is never
// local: what it names depends on the run's working folder, which args do
// not tell, so such a call is held like a write to a grant.
func (w *writer) Local(args json.RawMessage) bool {
	var a struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(args, &a) != nil || !strings.HasPrefix(a.Path, "/") {
		return false
	}
	segs, err := segments(a.Path)
	return err == nil && len(segs) > 0 && !reserved(segs[0])
}

// decode decodes a call's arguments into v.
func decode(name string, args json.RawMessage, v any) error {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if err := json.Unmarshal(args, v); err != nil {
		return core.Errorf(core.EINVALID, "%s: the arguments do not match the schema: %v", name, err)
	}
	return nil
}

// Interface guards.
var (
	_ core.Tool        = (*tool)(nil)
	_ core.LocalCaller = (*writer)(nil)
)
