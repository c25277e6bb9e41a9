package core

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// SettingsPatch changes settings; nil fields stay as they are.
type SettingsPatch struct {
	PromptAddendum *string `json:"prompt_addendum"`
	Limits         *Limits `json:"limits"`
	Memory         *bool   `json:"memory"`
	Theme          *string `json:"theme"`
	// SandboxRuntime sets Settings.SandboxRuntime: an enabled sandbox
	// runtime (Config.SandboxRuntimes), or "" for the server's default.
	SandboxRuntime *string `json:"sandbox_runtime"`
}

// Settings returns p's settings (DefaultSettings when p never changed
// any).
func (s *Service) Settings(ctx context.Context, p Principal) (*Settings, error) {
	var st *Settings
	err := s.view(ctx, func(tx ReadTx) (err error) {
		st, err = settingsOf(tx, p.ID)
		return err
	})
	return st, err
}

func settingsOf(tx ReadTx, owner string) (*Settings, error) {
	st, err := tx.Settings(owner)
	if IsNotFound(err) {
		return DefaultSettings(owner), nil
	}
	return st, err
}

// UpdateSettings applies a patch to p's settings. EINVALID for an addendum
// over MaxPromptAddendum characters or with control characters, limits out
// of range, an unknown theme, or a sandbox runtime that is not enabled
// (the message lists those that are); nothing changes then.
func (s *Service) UpdateSettings(ctx context.Context, p Principal, patch SettingsPatch) (*Settings, error) {
	if a := patch.PromptAddendum; a != nil {
		if n := utf8.RuneCountInString(*a); n > MaxPromptAddendum {
			return nil, Errorf(EINVALID, "prompt_addendum is %d characters; the limit is %d", n, MaxPromptAddendum)
		}
		if err := CheckText("prompt_addendum", *a, true); err != nil {
			return nil, err
		}
	}
	if l := patch.Limits; l != nil {
		if l.MaxSteps < 0 || l.MaxSteps > CapSteps || l.MaxToolCalls < 0 || l.MaxToolCalls > CapToolCalls {
			return nil, Errorf(EINVALID, "limits must be between 0 (the server's default) and %d", CapSteps)
		}
	}
	if t := patch.Theme; t != nil && !slices.Contains([]string{ThemeSystem, ThemeLight, ThemeDark}, *t) {
		return nil, Errorf(EINVALID, "theme %q: want system, light or dark", *t)
	}
	if r := patch.SandboxRuntime; r != nil {
		name := strings.TrimSpace(*r)
		if err := s.checkSandboxRuntime(name); err != nil {
			return nil, err
		}
		patch.SandboxRuntime = &name
	}
	var st *Settings
	err := s.update(ctx, func(tx Tx) (err error) {
		if st, err = settingsOf(tx, p.ID); err != nil {
			return err
		}
		if patch.PromptAddendum != nil {
			st.PromptAddendum = strings.TrimSpace(*patch.PromptAddendum)
		}
		if patch.Limits != nil {
			st.Limits = *patch.Limits
		}
		if patch.Memory != nil {
			st.Memory = *patch.Memory
		}
		if patch.Theme != nil {
			st.Theme = *patch.Theme
		}
		if patch.SandboxRuntime != nil {
			st.SandboxRuntime = *patch.SandboxRuntime
		}
		st.UpdatedAt = s.now()
		return tx.PutSettings(st)
	})
	return st, err
}

// checkSandboxRuntime refuses (EINVALID) a sandbox_runtime that is
// neither "" nor one of the runtimes enabled now.
func (s *Service) checkSandboxRuntime(name string) error {
	if name == "" {
		return nil
	}
	var enabled []string
	if s.cfg.SandboxRuntimes != nil {
		enabled = s.cfg.SandboxRuntimes()
	}
	switch {
	case slices.Contains(enabled, name):
		return nil
	case len(enabled) == 0:
		return Errorf(EINVALID, "sandbox_runtime %q: no sandbox runtime is enabled on this server (enable the plugin of one, or give \"\" for the server's default)", name)
	}
	return Errorf(EINVALID, "sandbox_runtime %q: no such sandbox runtime is enabled; the enabled ones are %s (or \"\" for the server's default)", name, strings.Join(enabled, ", "))
}

// PromptInput is what a run's system prompt is built from.
type PromptInput struct {
	Now           time.Time
	Tools         []ToolSpec
	Grants        []*Grant
	WorkingFolder *Grant
	Memory        bool
	Addendum      string
	System        string
}

// SystemPrompt builds a run's system prompt: Kiln's short base prompt
// (what Kiln is, the tools, the folder grants, the working folder, today's
// date, and long-term memory when it is on), then the owner's addendum,
// then the run's own system text.
func SystemPrompt(in PromptInput) string {
	var b strings.Builder
	b.WriteString("You are an agent running inside Kiln, an inbox for long-running work: the user started this task and may not be watching. " +
		"Work until the task is done, then give a short final answer saying what you did and what is left. " +
		"Tool calls may be held for the user's approval; a rejected call comes back as a failed result with the reason.\n")
	fmt.Fprintf(&b, "\nToday is %s (%s).\n", in.Now.Format("Monday, 2 January 2006"), in.Now.Format("2006-01-02 15:04 MST"))
	if len(in.Tools) > 0 {
		names := make([]string, len(in.Tools))
		for i, t := range in.Tools {
			names[i] = t.Name
		}
		fmt.Fprintf(&b, "\nTools: %s.\n", strings.Join(names, ", "))
	}
	if hasFileTools(in.Tools) {
		b.WriteString("\nFiles: the file tools (ls, read_file, write_file, edit_file, glob, grep) see one filesystem. " +
			"Paths outside the mounts below are this thread's own virtual files: they are kept with the conversation, not on the user's disk. " +
			"/attachments/<id>/<name> holds the files the user attached.\n")
		if len(in.Grants) == 0 {
			b.WriteString("The user has granted no local folders.\n")
		} else {
			b.WriteString("Local folders the user granted (writes to them wait for the user's approval):\n")
			for _, g := range in.Grants {
				mode := "read-only"
				if g.Writable {
					mode = "writable"
				}
				fmt.Fprintf(&b, "- /grants/%s/ (%s)\n", g.Name, mode)
			}
		}
		if w := in.WorkingFolder; w != nil {
			fmt.Fprintf(&b, "The working folder of this run is /grants/%s/; relative paths resolve there.\n", w.Name)
		}
		if in.Memory {
			b.WriteString("Long-term memory is on: /memories/ holds markdown notes that last across threads. " +
				"Read the ones that look relevant before you start; write down what is worth remembering for later tasks (writes wait for approval).\n")
		}
	}
	if a := strings.TrimSpace(in.Addendum); a != "" {
		b.WriteString("\nThe user's instructions for every run:\n")
		b.WriteString(a)
		b.WriteString("\n")
	}
	if sys := strings.TrimSpace(in.System); sys != "" {
		b.WriteString("\nInstructions for this run:\n")
		b.WriteString(sys)
		b.WriteString("\n")
	}
	return b.String()
}

func hasFileTools(tools []ToolSpec) bool {
	return slices.ContainsFunc(tools, func(t ToolSpec) bool { return t.Name == "read_file" })
}
