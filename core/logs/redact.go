package logs

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/kilnhq/kiln/core"
)

// Redacting returns a handler that passes every record through r before
// next: the message and every attribute (strings, errors, anything printed
// with %v, inside groups too). A value that holds no secret is passed on as
// it is; one that does is passed on as its redacted text.
func Redacting(next slog.Handler, r *core.Redactor) slog.Handler {
	return &redacting{next: next, r: r}
}

type redacting struct {
	next slog.Handler
	r    *core.Redactor
}

func (h *redacting) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *redacting) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.Redact(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *redacting) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = h.attr(a)
	}
	return &redacting{next: h.next.WithAttrs(red), r: h.r}
}

func (h *redacting) WithGroup(name string) slog.Handler {
	return &redacting{next: h.next.WithGroup(name), r: h.r}
}

// attr redacts one attribute.
func (h *redacting) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if s := h.r.Redact(v.String()); s != v.String() {
			return slog.String(a.Key, s)
		}
	case slog.KindGroup:
		g := v.Group()
		red := make([]slog.Attr, len(g))
		for i, x := range g {
			red[i] = h.attr(x)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(red...)}
	case slog.KindAny:
		var text string
		switch x := v.Any().(type) {
		case error:
			text = x.Error()
		case fmt.Stringer:
			text = x.String()
		default:
			text = fmt.Sprintf("%+v", x)
		}
		if s := h.r.Redact(text); s != text {
			return slog.String(a.Key, s)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
