package redact

import (
	"context"
	"fmt"
	"log/slog"
)

// Handler is h with every record's message and every attribute's text
// through Text: strings, errors and values with a String method (a
// *url.URL), in groups too. Every logger of couponlink's commands, and
// through them the libraries' loggers (go-redis, go-mysql, go-retryablehttp),
// writes through one, so that an error a library built around a URL or a
// DSN never reaches the log with its password, whatever logged it.
func Handler(h slog.Handler) slog.Handler {
	if _, ok := h.(handler); ok {
		return h
	}
	return handler{h}
}

type handler struct{ next slog.Handler }

func (h handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, Text(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h handler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = attr(a)
	}
	return handler{h.next.WithAttrs(clean)}
}

func (h handler) WithGroup(name string) slog.Handler { return handler{h.next.WithGroup(name)} }

// attr is a with its text through Text.
func attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if s := v.String(); Text(s) != s {
			return slog.String(a.Key, Text(s))
		}
	case slog.KindGroup:
		g := v.Group()
		clean := make([]any, len(g))
		for i, x := range g {
			clean[i] = attr(x)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.Any(a.Key, Error(x))
		case fmt.Stringer:
			if s := x.String(); Text(s) != s {
				return slog.String(a.Key, Text(s))
			}
		case []string:
			clean := make([]string, len(x))
			for i, s := range x {
				clean[i] = Text(s)
			}
			return slog.Any(a.Key, clean)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
