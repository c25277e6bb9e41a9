package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/sandboxruntime"
	"github.com/kilnhq/kiln/sdk/client"
)

// settingKeys are the keys of kiln settings set, with what they take.
var settingKeys = []struct{ key, takes string }{
	{"prompt_addendum", "text added to every run's system prompt"},
	{"memory", "on or off: long-term memory"},
	{"theme", "system, light or dark: the web UI's"},
	{"max_steps", "default step limit of a run; 0 is the server's"},
	{"max_tool_calls", "default tool call limit of a run; 0 is the server's"},
	{"sandbox_runtime", "runtime of the sandboxes created without one (an enabled sandbox-runtime plugin); empty is the server's"},
}

// settingValues are the values of the settings that take one of a few.
var settingValues = map[string][]string{
	"memory": {"on", "off"},
	"theme":  {core.ThemeSystem, core.ThemeLight, core.ThemeDark},
}

func newSettingsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "settings",
		Short: "Show your settings: prompt addendum, memory, theme, default limits, sandbox runtime",
		Long: `Show your settings: the prompt addendum added to every run's system prompt,
whether long-term memory is on, the web UI's theme, the limits of runs
that set none, and the runtime of the sandboxes created without one.
Change them with 'kiln settings set'.`,
	}
	parentCmd(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := a.client()
		if err != nil {
			return err
		}
		st, err := c.Settings(cmd.Context())
		if err != nil {
			return err
		}
		return a.printSettings(cmd.Context(), cmd.OutOrStdout(), c, st)
	}
	cmd.AddCommand(newSettingsSetCmd(a))
	return cmd
}

// printSettings writes settings as JSON or for a human; a sandbox
// runtime that is not enabled (c's plugins say) is marked so.
func (a *app) printSettings(ctx context.Context, w io.Writer, c *client.Client, s *core.Settings) error {
	if a.jsonOutput() {
		return writeJSON(w, s)
	}
	st := styleFor(w)
	field := func(name, value string) { fmt.Fprintf(w, "%-16s %s\n", name+":", value) }
	limit := func(n int) string {
		if n == 0 {
			return st.dim("server default")
		}
		return strconv.Itoa(n)
	}
	memory := "off"
	if s.Memory {
		memory = "on"
	}
	field("Memory", memory)
	field("Theme", s.Theme)
	field("Max steps", limit(s.Limits.MaxSteps))
	field("Max tool calls", limit(s.Limits.MaxToolCalls))
	if s.SandboxRuntime == "" {
		field("Sandbox runtime", st.dim("server default"))
	} else if runtimes, err := enabledSandboxRuntimes(ctx, c); err == nil && !slices.Contains(runtimes, s.SandboxRuntime) {
		field("Sandbox runtime", s.SandboxRuntime+" "+st.yellow("(not enabled: sandboxes created without a runtime get the server's default)"))
	} else {
		field("Sandbox runtime", s.SandboxRuntime)
	}
	if s.PromptAddendum == "" {
		field("Prompt addendum", st.dim("none"))
	} else {
		fmt.Fprintln(w, "Prompt addendum:")
		fmt.Fprintln(w, indent(s.PromptAddendum, "  "))
	}
	if !s.UpdatedAt.IsZero() {
		field("Updated", ago(s.UpdatedAt, time.Now()))
	}
	return nil
}

// settingNames lists the keys of kiln settings set.
func settingNames() []string {
	keys := make([]string, len(settingKeys))
	for i, k := range settingKeys {
		keys[i] = k.key
	}
	return keys
}

