package logs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/kilnhq/kiln/core"
)

// Defaults of Options.
const (
	DefaultMaxSizeMB  = 20
	DefaultMaxAgeDays = 14
	DefaultMaxFiles   = 10
)

// FileName is the name of the current log file in Options.Dir. Rotated
// files are named kiln-<UTC time>.log, gzipped to kiln-<UTC time>.log.gz
// shortly after they are rotated.
const FileName = "kiln.log"

// RootComponent is the component of records logged without one.
const RootComponent = "server"

// maxFollowers caps the log streams open at once.
const maxFollowers = 32

// Options configure a Log.
type Options struct {
	// Dir holds the log files (<data root>/logs); it is created 0700.
	Dir string
	// Level is the least level logged, to the file and to Text; nil
	// means slog.LevelInfo.
	Level slog.Leveler
	// MaxSizeMB is the size at which the current file is rotated; 0 means
	// DefaultMaxSizeMB. The file is also rotated by the first record of a
	// new day (UTC), so that MaxAgeDays applies to a quiet server too.
	MaxSizeMB int
	// MaxAgeDays removes rotated files older than this many days; 0 means
	// DefaultMaxAgeDays.
	MaxAgeDays int
	// MaxFiles is how many rotated files are kept besides the current
	// one; 0 means DefaultMaxFiles.
	MaxFiles int
	// Text, when set, also receives every record (redacted, with its
	// component): kiln serve's human-readable log on stderr. Its own
	// level applies to it.
	Text slog.Handler
	// Redactor scrubs every record before it is written anywhere; nil
	// still removes what looks like a credential.
	Redactor *core.Redactor
	// Now is the clock of the daily rotation; nil means time.Now.
	Now func() time.Time
}

// Log is the server log: JSON records in Options.Dir, rotated by size and
// by day and kept by count and by age, that can be queried newest first
// (Query) and followed as they are written (Follow). Every record passes
// the redactor before it reaches the file, the text handler or a
// follower, and carries a "component" attribute.
type Log struct {
	logger *slog.Logger
	sink   *sink
	dir    string
}

// Open creates the directory and opens the log. The file itself is opened
// by the first record. Errors are about the directory.
func Open(opts Options) (*Log, error) {
	if opts.Dir == "" {
		return nil, errors.New("logs: Dir is required")
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	if opts.Level == nil {
		opts.Level = slog.LevelInfo
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	path := filepath.Join(opts.Dir, FileName)
	s := &sink{
		path: path, now: opts.Now, subs: map[*Follower]struct{}{},
		file: &lumberjack.Logger{
			Filename:   path,
			MaxSize:    cmpOr(opts.MaxSizeMB, DefaultMaxSizeMB),
			MaxAge:     cmpOr(opts.MaxAgeDays, DefaultMaxAgeDays),
			MaxBackups: cmpOr(opts.MaxFiles, DefaultMaxFiles),
			Compress:   true,
		},
	}
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		s.day = day(fi.ModTime())
	}
	var h slog.Handler = slog.NewJSONHandler(s, &slog.HandlerOptions{Level: opts.Level})
	if opts.Text != nil {
		h = slog.NewMultiHandler(h, opts.Text)
	}
	h = Redacting(newComponentHandler(h), opts.Redactor)
	return &Log{logger: slog.New(h), sink: s, dir: opts.Dir}, nil
}

func cmpOr(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// Logger returns the logger that writes to the log. Give each part of the
// server its component: log.With("component", "core"); a later component
// replaces an earlier one instead of adding a second.
func (l *Log) Logger() *slog.Logger { return l.logger }

// Dir returns the directory of the log files.
func (l *Log) Dir() string { return l.dir }

// Close closes the file and ends every follower. Records logged after
// Close are dropped.
func (l *Log) Close() error { return l.sink.close() }

// sink is where the JSON handler writes: the rotating file and the
// followers. slog writes one record per Write.
type sink struct {
	path string
	now  func() time.Time

	mu     sync.Mutex
	file   *lumberjack.Logger
	day    string // UTC day of the last write to the current file
	subs   map[*Follower]struct{}
	closed bool
}

func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return len(p), nil
	}
	today := day(s.now())
	if s.day != "" && s.day != today {
		if err := s.file.Rotate(); err != nil {
			return 0, fmt.Errorf("rotate log file: %w", err)
		}
	}
	s.day = today
	n, err := s.file.Write(p)
	if len(s.subs) > 0 {
		line := slices.Clone(p)
		for f := range s.subs {
			f.offer(line)
		}
	}
	return n, err
}

