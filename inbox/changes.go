package inbox

import (
	"context"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
)

// changesView is what the run page shows of the run's conversation: the previous run, how it
// was decided, and the unified diff to this run, one line each with its kind (the client escaped
// the lines; the template escapes them for HTML).
type changesView struct {
	Conversation string
	PreviousID   string
	Outcome      string
	Started      string
	Diff         []diffRow
	Added        int
	Removed      int
	Err          string
	Notice       string
}

// diffRow is one line of a unified diff, with its CSS class (u-add, u-del, u-hunk, u-file,
// u-same).
type diffRow struct{ Class, Text string }

// changes reads what changed since the previous run of the run's conversation, through the
// client's door; a failure is shown on the page, which stands without it.
func (s *Server) changes(ctx context.Context, ri *client.RunInfo, in contract.Input) *changesView {
	conv := in.Request.Conversation
	if conv == "" {
		return nil
	}
	v := &changesView{Conversation: conv, Notice: client.ConversationNotice}
	ctx, cancel := context.WithTimeout(ctx, temporalTimeout)
	defer cancel()
	ch, err := s.runs.ChangesOf(ctx, ri.Status.WorkflowID, ri.Status.RunID, ri.Started, in.Request)
	if err != nil {
		v.Err = err.Error()
	}
	if ch == nil || ch.Previous == nil {
		return v
	}
	v.PreviousID, v.Outcome, v.Added, v.Removed = ch.Previous.WorkflowID, ch.Previous.Outcome(), ch.Added, ch.Removed
	v.Started = ch.Previous.Started.UTC().Format(time.RFC3339)
	for _, l := range strings.Split(strings.TrimSuffix(ch.Diff, "\n"), "\n") {
		if l == "" && ch.Diff == "" {
			break
		}
		class := "u-same"
		switch {
		case strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "+++ "):
			class = "u-file"
		case strings.HasPrefix(l, "@@"):
			class = "u-hunk"
		case strings.HasPrefix(l, "+"):
			class = "u-add"
		case strings.HasPrefix(l, "-"):
			class = "u-del"
		}
		v.Diff = append(v.Diff, diffRow{Class: class, Text: l})
	}
	return v
}