func newSettingsSetCmd(a *app) *cobra.Command {
	var addendumFile string
	var help strings.Builder
	for _, k := range settingKeys {
		fmt.Fprintf(&help, "  %-16s %s\n", k.key, k.takes)
	}
	cmd := &cobra.Command{
		Use:   "set KEY=VALUE...",
		Short: "Change settings",
		Long: "Change settings; the others keep their values. The keys:\n\n" + help.String() + `
--addendum-file sets the prompt addendum from a file ("-" for standard
input); prompt_addendum= with nothing after it clears the addendum.`,
		Example: `  kiln settings set memory=on theme=dark
  kiln settings set max_steps=50
  kiln settings set sandbox_runtime=bwrap
  kiln settings set --addendum-file instructions.md
  kiln settings set prompt_addendum=`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && addendumFile == "" {
				return usageError{fmt.Errorf("nothing to set: give KEY=VALUE, with a KEY of %s", orList(settingNames()))}
			}
			return nil
		},
		ValidArgsFunction: a.completeSettings,
		RunE: func(cmd *cobra.Command, args []string) error {
			patch, limits, err := parseSettings(args)
			if err != nil {
				return err
			}
			if addendumFile != "" {
				if patch.PromptAddendum != nil {
					return usageError{errors.New("give the prompt addendum once: as prompt_addendum= or with --addendum-file")}
				}
				text, err := readFileOrStdin(cmd, addendumFile)
				if err != nil {
					return err
				}
				patch.PromptAddendum = &text
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if len(limits) > 0 {
				// The limits are replaced as a whole: keep the one not named.
				cur, err := c.Settings(ctx)
				if err != nil {
					return err
				}
				l := cur.Limits
				if n, ok := limits["max_steps"]; ok {
					l.MaxSteps = n
				}
				if n, ok := limits["max_tool_calls"]; ok {
					l.MaxToolCalls = n
				}
				patch.Limits = &l
			}
			st, err := c.UpdateSettings(ctx, patch)
			if err != nil {
				return err
			}
			return a.printSettings(ctx, cmd.OutOrStdout(), c, st)
		},
	}
	cmd.Flags().StringVar(&addendumFile, "addendum-file", "", `set the prompt addendum from this file ("-" for standard input)`)
	return cmd
}

// parseSettings reads KEY=VALUE arguments into a patch and the limits
// they name; an unknown key, a key given twice or a bad value is a usage
// error.
func parseSettings(args []string) (core.SettingsPatch, map[string]int, error) {
	keys := settingNames()
	var p core.SettingsPatch
	limits := map[string]int{}
	seen := map[string]bool{}
	for _, arg := range args {
		key, value, ok := strings.Cut(arg, "=")
		if !ok {
			return p, nil, usageError{fmt.Errorf("%q: want KEY=VALUE, with a KEY of %s", arg, orList(keys))}
		}
		if !slices.Contains(keys, key) {
			return p, nil, usageError{fmt.Errorf("unknown setting %q: the settings are %s", key, orList(keys))}
		}
		if seen[key] {
			return p, nil, usageError{fmt.Errorf("%s is given twice", key)}
		}
		seen[key] = true
		switch key {
		case "prompt_addendum":
			p.PromptAddendum = &value
		case "memory":
			on, err := parseSwitch(value)
			if err != nil {
				return p, nil, usageError{fmt.Errorf("memory=%s: %w", value, err)}
			}
			p.Memory = &on
		case "theme":
			p.Theme = &value
		case "sandbox_runtime":
			p.SandboxRuntime = &value
		case "max_steps", "max_tool_calls":
			n, err := strconv.Atoi(value)
			if err != nil || n < 0 {
				return p, nil, usageError{fmt.Errorf("%s=%s: want a whole number, 0 for the server's default", key, value)}
			}
			limits[key] = n
		}
	}
	return p, limits, nil
}

// enabledSandboxRuntimes lists the sandbox runtimes of the server's
// enabled plugins, sorted.
func enabledSandboxRuntimes(ctx context.Context, c *client.Client) ([]string, error) {
	ps, err := c.Plugins(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range ps {
		if p.Status == client.PluginEnabled {
			out = append(out, p.Provided[string(sandboxruntime.Name)]...)
		}
	}
	slices.Sort(out)
	return out, nil
}

// parseSwitch reads on/off, true/false, yes/no.
func parseSwitch(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "on", "true", "yes":
		return true, nil
	case "off", "false", "no":
		return false, nil
	}
	return false, errors.New("want on or off")
}

// orList joins words as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// readFileOrStdin reads a file, or standard input for "-", as text: it
// must be UTF-8.
func readFileOrStdin(cmd *cobra.Command, name string) (string, error) {
	var b []byte
	var err error
	if name == "-" {
		name = "standard input"
		if b, err = io.ReadAll(cmd.InOrStdin()); err != nil {
			return "", fmt.Errorf("read standard input: %w", err)
		}
	} else if b, err = os.ReadFile(name); err != nil {
		return "", localError{err: err}
	}
	if !utf8.Valid(b) {
		return "", localError{err: fmt.Errorf("%s is not UTF-8 text", name)}
	}
	return string(b), nil
}
