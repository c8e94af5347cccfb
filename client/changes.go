package client

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/linediff"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// ConversationNotice is what every door says beside a conversation's diff.
const ConversationNotice = "The conversation is a label the orchestrator chose (any orchestrator can name any conversation, another team's too): " +
	"this diff against its previous run is a reading aid only. It never changes what you sign: your decision covers this run's " +
	"whole code, files and settings, shown in full, whatever the previous run was."

// maxPreviousPages bounds how many visibility pages Changes reads to find the previous run.
const maxPreviousPages = 10

// Changes is what changed since the previous run of a run's conversation.
type Changes struct {
	Conversation string `json:"conversation"`
	// Previous is the conversation's run started last before this one; nil when this is its first.
	Previous *PreviousRun `json:"previous,omitempty"`
	// Diff is the unified diff from the previous run to this one: its code, every input file
	// (text files line by line, others by size), and its settings (language, network, egress,
	// secret names, env names, never env values). Each line is escaped (pysource.VisibleText; CR
	// as \r). Empty when nothing changed or there is no previous run.
	Diff string `json:"diff,omitempty"`
	// Added and Removed count the diff's lines; ChangedFiles names what changed ("code",
	// "settings" and input file names).
	Added        int      `json:"added"`
	Removed      int      `json:"removed"`
	ChangedFiles []string `json:"changed_files,omitempty"`
	Notice       string   `json:"notice"`
}

// PreviousRun is the previous run of a conversation and how it was decided.
type PreviousRun struct {
	WorkflowID string    `json:"workflow_id"`
	RunID      string    `json:"run_id"`
	Started    time.Time `json:"started"`
	State      string    `json:"state"`
	// Decision is its accepted decision (approved by whom, or denied with what reason), if any.
	Decision *contract.DecisionRecord `json:"decision,omitempty"`
	// Error is what ended it, if anything did (expired, denied, failed).
	Error string `json:"error,omitempty"`
}

// Outcome says in words how the previous run was decided.
func (p *PreviousRun) Outcome() string {
	switch d := p.Decision; {
	case d != nil && d.Approve:
		return "approved by " + d.Reviewer
	case d != nil && d.Reason != "":
		return "denied by " + d.Reviewer + ": " + d.Reason
	case d != nil:
		return "denied by " + d.Reviewer
	case p.State == contract.StatusAwaitingApproval:
		return "still waiting for a decision"
	case p.State == contract.StatusExpired:
		return "expired: no decision came"
	}
	return p.State
}

// reviewChanges is Review's Changes of the run st names, with in its start input; a failure is
// returned as text, since the review stands without it.
func (c *Client) reviewChanges(ctx context.Context, workflowID string, st contract.Status, in contract.Input) (*Changes, string) {
	if in.Request.Conversation == "" {
		return nil, ""
	}
	info, err := c.describeRunCode(ctx, workflowID)
	if err != nil {
		return nil, err.Error()
	}
	ch, err := c.ChangesOf(ctx, workflowID, st.RunID, info.GetStartTime().AsTime(), in.Request)
	if err != nil {
		return ch, err.Error()
	}
	return ch, ""
}

// Changes returns what changed since the previous run of workflowID's conversation, read from
// the run's start input; nil when the run names no conversation. The previous run is the one
// with the same SandboxConversation started last before this one (visibility is eventually
// consistent: a run started a moment ago may not be found yet).
func (c *Client) Changes(ctx context.Context, workflowID string) (*Changes, error) {
	info, err := c.describeRunCode(ctx, workflowID)
	if err != nil {
		return nil, err
	}
	runID := info.GetExecution().GetRunId()
	in, err := c.StartInput(ctx, workflowID, runID)
	if err != nil {
		return nil, err
	}
	return c.ChangesOf(ctx, workflowID, runID, info.GetStartTime().AsTime(), in.Request)
}

