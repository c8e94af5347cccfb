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
	"this diff against its previous run or session is a reading aid only. How the previous run was decided is shown only once its signature " +
	"verified against the reviewers file; how it ended is its workflow's own word (anyone who can write to the namespace can start one that says anything). " +
	"It never changes what you sign: your decision covers this run's (or this cell's) whole code, files and settings, shown in full, whatever came before."

// maxPreviousPages bounds how many visibility pages Changes reads to find the previous run or
// session.
const maxPreviousPages = 10

// Changes is what changed since the previous run or session of a run's or a session's
// conversation.
type Changes struct {
	Conversation string `json:"conversation"`
	// Previous is the conversation's run or session started last before this one; nil when this
	// is its first.
	Previous *PreviousRun `json:"previous,omitempty"`
	// Diff is the unified diff from the previous run or session to this one: the code when both
	// are runs (a session's code is its cells, each reviewed on its own), every input file (text
	// files line by line, others by size), and the settings (language or languages, network,
	// egress, secret names, env names, the timeout, and the names of env vars whose values
	// changed, never the values), and the packages. Each line is escaped (pysource.VisibleText; CR as \r). Empty when
	// nothing changed or there is none before.
	Diff string `json:"diff,omitempty"`
	// Added and Removed count the diff's lines; ChangedFiles names what changed ("code",
	// "settings" and input file names).
	Added        int      `json:"added"`
	Removed      int      `json:"removed"`
	ChangedFiles []string `json:"changed_files,omitempty"`
	// Packages are the packages added, removed, at another version or with other hashes or
	// extras since the previous one (guard.DiffPackages of their locks); the diff's "packages"
	// part shows them line by line, a hash a line.
	Packages []guard.PackageChange `json:"packages,omitempty"`
	Notice   string                `json:"notice"`
}

// PreviousRun is the previous run or session of a conversation and how it was decided.
type PreviousRun struct {
	WorkflowID string    `json:"workflow_id"`
	RunID      string    `json:"run_id"`
	Started    time.Time `json:"started"`
	// Session says it is a Session workflow: State is the session's, and its cells' decisions
	// are on its own page.
	Session bool   `json:"session,omitempty"`
	State   string `json:"state"`
	// Decision is its accepted decision (approved by whom, or denied with what reason), if any.
	Decision *contract.DecisionRecord `json:"decision,omitempty"`
	// Error is what ended it, if anything did (expired, denied, failed).
	Error string `json:"error,omitempty"`
	// Verified says its decision (or that it has none) is what its history records, signed by a
	// reviewer the door's reviewers file lists (Client.WithReviewersFile); otherwise Unverified
	// says why, and Outcome says nothing of it: anyone who can write to the namespace can start
	// a run whose status says anything.
	Verified   bool   `json:"verified"`
	Unverified string `json:"unverified,omitempty"`
	// limits are its checked limits (its status's), which the diff's settings show: its start
	// input's are as requested, a zero there meaning the policy's default.
	limits guard.Limits
}

// Kind is what the previous one is: "session" or "run".
func (p *PreviousRun) Kind() string {
	if p.Session {
		return "session"
	}
	return "run"
}

// Outcome says in words how the previous run was decided, or where the previous session is,
// once verified; otherwise "unverified" and why.
func (p *PreviousRun) Outcome() string {
	switch d := p.Decision; {
	case p.Session:
		return "session " + p.State + ", unverified (a session's state is its workflow's word)"
	case !p.Verified && p.Unverified != "":
		return "unverified: " + p.Unverified
	case !p.Verified:
		return "unverified"
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
	req := in.Request
	req.Limits = CheckedLimits(req.Limits, st.Request.Limits)
	return changesText(c.ChangesOf(ctx, workflowID, st.RunID, info.GetStartTime().AsTime(), req))
}

// changesText is a review's Changes and, when they could not be read, why, as text: the review
// stands without them.
func changesText(ch *Changes, err error) (*Changes, string) {
	if err != nil {
		return ch, err.Error()
	}
	return ch, ""
}

// Changes returns what changed since the previous run or session of workflowID's conversation,
// read from the run's start input; nil when the run names no conversation. The previous one is
// the RunCode run or Session with the same SandboxConversation started last before this one
// (visibility is eventually consistent: one started a moment ago may not be found yet).
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
	if st, err := c.RunStatus(ctx, workflowID, runID); err == nil {
		in.Request.Limits = CheckedLimits(in.Request.Limits, st.Request.Limits)
	}
	return c.ChangesOf(ctx, workflowID, runID, info.GetStartTime().AsTime(), in.Request)
}

