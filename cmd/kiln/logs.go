package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fatih/color"
	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/sdk/client"
)

// Limits of kiln logs.
const (
	defaultLogLines = 50
	maxLogTail      = 1000    // the server's tail limit for a followed log
	maxLogLines     = 100_000 // what kiln logs pages through at most
)

var logLevels = []string{"debug", "info", "warn", "error"}

func newLogsCmd(a *app) *cobra.Command {
	var (
		follow                  bool
		level, component, since string
		grep                    string
		lines                   int
	)
	cmd := &cobra.Command{
		Use:   "logs",
		Short: "Show or follow the server's log",
		Long: `Show the server's newest log records (the newest last), or follow new
ones as they are written with -f, after the newest -n. Records are
redacted and never hold prompts, messages or tool arguments and results.

  --level L       records at level L or above: debug, info, warn or error
  --component C   one part of the server: core, web, registry, providers,
                  metrics, server; wasm or process for every plugin of that
                  kind, wasm:ID for one; a trailing * matches a prefix
  --since S       records from a duration ago (10m, 2h, 3d) or an RFC 3339
                  time (2026-03-01T12:00:00Z) on
  --grep TEXT     records whose message or an attribute value contains
                  TEXT, ignoring case

With -o json each record is one line of JSON, as the server wrote it.`,
		Example: `  kiln logs
  kiln logs --level warn --since 1h
  kiln logs -f --component wasm
  kiln logs --grep calc -n 200 -o json | jq -r .msg`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if level != "" && !slices.Contains(logLevels, strings.ToLower(level)) {
				return usageError{fmt.Errorf("--level must be debug, info, warn or error, not %q", level)}
			}
			switch {
			case follow && (lines < 0 || lines > maxLogTail):
				return usageError{fmt.Errorf("-n must be from 0 to %d with -f, not %d", maxLogTail, lines)}
			case !follow && (lines < 1 || lines > maxLogLines):
				return usageError{fmt.Errorf("-n must be from 1 to %d, not %d", maxLogLines, lines)}
			}
			var from time.Time
			if since != "" {
				var err error
				if from, err = parseSince(since, time.Now()); err != nil {
					return usageError{err}
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			p := &logPrinter{w: w, st: styleFor(w), json: a.jsonOutput(), compW: 8}
			ctx := cmd.Context()
			if follow {
				errw := cmd.ErrOrStderr()
				err := c.FollowLogs(ctx, client.LogFollowOptions{
					Level: level, Component: component, Since: from, Search: grep, Tail: lines,
					OnDropped: func(n int) {
						fmt.Fprintln(errw, styleFor(errw).yellow(fmt.Sprintf("… %d records dropped: the log was written faster than it was read", n)))
					},
				}, p.print)
				if errors.Is(err, io.EOF) {
					return errors.New("the server ended the log stream (it is shutting down or its log closed)")
				}
				return err
			}
			var recs []client.LogRecord
			opts := client.LogOptions{Level: level, Component: component, Since: from, Search: grep}
			for len(recs) < lines {
				opts.Limit = min(lines-len(recs), 1000)
				page, err := c.Logs(ctx, opts)
				if err != nil {
					return err
				}
				recs = append(recs, page.Records...)
				if page.NextCursor == "" {
					break
				}
				opts.Cursor = page.NextCursor
			}
			if len(recs) == 0 && !a.jsonOutput() {
				fmt.Fprintln(cmd.ErrOrStderr(), "No log records match.")
			}
			for _, r := range slices.Backward(recs) {
				if err := p.print(r); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "follow new records as they are written")
	f.StringVar(&level, "level", "", "records at this level or above: debug, info, warn, error")
	f.StringVar(&component, "component", "", "records of this component (core, web, registry, wasm, wasm:ID, prov*...)")
	f.StringVar(&since, "since", "", "records from a duration ago (10m, 2h, 3d) or an RFC 3339 time on")
	f.StringVar(&grep, "grep", "", "records whose message or an attribute contains this text, ignoring case")
	f.IntVarP(&lines, "lines", "n", defaultLogLines, "how many of the newest records to show (with -f: before following)")
	_ = cmd.RegisterFlagCompletionFunc("level", cobra.FixedCompletions(logLevels, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("component", cobra.FixedCompletions(
		[]string{"server", "core", "web", "registry", "providers", "metrics", "wasm", "process"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// parseSince reads --since: a duration before now (Go's units, and d for
// days) or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, perr := strconv.ParseFloat(days, 64)
		d, err = time.Duration(n*24*float64(time.Hour)), perr
	}
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("--since must be a duration such as 10m, 2h or 3d, or an RFC 3339 time such as 2026-03-01T12:00:00Z, not %q", s)
	}
	return now.Add(-d), nil
}

// logPrinter prints records one a line: JSON as the server wrote it, or
// local time, level, component, message and the attributes as key=value,
// the component column widening as wider ones come.
type logPrinter struct {
	w     io.Writer
	st    style
	json  bool
	compW int
}

func (p *logPrinter) print(r client.LogRecord) error {
	if p.json {
		_, err := fmt.Fprintf(p.w, "%s\n", compactJSON(r.Raw))
		return err
	}
	p.compW = max(p.compW, width(r.Component))
	var attrs []string
	flatAttrs(r.Raw, "", &attrs)
	line := p.st.dim(r.Time.Local().Format("2006-01-02 15:04:05.000")) + "  " + p.level(r.Level) + "  " +
		pad(p.st.cyan(r.Component), p.compW, false) + "  " + r.Message
	if len(attrs) > 0 {
		line += "  " + p.st.dim(strings.Join(attrs, " "))
	}
	_, err := fmt.Fprintln(p.w, line)
	return err
}

// level pads a level to five columns and colours it by severity.
func (p *logPrinter) level(l string) string {
	s := pad(l, 5, false)
	switch {
	case strings.HasPrefix(l, "ERROR"):
		return p.st.paint(s, color.FgRed, color.Bold)
	case strings.HasPrefix(l, "WARN"):
		return p.st.yellow(s)
	case strings.HasPrefix(l, "DEBUG"):
		return p.st.dim(s)
	}
	return s
}

// fixedLogKeys are the fields every record has, shown in their columns.
var fixedLogKeys = []string{"time", "level", "msg", "component"}

// flatAttrs appends a record's attributes in their order as key=value,
// groups flattened to group.key.
func flatAttrs(raw json.RawMessage, prefix string, out *[]string) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return
		}
		switch {
		case prefix == "" && slices.Contains(fixedLogKeys, key):
		case len(v) > 0 && v[0] == '{':
			flatAttrs(v, prefix+key+".", out)
		default:
			*out = append(*out, prefix+key+"="+attrText(v))
		}
	}
}

// attrText shows a JSON value: a string bare unless it needs quotes,
// anything else as compact JSON.
func attrText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) != nil {
		return compactJSON(v)
	}
	if s == "" || strings.ContainsAny(s, " \t\r\n\"=") {
		return strconv.Quote(s)
	}
	return s
}
