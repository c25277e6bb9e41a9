package main

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
	cmd.AddCommand(newSkillsListCmd(a), newSkillsShowCmd(a), newSkillsWriteCmd(a), newSkillsImportCmd(a), newSkillsRemoveCmd(a))
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
				t.add(s.Name, origin, ready, truncate(s.Description, 80))
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

func newSkillsWriteCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "write NAME [FILE|-]",
		Short: "Create or replace a custom skill from a SKILL.md file or standard input",
		Long: `Write <data>/skills/NAME/SKILL.md on the server. A SKILL.md that does not
parse is refused with its line and reason, and nothing changes. A custom
skill shadows a plugin's or a built-in one of the same name.`,
		Example: `  kiln skills write release-notes SKILL.md`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || len(args) > 2 {
				return usageError{fmt.Errorf("%s takes NAME [FILE|-]", cmd.CommandPath())}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			file := "-"
			if len(args) == 2 {
				file = args[1]
			}
			content, err := readFileOrStdin(cmd, file)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			s, err := c.PutSkill(cmd.Context(), args[0], content)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Wrote the skill %s.\n", s.Name)
			if !s.Ready {
				fmt.Fprintf(cmd.OutOrStdout(), "It is not ready: %s\n", s.NotReady)
			}
			for _, w := range s.Warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: SKILL.md:%d: %s\n", w.Line, w.Message)
			}
			return nil
		},
	}
}

func newSkillsRemoveCmd(a *app) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"delete"},
		Short:   "Delete a custom skill (a plugin's or built-in one of the name comes back)",
		Args:    needArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			err = confirmDestructive(cmd, yes, destructive{
				action:   "deleting the skill " + args[0],
				question: func() (string, error) { return fmt.Sprintf("Delete the custom skill %s and its folder?", args[0]), nil },
				declined: "Not deleted.",
			})
			if err != nil {
				return err
			}
			if err := c.DeleteSkill(cmd.Context(), args[0]); err != nil {
				return err
			}
			if !a.jsonOutput() {
				fmt.Fprintf(cmd.OutOrStdout(), "Deleted the skill %s.\n", args[0])
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	return cmd
}

func newSkillsImportCmd(a *app) *cobra.Command {
	var replace bool
	cmd := &cobra.Command{
		Use:   "import DIR|ZIP",
		Short: "Import a custom skill from a folder or a zip archive",
		Long: `Import a skill: a folder holding SKILL.md (and scripts/, references/,
assets/ ...), or a zip of one. A folder is packed on this machine; links
in it are refused. The server checks every entry and the SKILL.md, and
keeps nothing when a check fails. --replace overwrites a custom skill of
the same name.`,
		Args: needArgs("DIR|ZIP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			archive, err := skillArchive(args[0])
			if err != nil {
				return localError{err: err}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			s, err := c.ImportSkill(cmd.Context(), archive, replace)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Imported the skill %s.\n", s.Name)
			if !s.Ready {
				fmt.Fprintf(cmd.OutOrStdout(), "It is not ready: %s\n", s.NotReady)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&replace, "replace", false, "overwrite a custom skill of the same name")
	return cmd
}

// skillArchive is the zip to upload for path: the file itself, or a
// folder packed with its files under the folder's name.
func skillArchive(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return os.ReadFile(path)
	}
	root := filepath.Clean(path)
	base := filepath.Base(root)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is not a regular file (links are not imported)", p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		w, err := zw.Create(base + "/" + filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