// CheckedLimits is the limits a conversation's diff shows of a run or a session: the checked
// ones (its status's, as its page's header shows them) once its check recorded them, else the
// requested ones, where zero means the policy's default.
func CheckedLimits(requested, checked guard.Limits) guard.Limits {
	if checked == (guard.Limits{}) {
		return requested
	}
	return checked
}

// ChangesOf is Changes for run runID of workflowID, started at started with req. Give req
// the checked limits (CheckedLimits) so that the diff's settings show what the run's status shows.
func (c *Client) ChangesOf(ctx context.Context, workflowID, runID string, started time.Time, req guard.Request) (*Changes, error) {
	return c.changesOf(ctx, workflowID, runID, started, req.Conversation, runCompared(req))
}

// SessionChangesOf is what changed since the previous run or session of the conversation of run
// runID of session sessionID, started at started with req: its settings, as Changes diffs a
// run's. Nil when the session names no conversation.
func (c *Client) SessionChangesOf(ctx context.Context, sessionID, runID string, started time.Time, req guard.SessionRequest) (*Changes, error) {
	return c.changesOf(ctx, sessionID, runID, started, req.Conversation, sessionCompared(req))
}

// changesOf is what changed from the previous run or session of conversation to cur, what run
// runID of workflowID, started at started, compares.
func (c *Client) changesOf(ctx context.Context, workflowID, runID string, started time.Time, conversation string, cur compared) (*Changes, error) {
	if conversation == "" {
		return nil, nil
	}
	// Checked again here: it goes into a visibility query.
	if err := guard.CheckConversation(conversation); err != nil {
		return nil, fmt.Errorf("client: changes of %s: %w", workflowID, err)
	}
	ch := &Changes{Conversation: conversation, Notice: ConversationNotice}
	prev, err := c.previousRun(ctx, workflowID, runID, started, conversation)
	if err != nil || prev == nil {
		return ch, err
	}
	if err := c.previousState(ctx, prev); err != nil {
		return ch, err
	}
	c.verifyPrevious(ctx, prev)
	ch.Previous = prev
	old, err := c.previousCompared(ctx, prev)
	if err != nil {
		return ch, err
	}
	ch.diff(old, cur)
	return ch, nil
}

// previousState fills in how the previous run or session p ended up, from its status.
func (c *Client) previousState(ctx context.Context, p *PreviousRun) error {
	if p.Session {
		st, err := c.SessionRunStatus(ctx, p.WorkflowID, p.RunID)
		p.State, p.Error, p.limits = st.State, st.Error, st.Settings.Limits
		return err
	}
	st, err := c.RunStatus(ctx, p.WorkflowID, p.RunID)
	p.State, p.Decision, p.Error, p.limits = st.State, st.Decision, st.Error, st.Request.Limits
	return err
}

// previousCompared reads what the diff compares of the previous run or session p, from its
// start input.
func (c *Client) previousCompared(ctx context.Context, p *PreviousRun) (compared, error) {
	if p.Session {
		in, err := c.SessionStartInput(ctx, p.WorkflowID, p.RunID)
		in.Request.Limits = CheckedLimits(in.Request.Limits, p.limits)
		return sessionCompared(in.Request), err
	}
	in, err := c.StartInput(ctx, p.WorkflowID, p.RunID)
	in.Request.Limits = CheckedLimits(in.Request.Limits, p.limits)
	return runCompared(in.Request), err
}

// conversationQuery lists the RunCode runs and Sessions of a conversation (checked).
func conversationQuery(conversation string) string {
	return fmt.Sprintf("WorkflowType IN ('%s', '%s') AND %s = '%s'",
		contract.WorkflowName, contract.SessionWorkflowName, contract.AttrConversation, conversation)
}