// ChangesOf is Changes for run runID of workflowID, started at started with req.
func (c *Client) ChangesOf(ctx context.Context, workflowID, runID string, started time.Time, req guard.Request) (*Changes, error) {
	if req.Conversation == "" {
		return nil, nil
	}
	// Checked again here: it goes into a visibility query.
	if err := guard.CheckConversation(req.Conversation); err != nil {
		return nil, fmt.Errorf("client: changes of %s: %w", workflowID, err)
	}
	ch := &Changes{Conversation: req.Conversation, Notice: ConversationNotice}
	prev, err := c.previousRun(ctx, workflowID, runID, started, req.Conversation)
	if err != nil || prev == nil {
		return ch, err
	}
	st, err := c.RunStatus(ctx, prev.WorkflowID, prev.RunID)
	if err != nil {
		return ch, err
	}
	prev.State, prev.Decision, prev.Error = st.State, st.Decision, st.Error
	ch.Previous = prev
	pin, err := c.StartInput(ctx, prev.WorkflowID, prev.RunID)
	if err != nil {
		return ch, err
	}
	ch.diff(pin.Request, req)
	return ch, nil
}

// previousRun finds the conversation's run started last before started, other than this one.
func (c *Client) previousRun(ctx context.Context, workflowID, runID string, started time.Time, conversation string) (*PreviousRun, error) {
	query := fmt.Sprintf("WorkflowType = '%s' AND %s = '%s'", contract.WorkflowName, contract.AttrConversation, conversation)
	var (
		best  *PreviousRun
		token []byte
	)
	for range maxPreviousPages {
		resp, err := c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: 100, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("client: list the runs of conversation %s: %w", conversation, err)
		}
		for _, e := range resp.GetExecutions() {
			ex, t := e.GetExecution(), e.GetStartTime().AsTime()
			if ex.GetRunId() == runID || !t.Before(started) {
				continue
			}
			if best == nil || t.After(best.Started) {
				best = &PreviousRun{WorkflowID: ex.GetWorkflowId(), RunID: ex.GetRunId(), Started: t}
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	return best, nil
}

// add adds to the diff what changed in name from old to new.
func (ch *Changes) add(name, old, new string) {
	d := linediff.Unified(showLine("previous/"+name), showLine("this/"+name), old, new, showLine)
	if d == "" {
		return
	}
	ch.ChangedFiles = append(ch.ChangedFiles, name)
	ch.Diff += d
	ops := linediff.Lines(linediff.Split(old), linediff.Split(new))
	a, r := linediff.Counts(ops)
	ch.Added, ch.Removed = ch.Added+a, ch.Removed+r
}

// diff fills the diff from the previous request to this one.
func (ch *Changes) diff(prev, cur guard.Request) {
	add := ch.add
	add("code", prev.Code, cur.Code)
	names := slices.Sorted(maps.Keys(prev.Files))
	for n := range cur.Files {
		if _, ok := prev.Files[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		old, hadOld := prev.Files[n]
		new, hasNew := cur.Files[n]
		if hadOld && hasNew && string(old) == string(new) {
			continue
		}
		if isText(old) && isText(new) {
			add("files/"+n, string(old), string(new))
			continue
		}
		add("files/"+n, fileLine(old, hadOld), fileLine(new, hasNew))
	}
	var changedEnv []string
	for _, n := range slices.Sorted(maps.Keys(cur.Env)) {
		if old, ok := prev.Env[n]; ok && old != cur.Env[n] {
			changedEnv = append(changedEnv, n)
		}
	}
	curSettings := settings(cur)
	if len(changedEnv) > 0 {
		curSettings += "env values changed (not shown here): " + strings.Join(changedEnv, ", ") + "\n"
	}
	add("settings", settings(prev), curSettings)
}

// showLine escapes a diff line: invisible characters as escapes, CR as \r.
func showLine(s string) string {
	return strings.ReplaceAll(pysource.VisibleText(s), "\r", `\r`)
}

func isText(b []byte) bool { return utf8.Valid(b) && !slices.Contains(b, 0) }

// fileLine stands for a binary input file in the diff: its size.
func fileLine(b []byte, present bool) string {
	if !present {
		return ""
	}
	return fmt.Sprintf("(binary, %d bytes)\n", len(b))
}

// settings lists what else decides what runs, one line each; env values are left out.
func settings(r guard.Request) string {
	lang := r.Language
	if lang == "" {
		lang = guard.Python
	}
	egress := slices.Sorted(slices.Values(r.Egress))
	secrets := slices.Sorted(slices.Values(r.Secrets))
	env := slices.Sorted(maps.Keys(r.Env))
	return fmt.Sprintf("language: %s\nnetwork: %t\negress: %s\nsecrets: %s\nenv names: %s\ntimeout: %s\n",
		lang, r.Network, strings.Join(egress, ", "), strings.Join(secrets, ", "), strings.Join(env, ", "), r.Limits.Timeout)
}
