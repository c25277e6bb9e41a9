package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func newSkillsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "skills",
		Short: "List the skills and whether they are ready",
		Long: `Skills are SKILL.md files: custom ones in <data>/skills/<name>/ override a
plugin's, which override the built-in ones of the same name. A skill is
ready when every tool it names is connected. Edits on disk are picked up
without a restart.`,
	}
	parentCmd(cmd)
	cmd.AddCommand(newSkillsListCmd(a), newSkillsShowCmd(a))
	return cmd
}

func newSkillsListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the skills: origin, what each shadows, readiness; and the ones skipped",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.Skills(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, list)
			}
			st := styleFor(w)
			t := &table{st: st, header: []string{"NAME", "ORIGIN", "READY", "DESCRIPTION"}}
			for _, s := range list.Skills {
				origin := s.Origin
				if s.Source != "" {
					origin += " (" + s.Source + ")"
				}
				for _, sh := range s.Shadows {
					origin += ", over " + sh.Origin
				}
				ready := st.green("ready")
				if !s.Ready {
					ready = st.yellow("not ready: " + s.NotReady)
				}
				t.add(s.Name, origin, ready, clipLine(s.Description, 80))
			}
			if len(list.Skills) == 0 {
				fmt.Fprintln(w, "No skills.")
			} else {
				t.render(w)
			}
			for _, p := range list.Problems {
				fmt.Fprintf(cmd.ErrOrStderr(), "skipped %s (%s): %s:%d: %s\n", p.Name, p.Origin, p.Error.File, p.Error.Line, p.Error.Reason)
			}
			return nil
		},
	}
}

func newSkillsShowCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Print a skill: its frontmatter fields and its instructions",
		Args:  needArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			s, err := c.Skill(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, s)
			}
			fmt.Fprintf(w, "%s (%s)\n%s\n", s.Name, s.Origin, s.Description)
			if len(s.Tools) > 0 {
				fmt.Fprintf(w, "tools: %s\n", strings.Join(s.Tools, " "))
			}
			if !s.Ready {
				fmt.Fprintf(w, "not ready: %s\n", s.NotReady)
			}
			fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(s.Body))
			return nil
		},
	}
}

// clipLine is s on one line, at most n characters.
func clipLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
