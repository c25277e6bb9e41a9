package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fatih/color"
	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/core"
)

// style colours text for a terminal and leaves it plain otherwise.
type style struct{ on bool }

// styleFor returns the style for output to w: colour only when w is a
// terminal, NO_COLOR is unset or empty and TERM is not "dumb".
func styleFor(w io.Writer) style {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return style{}
	}
	return style{on: isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())}
}

func (s style) paint(text string, attrs ...color.Attribute) string {
	if !s.on || text == "" {
		return text
	}
	c := color.New(attrs...)
	c.EnableColor()
	return c.Sprint(text)
}

func (s style) bold(t string) string   { return s.paint(t, color.Bold) }
func (s style) dim(t string) string    { return s.paint(t, color.Faint) }
func (s style) red(t string) string    { return s.paint(t, color.FgRed) }
func (s style) green(t string) string  { return s.paint(t, color.FgGreen) }
func (s style) yellow(t string) string { return s.paint(t, color.FgYellow) }
func (s style) cyan(t string) string   { return s.paint(t, color.FgCyan) }

// snippet shows a search match's snippet on one line, at most n
// characters: the matching words bold and yellow on a terminal, in
// [brackets] otherwise.
func (s style) snippet(m *core.SearchMatch, n int) string {
	if m == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range m.Snippet {
		text := []rune(strings.Join(strings.FieldsFunc(p.Text, unicode.IsSpace), " "))
		if len(text) > 0 && unicode.IsSpace([]rune(p.Text)[0]) {
			text = append([]rune{' '}, text...)
		}
		if r := []rune(p.Text); len(text) > 0 && unicode.IsSpace(r[len(r)-1]) {
			text = append(text, ' ')
		}
		cut := len(text) > n
		if cut {
			text = append(text[:max(n-1, 0)], '…')
		}
		n -= len(text)
		switch {
		case !p.Match:
			b.WriteString(string(text))
		case s.on:
			b.WriteString(s.paint(string(text), color.Bold, color.FgYellow))
		default:
			b.WriteString("[" + string(text) + "]")
		}
		if cut || n <= 0 {
			break
		}
	}
	return b.String()
}

// status colours a run or thread status by what it means for the user.
func (s style) status(st string) string {
	switch st {
	case string(core.RunSucceeded):
		return s.green(st)
	case string(core.RunFailed):
		return s.red(st)
	case string(core.RunInterrupted):
		return s.yellow(st)
	case string(core.RunRunning):
		return s.cyan(st)
	case string(core.RunQueued), string(core.RunCancelled), core.ThreadIdle:
		return s.dim(st)
	}
	return st
}

// ansi matches the colour escapes style writes.
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// width is the number of terminal columns s takes, ignoring colour.
func width(s string) int { return utf8.RuneCountInString(ansi.ReplaceAllString(s, "")) }

// table writes aligned columns separated by two spaces. Cells may be
// coloured; the last column is not padded.
type table struct {
	st     style
	header []string
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) render(w io.Writer) {
	widths := make([]int, len(t.header))
	for _, row := range append([][]string{t.header}, t.rows...) {
		for i, c := range row {
			widths[i] = max(widths[i], width(c))
		}
	}
	line := func(cells []string, paint func(string) string) {
		var b strings.Builder
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(paint(c))
			if i < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-width(c)))
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(t.header, t.st.dim)
	for _, row := range t.rows {
		line(row, func(s string) string { return s })
	}
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONLine writes v as one line of JSON, for streams.
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// ago formats t relative to now: "just now", "3m ago", "2h ago", "5d ago",
// then a date.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	case d < 30*24*time.Hour:
		return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
	case t.Year() == now.Year():
		return t.Local().Format("Jan 2")
	}
	return t.Local().Format("Jan 2, 2006")
}

// duration formats d compactly: "45s", "3m12s", "2h5m", "3d4h".
func duration(d time.Duration) string {
	switch d = d.Round(time.Second); {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// truncate shortens s to at most n runes, on one line.
func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// compactJSON returns raw JSON on one line, or "{}" when empty.
func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,/:=@+%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// noArgs refuses positional arguments.
func noArgs(cmd *cobra.Command, args []string) error { return needArgs()(cmd, args) }

// needArgs requires exactly the named positional arguments.
func needArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < len(names):
			return usageError{fmt.Errorf("missing %s", strings.Join(names[len(args):], " and "))}
		case len(args) > len(names) && len(names) == 0:
			return usageError{fmt.Errorf("%s takes no arguments, got %q", cmd.CommandPath(), args)}
		case len(args) > len(names):
			return usageError{fmt.Errorf("too many arguments: %s takes %s", cmd.CommandPath(), strings.Join(names, " "))}
		}
		return nil
	}
}

// atLeastOne requires one or more of the named positional argument.
func atLeastOne(name string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) == 0 {
			return usageError{fmt.Errorf("missing %s", name)}
		}
		return nil
	}
}

// parentCmd makes cmd, a command that only groups subcommands, print its
// help when run alone and refuse unknown subcommands.
func parentCmd(cmd *cobra.Command) *cobra.Command {
	cmd.SuggestionsMinimumDistance = 2
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return usageError{errors.New(msg)}
	}
	cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	return cmd
}
