package process

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// slogHCLog adapts a *slog.Logger to the hclog.Logger go-plugin logs
// through (its own messages and the plugin's stderr, line by line).
type slogHCLog struct {
	l     *slog.Logger
	name  string
	args  []any
	level *slog.LevelVar // shared by derived loggers, as in hclog
}

// newHCLog returns an hclog.Logger writing to l.
func newHCLog(l *slog.Logger, name string) hclog.Logger {
	lv := new(slog.LevelVar)
	lv.Set(slog.LevelDebug - 4) // leave the filtering to l's handler
	return &slogHCLog{l: l, name: name, level: lv}
}

// levelTrace is the slog level of hclog's Trace.
const levelTrace = slog.LevelDebug - 4

func toSlog(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return levelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func toHCLog(level slog.Level) hclog.Level {
	switch {
	case level <= levelTrace:
		return hclog.Trace
	case level <= slog.LevelDebug:
		return hclog.Debug
	case level <= slog.LevelInfo:
		return hclog.Info
	case level <= slog.LevelWarn:
		return hclog.Warn
	}
	return hclog.Error
}

func (h *slogHCLog) enabled(level slog.Level) bool {
	return level >= h.level.Level() && h.l.Enabled(context.Background(), level)
}

func (h *slogHCLog) Log(level hclog.Level, msg string, args ...any) {
	lv := toSlog(level)
	if level == hclog.NoLevel || level == hclog.Off || !h.enabled(lv) {
		return
	}
	all := make([]any, 0, 2+len(h.args)+len(args))
	if h.name != "" {
		all = append(all, "logger", h.name)
	}
	all = append(all, h.args...)
	all = append(all, args...)
	h.l.Log(context.Background(), lv, msg, all...)
}

func (h *slogHCLog) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *slogHCLog) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *slogHCLog) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *slogHCLog) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *slogHCLog) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *slogHCLog) IsTrace() bool { return h.enabled(levelTrace) }
func (h *slogHCLog) IsDebug() bool { return h.enabled(slog.LevelDebug) }
func (h *slogHCLog) IsInfo() bool  { return h.enabled(slog.LevelInfo) }
func (h *slogHCLog) IsWarn() bool  { return h.enabled(slog.LevelWarn) }
func (h *slogHCLog) IsError() bool { return h.enabled(slog.LevelError) }

func (h *slogHCLog) ImpliedArgs() []any { return h.args }

func (h *slogHCLog) With(args ...any) hclog.Logger {
	c := *h
	c.args = append(append([]any(nil), h.args...), args...)
	return &c
}

func (h *slogHCLog) Name() string { return h.name }

func (h *slogHCLog) Named(name string) hclog.Logger {
	c := *h
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (h *slogHCLog) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	return &c
}

func (h *slogHCLog) SetLevel(level hclog.Level) { h.level.Set(toSlog(level)) }
func (h *slogHCLog) GetLevel() hclog.Level      { return toHCLog(h.level.Level()) }

func (h *slogHCLog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *slogHCLog) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	level := hclog.Info
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = opts.ForceLevel
	}
	return &lineWriter{h: h, level: level}
}

// lineWriter logs each line written to it.
type lineWriter struct {
	h     *slogHCLog
	level hclog.Level
	mu    sync.Mutex
	buf   []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		if line := bytes.TrimRight(w.buf[:i], "\r"); len(line) > 0 {
			w.h.Log(w.level, string(line))
		}
		w.buf = w.buf[i+1:]
	}
}

// Interface guard.
var _ hclog.Logger = (*slogHCLog)(nil)