func (s *sink) close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for f := range s.subs {
		f.end()
	}
	clear(s.subs)
	err := s.file.Close()
	s.mu.Unlock()
	s.awaitCompression(10 * time.Second)
	return err
}

// awaitCompression waits, at most d, until no rotated file is left
// uncompressed. Lumberjack gzips rotated files in the background and has no
// way to wait for it; a server that stops (or a test that removes the
// directory) right after a rotation would otherwise race it. A file left
// half compressed is compressed again at the next start.
func (s *sink) awaitCompression(d time.Duration) {
	dir, base := filepath.Dir(s.path), strings.TrimSuffix(filepath.Base(s.path), ".log")
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		plain, _ := filepath.Glob(filepath.Join(dir, base+"-*.log"))
		if len(plain) == 0 {
			return
		}
	}
}

// componentHandler keeps one top-level "component" attribute per logger:
// a With("component", x) replaces the component before it (slog would
// otherwise write both), and a record without one gets RootComponent. It
// sits under the redacting handler and above the outputs.
type componentHandler struct {
	base slog.Handler // the outputs, without any attribute or group
	comp string
	ops  []handlerOp // the attributes and groups added since base, in order
	h    slog.Handler
}

// handlerOp is one WithAttrs (group "") or WithGroup.
type handlerOp struct {
	group string
	attrs []slog.Attr
}

func newComponentHandler(base slog.Handler) *componentHandler {
	return (&componentHandler{base: base}).rebuild(RootComponent, nil)
}

// rebuild returns the handler for component comp with ops applied.
func (c *componentHandler) rebuild(comp string, ops []handlerOp) *componentHandler {
	h := c.base.WithAttrs([]slog.Attr{slog.String("component", comp)})
	for _, op := range ops {
		if op.group != "" {
			h = h.WithGroup(op.group)
		} else {
			h = h.WithAttrs(op.attrs)
		}
	}
	return &componentHandler{base: c.base, comp: comp, ops: ops, h: h}
}

// grouped reports whether a group is open, so that a "component" attribute
// is an ordinary one inside it.
func (c *componentHandler) grouped() bool {
	return slices.ContainsFunc(c.ops, func(op handlerOp) bool { return op.group != "" })
}

func (c *componentHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return c.h.Enabled(ctx, l)
}

func (c *componentHandler) Handle(ctx context.Context, r slog.Record) error {
	if c.grouped() {
		return c.h.Handle(ctx, r)
	}
	comp := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "component" && a.Value.Kind() == slog.KindString {
			comp = a.Value.String()
		}
		return true
	})
	if comp == "" {
		return c.h.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "component" {
			out.AddAttrs(a)
		}
		return true
	})
	return c.rebuild(comp, c.ops).h.Handle(ctx, out)
}

func (c *componentHandler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return c
	}
	if c.grouped() {
		return c.with(handlerOp{attrs: as})
	}
	comp := c.comp
	rest := make([]slog.Attr, 0, len(as))
	for _, a := range as {
		if a.Key == "component" && a.Value.Kind() == slog.KindString {
			comp = a.Value.String()
			continue
		}
		rest = append(rest, a)
	}
	ops := slices.Clip(c.ops)
	if len(rest) > 0 {
		ops = append(ops, handlerOp{attrs: rest})
	}
	if comp != c.comp {
		return c.rebuild(comp, ops)
	}
	return &componentHandler{base: c.base, comp: comp, ops: ops, h: c.h.WithAttrs(rest)}
}

func (c *componentHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return c
	}
	return c.with(handlerOp{group: name})
}

func (c *componentHandler) with(op handlerOp) *componentHandler {
	h := c.h
	if op.group != "" {
		h = h.WithGroup(op.group)
	} else {
		h = h.WithAttrs(op.attrs)
	}
	return &componentHandler{base: c.base, comp: c.comp, ops: append(slices.Clip(c.ops), op), h: h}
}
