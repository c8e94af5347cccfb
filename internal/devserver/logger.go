package devserver

import (
	"context"
	"log/slog"
	"sync/atomic"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// silent is above every level the server logs at.
const silent = slog.LevelError + 1

// stopLeveler is the server's minimum log level: the configured one until
// Stop begins, then silent. Shutting down, the server logs every cancelled
// request and poll as an error; what really fails in Stop, Stop returns.
type stopLeveler struct {
	base     slog.Leveler
	stopping atomic.Bool
}

func (l *stopLeveler) Level() slog.Level {
	if l.stopping.Load() {
		return silent
	}
	return l.base.Level()
}

// levelHandler drops records below min before they reach the wrapped
// handler.
type levelHandler struct {
	min  slog.Leveler
	next slog.Handler
}

func (h levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min.Level() && h.next.Enabled(ctx, l)
}

func (h levelHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.next.Handle(ctx, r)
}

func (h levelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return levelHandler{min: h.min, next: h.next.WithAttrs(attrs)}
}

func (h levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{min: h.min, next: h.next.WithGroup(name)}
}

// serverLogger is the Temporal server's log.Logger, written to slog.
// DPanic, Panic and Fatal are logged as errors and do not panic or exit: a
// library must not end the process.
type serverLogger struct {
	sl *slog.Logger
}

var (
	_ log.Logger     = serverLogger{}
	_ log.WithLogger = serverLogger{}
)

func newServerLogger(sl *slog.Logger) serverLogger { return serverLogger{sl: sl} }

func (l serverLogger) Debug(msg string, tags ...tag.Tag) { l.log(slog.LevelDebug, msg, tags, "") }
func (l serverLogger) Info(msg string, tags ...tag.Tag)  { l.log(slog.LevelInfo, msg, tags, "") }
func (l serverLogger) Warn(msg string, tags ...tag.Tag)  { l.log(slog.LevelWarn, msg, tags, "") }
func (l serverLogger) Error(msg string, tags ...tag.Tag) { l.log(slog.LevelError, msg, tags, "") }
func (l serverLogger) DPanic(msg string, tags ...tag.Tag) {
	l.log(slog.LevelError, msg, tags, "dpanic")
}
func (l serverLogger) Panic(msg string, tags ...tag.Tag) { l.log(slog.LevelError, msg, tags, "panic") }
func (l serverLogger) Fatal(msg string, tags ...tag.Tag) { l.log(slog.LevelError, msg, tags, "fatal") }

// With returns a logger that adds tags to every record.
func (l serverLogger) With(tags ...tag.Tag) log.Logger {
	return serverLogger{sl: slog.New(l.sl.Handler().WithAttrs(tagAttrs(tags)))}
}

// SLog lets the server's own slog users (log.NewSlogLogger) share the
// handler and its level filter.
func (l serverLogger) SLog() *slog.Logger { return l.sl }

func (l serverLogger) log(level slog.Level, msg string, tags []tag.Tag, severity string) {
	ctx := context.Background()
	if !l.sl.Enabled(ctx, level) {
		return
	}
	attrs := tagAttrs(tags)
	if severity != "" {
		attrs = append(attrs, slog.String("severity", severity))
	}
	l.sl.LogAttrs(ctx, level, msg, attrs...)
}

func tagAttrs(tags []tag.Tag) []slog.Attr {
	attrs := make([]slog.Attr, 0, len(tags)+1)
	for _, t := range tags {
		attrs = append(attrs, slog.Any(t.Key(), t.Value()))
	}
	return attrs
}
