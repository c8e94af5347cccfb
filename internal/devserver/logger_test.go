//go:build integration

package devserver

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// recorder is a slog.Handler that keeps every record it is given.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Clone())
	return nil
}

func (r *recorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recorderView{r: r, attrs: attrs}
}

func (r *recorder) WithGroup(string) slog.Handler { return r }

// recorderView adds attrs to the records it passes to its recorder.
type recorderView struct {
	r     *recorder
	attrs []slog.Attr
}

func (v *recorderView) Enabled(context.Context, slog.Level) bool { return true }

func (v *recorderView) Handle(ctx context.Context, rec slog.Record) error {
	rec = rec.Clone()
	rec.AddAttrs(v.attrs...)
	return v.r.Handle(ctx, rec)
}

func (v *recorderView) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recorderView{r: v.r, attrs: append(append([]slog.Attr{}, v.attrs...), attrs...)}
}

func (v *recorderView) WithGroup(string) slog.Handler { return v }

func (r *recorder) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.records {
		out = append(out, rec.Level.String()+" "+rec.Message)
	}
	return out
}

func (r *recorder) attr(i int, key string) (slog.Value, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var v slog.Value
	found := false
	r.records[i].Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v, found = a.Value, true
			return false
		}
		return true
	})
	return v, found
}

func newTestLogger(level slog.Leveler) (log.Logger, *recorder, *stopLeveler) {
	rec := &recorder{}
	lv := &stopLeveler{base: level}
	return newServerLogger(slog.New(levelHandler{min: lv, next: rec})), rec, lv
}

func TestServerLoggerLevels(t *testing.T) {
	tests := []struct {
		name  string
		level slog.Level
		want  []string
	}{
		{"warn drops debug and info", slog.LevelWarn, []string{
			"WARN warn", "ERROR error", "ERROR dpanic", "ERROR panic", "ERROR fatal"}},
		{"debug passes everything", slog.LevelDebug, []string{
			"DEBUG debug", "INFO info", "WARN warn", "ERROR error", "ERROR dpanic", "ERROR panic", "ERROR fatal"}},
		{"error passes errors only", slog.LevelError, []string{
			"ERROR error", "ERROR dpanic", "ERROR panic", "ERROR fatal"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, rec, _ := newTestLogger(tt.level)
			l.Debug("debug")
			l.Info("info")
			l.Warn("warn")
			l.Error("error")
			l.DPanic("dpanic") // must not panic
			l.Panic("panic")   // must not panic
			l.Fatal("fatal")   // must not exit
			if got := rec.messages(); !slices.Equal(got, tt.want) {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}

func TestServerLoggerSilentWhileStopping(t *testing.T) {
	l, rec, lv := newTestLogger(slog.LevelWarn)
	l.Error("before stop")
	lv.stopping.Store(true)
	l.Error("during stop")
	l.Fatal("during stop")
	log.NewSlogLogger(l).Error("during stop, through slog")
	if got, want := rec.messages(), []string{"ERROR before stop"}; !slices.Equal(got, want) {
		t.Errorf("got %q; want %q", got, want)
	}
}

func TestServerLoggerLevelVar(t *testing.T) {
	var lv slog.LevelVar
	lv.Set(slog.LevelError)
	l, rec, _ := newTestLogger(&lv)
	l.Warn("dropped")
	lv.Set(slog.LevelWarn)
	l.Warn("passed")
	if got, want := rec.messages(), []string{"WARN passed"}; !slices.Equal(got, want) {
		t.Errorf("got %q; want %q", got, want)
	}
}

func TestServerLoggerTags(t *testing.T) {
	l, rec, _ := newTestLogger(slog.LevelWarn)
	wl, ok := l.(log.WithLogger)
	if !ok {
		t.Fatal("serverLogger does not implement log.WithLogger")
	}
	wl.With(tag.Service("history")).Error("failed", tag.Error(errors.New("boom")), tag.NewInt("shard", 1))
	l.Fatal("listener")
	// The server's own slog users get the same handler and filter.
	sl := log.NewSlogLogger(l)
	sl.Info("dropped")
	sl.Warn("via slog", "k", "v")

	if got, want := rec.messages(), []string{"ERROR failed", "ERROR listener", "WARN via slog"}; !slices.Equal(got, want) {
		t.Fatalf("got %q; want %q", got, want)
	}
	for _, c := range []struct {
		rec       int
		key, want string
	}{
		{0, "service", "history"},
		{0, "error", "boom"},
		{0, "shard", "1"},
		{1, "severity", "fatal"},
		{2, "k", "v"},
	} {
		v, ok := rec.attr(c.rec, c.key)
		if !ok || v.String() != c.want {
			t.Errorf("record %d attr %s: got %v (present %v); want %s", c.rec, c.key, v, ok, c.want)
		}
	}
}
