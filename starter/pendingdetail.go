package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
)

// pendingDetail is what a row of the pending table reads from the run's status (a session's:
// its waiting cell's), beyond what the visibility list holds: what a person needs to pick a run.
type pendingDetail struct {
	// Kind is "run", or "cell N" for a session's waiting cell.
	Kind  string
	Agent string
	// CodeBytes and FirstLine are the code's size and its first line (unescaped: printPending
	// escapes it); More says the code has more lines.
	CodeBytes int
	FirstLine string
	More      bool
	// Since is when the wait began (a cell's submission; a run's start is the row's own), and
	// Deadline when it ends; both zero when unknown.
	Since, Deadline time.Time
	// Packages counts the packages the run's lock (a cell's, and its session's) names: show
	// lists them with their hashes.
	Packages int
}

// pendingReaders bounds the status reads pending makes at once.
const pendingReaders = 8

// pendingDetails reads the status of every row, pendingReaders at a time; a row whose status
// could not be read keeps a zero detail (the table then shows "?").
func pendingDetails(ctx context.Context, sc *client.Client, rows []client.Pending) []pendingDetail {
	out := make([]pendingDetail, len(rows))
	sem := make(chan struct{}, pendingReaders)
	var wg sync.WaitGroup
	for i, p := range rows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = pendingDetailOf(ctx, sc, p)
		}()
	}
	wg.Wait()
	return out
}

// pendingDetailOf reads one row's detail; zero when its status could not be read.
func pendingDetailOf(ctx context.Context, sc *client.Client, p client.Pending) pendingDetail {
	if p.Kind == client.PendingSession {
		st, err := sc.SessionStatus(ctx, p.WorkflowID)
		if err != nil {
			return pendingDetail{}
		}
		for _, c := range st.Cells {
			if c.State == contract.StatusAwaitingApproval {
				d := codeDetail(c.Code)
				d.Kind, d.Agent, d.CodeBytes = fmt.Sprintf("cell %d", c.Cell), c.Metadata.Agent, c.CodeBytes
				d.Since, d.Deadline = c.Submitted, c.ApprovalDeadline
				d.Packages = len(c.Packages) + len(st.Settings.Packages)
				return d
			}
		}
		return pendingDetail{}
	}
	st, err := sc.Status(ctx, p.WorkflowID)
	if err != nil {
		return pendingDetail{}
	}
	d := codeDetail(st.Request.Code)
	d.Kind, d.Agent, d.CodeBytes, d.Deadline = client.PendingRun, st.Request.Metadata.Agent, st.Request.CodeBytes, st.ApprovalDeadline
	d.Packages = len(st.Request.Packages)
	return d
}

// firstLineRunes clips the first line pending shows; show prints the code whole.
const firstLineRunes = 40

// codeDetail is the code's first line, clipped to firstLineRunes, and whether more follows.
func codeDetail(code string) pendingDetail {
	line, rest, more := strings.Cut(code, "\n")
	d := pendingDetail{FirstLine: line, More: more && strings.TrimSpace(rest) != ""}
	if utf8.RuneCountInString(line) > firstLineRunes {
		d.FirstLine, d.More = string([]rune(line)[:firstLineRunes]), true
	}
	return d
}