// previousRun finds the conversation's run or session started last before started, other than
// this one.
func (c *Client) previousRun(ctx context.Context, workflowID, runID string, started time.Time, conversation string) (*PreviousRun, error) {
	query := conversationQuery(conversation)
	var (
		best  *PreviousRun
		token []byte
	)
	for range maxPreviousPages {
		resp, err := c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: 100, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("client: list the runs and sessions of conversation %s: %w", conversation, err)
		}
		for _, e := range resp.GetExecutions() {
			ex, t := e.GetExecution(), e.GetStartTime().AsTime()
			if ex.GetRunId() == runID || !t.Before(started) {
				continue
			}
			if best == nil || t.After(best.Started) {
				best = &PreviousRun{WorkflowID: ex.GetWorkflowId(), RunID: ex.GetRunId(), Started: t,
					Session: e.GetType().GetName() == contract.SessionWorkflowName}
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

// compared is what a conversation's diff compares of a run or a session: a run's code (nil for
// a session, whose code is its cells), its language or a session's languages, and the settings.
type compared struct {
	code      *string
	languages string
	settings  guard.Settings
}

// runCompared is what the diff compares of a run's request.
func runCompared(r guard.Request) compared {
	lang := r.Language
	if lang == "" {
		lang = guard.Python
	}
	return compared{code: &r.Code, languages: lang, settings: r.Settings}
}

// sessionCompared is what the diff compares of a session's request: its settings.
func sessionCompared(r guard.SessionRequest) compared {
	langs := "(every one the policy offers)"
	if len(r.Languages) > 0 {
		langs = strings.Join(slices.Compact(slices.Sorted(slices.Values(r.Languages))), ", ")
	}
	return compared{languages: langs, settings: r.Settings}
}

// diff fills the diff from the previous run or session to this one.
func (ch *Changes) diff(prev, cur compared) {
	add := ch.add
	if prev.code != nil && cur.code != nil {
		add("code", *prev.code, *cur.code)
	}
	pf, cf := prev.settings.Files, cur.settings.Files
	names := slices.Sorted(maps.Keys(pf))
	for n := range cf {
		if _, ok := pf[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		old, hadOld := pf[n]
		new, hasNew := cf[n]
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
	for _, n := range slices.Sorted(maps.Keys(cur.settings.Env)) {
		if old, ok := prev.settings.Env[n]; ok && old != cur.settings.Env[n] {
			changedEnv = append(changedEnv, n)
		}
	}
	curSettings := settings(cur)
	if len(changedEnv) > 0 {
		curSettings += "env values changed (not shown here): " + strings.Join(changedEnv, ", ") + "\n"
	}
	add("settings", settings(prev), curSettings)
	ch.diffPackages(prev.settings.Packages, cur.settings.Packages)
}

// diffPackages adds what changed in the packages from the lock prev to the lock cur: the
// changes, and the "packages" part of the diff (a requirement a line, each hash on a line of
// its own under it, so one changed hash is one changed line). A lock that does not parse (its
// run was refused) is diffed as its text.
func (ch *Changes) diffPackages(prev, cur string) {
	prevPkgs, perr := guard.ParseLock(prev)
	curPkgs, cerr := guard.ParseLock(cur)
	if perr != nil || cerr != nil {
		ch.add("packages", prev, cur)
		return
	}
	ch.Packages = guard.DiffPackages(prevPkgs, curPkgs)
	ch.add("packages", packageLines(prevPkgs), packageLines(curPkgs))
}

// packageLines writes packages for the diff: a requirement a line, each hash indented under it.
func packageLines(pkgs []guard.Package) string {
	var b strings.Builder
	for _, p := range pkgs {
		b.WriteString(p.Requirement() + "\n")
		for _, h := range p.Hashes {
			b.WriteString("    --hash=" + h + "\n")
		}
	}
	return b.String()
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
func settings(c compared) string {
	r := c.settings
	egress := slices.Sorted(slices.Values(r.Egress))
	secrets := slices.Sorted(slices.Values(r.Secrets))
	env := slices.Sorted(maps.Keys(r.Env))
	return fmt.Sprintf("language: %s\nnetwork: %t\negress: %s\nsecrets: %s\nenv names: %s\ntimeout: %s\n",
		c.languages, r.Network, strings.Join(egress, ", "), strings.Join(secrets, ", "), strings.Join(env, ", "), r.Limits.Timeout)
}
