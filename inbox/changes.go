package inbox

import (
	"context"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
)

// changesView is what a run's or a session's page shows of its conversation: the previous run
// or session, how it was decided, and the unified diff to this one, one line each with its kind
// (the client escaped the lines; the template escapes them for HTML).
type changesView struct {
	Conversation string
	// PreviousKind is "run" or "session": the path of its page too.
	PreviousKind string
	PreviousID   string
	Outcome      string
	Started      string
	Diff         []diffRow
	// Packages are the package changes, one line each (guard.PackageChange.String).
	Packages []string
	Added    int
	Removed  int
	Err      string
	Notice   string
	// Same says what an empty diff means: what was compared is the same.
	Same string
}

// diffRow is one line of a unified diff, with its CSS class (u-add, u-del, u-hunk, u-file,
// u-same).
type diffRow struct{ Class, Text string }

// changes reads what changed since the previous run or session of the run's conversation,
// through the client's door; a failure is shown on the page, which stands without it.
func (s *Server) changes(ctx context.Context, ri *client.RunInfo, in contract.Input) *changesView {
	return readChanges(ctx, in.Request.Conversation, false, func(ctx context.Context) (*client.Changes, error) {
		req := in.Request
		req.Limits = client.CheckedLimits(req.Limits, ri.Status.Request.Limits)
		return s.runs.ChangesOf(ctx, ri.Status.WorkflowID, ri.Status.RunID, ri.Started, req)
	})
}

// sessionChanges is changes for a session's settings, through the session door.
func (s *Server) sessionChanges(ctx context.Context, si sessionInfo, in contract.SessionInput) *changesView {
	return readChanges(ctx, in.Request.Conversation, true, func(ctx context.Context) (*client.Changes, error) {
		req := in.Request
		req.Limits = client.CheckedLimits(req.Limits, si.Status.Settings.Limits)
		return s.door.SessionChanges(ctx, si.Status.WorkflowID, si.Status.RunID, si.Started, req)
	})
}

// readChanges is the view of what read reads of conversation's changes (nil when it names
// none), for a run's page or a session's (session true), within temporalTimeout.
func readChanges(ctx context.Context, conv string, session bool, read func(context.Context) (*client.Changes, error)) *changesView {
	if conv == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, temporalTimeout)
	defer cancel()
	ch, err := read(ctx)
	v := &changesView{Conversation: conv, Notice: client.ConversationNotice, Same: "the same code, files and settings"}
	if err != nil {
		v.Err = err.Error()
	}
	if ch == nil || ch.Previous == nil {
		return v
	}
	p := ch.Previous
	v.PreviousKind, v.PreviousID, v.Outcome, v.Added, v.Removed = p.Kind(), p.WorkflowID, p.Outcome(), ch.Added, ch.Removed
	v.Started = p.Started.UTC().Format(time.RFC3339)
	v.Packages = packageChanges(ch.Packages)
	if session || p.Session {
		v.Same = "the same files and settings (a session's code is its cells, each shown on its own)"
	}
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
