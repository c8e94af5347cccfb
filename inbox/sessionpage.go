package inbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/guard/human"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// DownloadBase is where the session page's downloads are.
func (v sessionView) DownloadBase() string { return "/session/" + url.PathEscape(v.ID) }

// sessionView is the session page: the settings, every cell in order, and the sign form of the
// cell that waits.
type sessionView struct {
	ID, RunID, State string
	End, Error       string
	Started          string
	Deadline         string
	IdleDeadline     string
	Languages        []string
	Files            []inputFile
	FilesErr         string
	// Env is each env var as "NAME" and its value quoted and escaped, a sensitive one as its
	// length (as on a run's page).
	Env     []kv
	Secrets []string
	// Packages are the settings' packages, installed before the first cell.
	Packages []packageView
	// Warnings are the files the interpreter may run without a cell calling them: input files
	// and files earlier cells wrote into /work, which the session keeps.
	Warnings []string
	// PolicyWarnings are the policy rules' warnings for the session, and the group approvals
	// they ask of each cell.
	PolicyWarnings []string
	// Names are the input files' names that can read as others, one line each.
	Names   []string
	Limits  []kv
	Network string
	Egress  []string
	Backend string
	// Image is the checked session's image ID (what its cells run in), when it names one.
	Image            string
	SandboxTaskQueue string
	SandboxID        string
	Lifetime, Idle   string
	MaxCells         int
	Digest           string
	Metadata         []kv
	Cells            []*cellView
	Rejected         int
	LastRejection    string
	// Verified says that the settings (with the start input), every cell's code, result and
	// the chain hash to what the status says; Problem says where they do not.
	Verified bool
	Problem  string
	// Waiting is the cell that waits for a decision (the last one), if any and the session is
	// open.
	Waiting       *cellView
	Approve, Deny statementView
	// ApproveRefused says why the page offers no approval of the waiting cell; a denial stays
	// possible.
	ApproveRefused string
	// NotCheckedWith says that the signed-in passkey was listed after the session was checked, so
	// the session will refuse its decisions (notCheckedWithError).
	NotCheckedWith string
	CredentialID   string
	// Busy says the page should refresh by itself: the session is being opened or a cell runs.
	Busy bool
	// Changes is what changed in the settings since the previous run or session of the
	// session's conversation (nil: it names none, or the start input could not be read).
	Changes *changesView
}

// Bar is the session page's decision bar, for its waiting cell.
func (v sessionView) Bar() barView {
	return barView{What: fmt.Sprintf("cell %d", v.Waiting.Index), Approve: v.ApproveRefused == "", Deny: v.Deny.Text != "", Refused: v.NotCheckedWith}
}

// cellView is one cell on the session page.
type cellView struct {
	Index     int
	Language  string
	CodeSize  string
	State     string
	Lines     []codeLine
	Invisible int
	Names     []string
	Tabs      bool
	Submitted string
	TimeLeft  string
	Digest    string
	Metadata  []kv
	Decision  *contract.DecisionRecord
	// Quorum is how many approvals the cell needs (0 for sessions checked before session
	// quorums); Approvals those it has.
	Quorum    int
	Approvals []contract.DecisionRecord
	Result    *resultView
	// ResultErr says why the cell's result is not shown: it did not verify.
	ResultErr string
	// Threads is client.ThreadsWarning of the cell.
	Threads string
	Error   string
	// Diff is the waiting cell's line diff against the cell it retries (DiffFrom); nil for the
	// first cell and for cells that do not wait.
	Diff     []diffLine
	DiffFrom int
	// Phases is where the cell's time went so far (client.PhasesText of its status's phases).
	Phases string
	// Packages are the packages the cell brings, approved with it; PackageChanges what they
	// change in the session's set so far (client.CellPackageChanges).
	Packages       []packageView
	PackageChanges []string
}

// loadSession reads session id through the door.
func (s *Server) loadSession(ctx context.Context, id string) (sessionInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, temporalTimeout)
	defer cancel()
	return s.door.ReadSession(ctx, id)
}

// readSessionInput reads the session's start input through the door.
func (s *Server) readSessionInput(ctx context.Context, id, runID string) (contract.SessionInput, error) {
	ctx, cancel := context.WithTimeout(ctx, temporalTimeout)
	defer cancel()
	return s.door.SessionInput(ctx, id, runID)
}

func isSessionNotFound(err error) bool {
	var nf *serviceerror.NotFound
	var ns *notSessionError
	return errors.As(err, &ns) || errors.As(err, &nf)
}

func (s *Server) handleSession(w http.ResponseWriter, r *http.Request, who *signIn) {
	si, id, data, ok := loadPage(s, w, r, who, subjectPage[sessionInfo]{page: "session", title: "Session", load: s.loadSession, isNotFound: isSessionNotFound, notFound: "no such Session workflow"})
	if !ok {
		return
	}
	in, readErr := s.readSessionInput(r.Context(), id, si.Status.RunID)
	v := s.sessionView(si, in, readErr, who.principal)
	v.CredentialID = who.credentialID
	if readErr == nil {
		v.Changes = s.sessionChanges(r.Context(), si, in)
	}
	s.checkCellResults(r.Context(), si.Status, v)
	if v.Waiting != nil {
		keys, keysErr := s.door.CheckedReviewers(r.Context(), id, si.Status.RunID)
		if err := checkedWith(keys, keysErr, who.fingerprint, "session"); err != nil {
			v.NotCheckedWith = err.Error()
		}
	}
	for _, cv := range v.Cells {
		if cv.Result != nil {
			cv.Result.setLinks(v.DownloadBase(), cv.Index)
		}
		if i := cv.Index - 1; cv.Result != nil && i >= 0 && i < len(si.Status.Cells) && si.Status.Cells[i].Result != nil {
			cv.Result.LiveMismatch = s.shown.check(liveKey{signIn: who.id, id: id, cell: cv.Index}, *si.Status.Cells[i].Result)
		}
	}
	data.Session = v
	s.render(w, "session", data)
}

// checkCellResults shows in v only the cell results that verify (client.CheckCellResults: the
// result the session's history records, its receipt against the hosts, in an unbroken chain):
// in place of one that does not, the page says why, and shows none of it. The status query that
// gave the results is a workflow worker's answer, which a namespace writer's worker can make up.
func (s *Server) checkCellResults(ctx context.Context, st contract.SessionStatus, v *sessionView) {
	errs := s.unverifiedCells(ctx, st)
	for _, cv := range v.Cells {
		if err := errs[cv.Index]; err != nil {
			cv.Result, cv.ResultErr = nil, err.Error()
		}
	}
}

// unverifiedCells returns, by cell index, why each result st shows does not verify (nil when it
// does).
func (s *Server) unverifiedCells(ctx context.Context, st contract.SessionStatus) map[int]error {
	results := map[int]guard.Result{}
	for _, c := range st.Cells {
		if c.Result != nil {
			results[c.Cell] = *c.Result
		}
	}
	if len(results) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, temporalTimeout)
	defer cancel()
	return s.door.CheckCellResults(ctx, st.WorkflowID, results, s.cfg.Hosts)
}

// sessionView turns a session's status, and the input it was started with, into the page's
// fields, with the statements principal may sign for the waiting cell.
func (s *Server) sessionView(si sessionInfo, in contract.SessionInput, readErr error, principal string) *sessionView {
	st, set := si.Status, si.Status.Settings
	v := &sessionView{
		ID: st.WorkflowID, RunID: st.RunID, State: st.State, End: st.End, Error: st.Error,
		Started:   si.Started.UTC().Format(time.RFC3339),
		Languages: set.Languages, Network: human.Network(guard.Summary{Network: set.Network, Egress: set.Egress}),
		Egress: set.Egress, Backend: set.Backend, Image: set.Image, SandboxTaskQueue: st.SandboxTaskQueue, SandboxID: st.SandboxID,
		Lifetime: set.Lifetime.String(), Idle: set.IdleTimeout.String(), MaxCells: set.MaxCells, Digest: set.Digest,
		Limits: human.Limits(set.Limits), Rejected: st.RejectedDecisions, LastRejection: st.LastRejection,
		Busy: si.Running && (st.State == contract.SessionChecking || st.State == contract.SessionOpening || st.State == contract.SessionClosing),
	}
	if !st.Deadline.IsZero() {
		v.Deadline = st.Deadline.UTC().Format(time.RFC3339)
	}
	if !st.IdleDeadline.IsZero() {
		v.IdleDeadline = st.IdleDeadline.UTC().Format(time.RFC3339)
	}
	for _, n := range set.Secrets {
		v.Secrets = append(v.Secrets, visible(n))
	}
	v.Packages = packageViews(set.Packages)
	for _, f := range human.Metadata(set.Metadata) {
		v.Metadata = append(v.Metadata, kv{K: f.K, V: visible(f.V)})
	}
	if r := st.Rules; r != nil {
		for _, w := range r.Warnings {
			v.PolicyWarnings = append(v.PolicyWarnings, visible(w))
		}
		for _, g := range r.Groups {
			v.PolicyWarnings = append(v.PolicyWarnings, visible(fmt.Sprintf("each cell needs %d approval(s) from %s", g.Approvals, g.Group)))
		}
	}
	v.addInputs(set, in, readErr)
	now := s.cfg.Now()
	for i := range st.Cells {
		c := &st.Cells[i]
		cv := newCellView(c, now)
		cv.Threads = client.ThreadsWarning(st, i)
		cv.Packages, cv.PackageChanges = packageViews(c.Packages), packageChanges(client.CellPackageChanges(st, i))
		v.Cells = append(v.Cells, cv)
		if c.Result != nil {
			v.addWritten(c.Cell, c.Result.Files)
		}
		if c.State == contract.StatusRunning {
			v.Busy = si.Running
		}
	}
	v.verify(st, in, readErr)
	if wc := waitingCell(st); wc != nil && si.Running {
		v.Waiting = v.Cells[len(v.Cells)-1]
		// Diffed only against the cell it retries (the orchestrator's word, checked by the
		// workflow to be an earlier cell that did not succeed), never against another program.
		if r := client.RetryOf(st, *wc); r != nil {
			v.Waiting.Diff, v.Waiting.DiffFrom = lineDiff(st.Cells[r.Of-1].Code, wc.Code), r.Of
		}
		s.cellStatements(st, v, principal)
		if v.ApproveRefused == "" {
			if err := checkSessionShown(st, in, readErr); err != nil {
				v.Approve, v.ApproveRefused = statementView{}, err.Error()
			}
		}
	}
	return v
}

// addInputs shows the session's input files and env, with the warnings about the files' names
// and contents. Files, env names and values and the warnings come from the start input, not
// from the status's copy, which a workflow worker answered; without the input (readErr), the
// status's names only.
func (v *sessionView) addInputs(set guard.SessionSummary, in contract.SessionInput, readErr error) {
	var inputNames []string
	if readErr != nil {
		v.FilesErr = readErr.Error()
		v.Env = envRows(set.EnvNames, set.SensitiveEnv, nil)
		for _, f := range set.Files {
			inputNames = append(inputNames, f.Name)
		}
	} else {
		req := in.Request
		v.Files = inputFiles(guard.Request{Settings: guard.Settings{Files: req.Files}})
		v.Env = envRows(slices.Sorted(maps.Keys(req.Env)), set.SensitiveEnv, req.Env)
		inputNames = slices.Sorted(maps.Keys(req.Files))
		for _, n := range inputNames {
			for _, c := range pysource.FileConfusableNames(n, req.Files[n]) {
				v.Names = append(v.Names, c.Where()+": "+c.Name+" "+c.Reason)
			}
		}
	}
	for _, w := range pysource.StartupWarnings(inputNames) {
		v.Warnings = append(v.Warnings, w.String())
	}
}

// addWritten warns about the files a cell wrote: /work outlives the cell, so what it wrote
// there can run in a later one.
func (v *sessionView) addWritten(cell int, written []guard.File) {
	var names []string
	for _, f := range written {
		names = append(names, f.Name)
	}
	for _, w := range pysource.StartupWarnings(names) {
		v.Warnings = append(v.Warnings, fmt.Sprintf("cell %d wrote %s: %s", cell, pysource.VisibleText(w.File), w.Reason))
	}
	for _, f := range written {
		for _, n := range pysource.FileConfusableNames(f.Name, f.Content) {
			v.Names = append(v.Names, fmt.Sprintf("cell %d wrote %s, line %d column %d: %s %s", cell, pysource.VisibleText(n.File), n.Line, n.Column, n.Name, n.Reason))
		}
		if err := pysource.CheckWrittenSource(f.Name, f.Content); err != nil {
			v.Warnings = append(v.Warnings, fmt.Sprintf("cell %d: %s (a later cell that imports or runs it reads other code than shown)", cell, err))
		}
	}
}

// verify says whether the page shows the session as it is: its cells are consistent, and the
// status agrees with the start input.
func (v *sessionView) verify(st contract.SessionStatus, in contract.SessionInput, readErr error) {
	var problems []string
	if err := checkCells(st); err != nil {
		problems = append(problems, err.Error())
	}
	if readErr == nil {
		if err := shownSession(st, in); err != nil {
			problems = append(problems, err.Error())
		}
	}
	v.Problem = strings.Join(problems, "; ")
	v.Verified = len(problems) == 0 && readErr == nil
}

func newCellView(c *contract.CellStatus, now time.Time) *cellView {
	cv := &cellView{Index: c.Cell, Language: c.Language, CodeSize: human.Bytes(int64(len(c.Code))), State: c.State,
		Digest: c.Digest, Decision: c.Decision, Quorum: c.Quorum, Approvals: c.Approvals, Error: c.Error, Phases: client.PhasesText(c.Phases)}
	cv.Lines, cv.Invisible = highlight(c.Code, c.Language)
	cv.Tabs = strings.Contains(c.Code, "\t")
	for _, n := range pysource.ConfusableNames(c.Code) {
		cv.Names = append(cv.Names, n.Where()+": "+n.Name+" "+n.Reason)
	}
	if !c.Submitted.IsZero() {
		cv.Submitted = c.Submitted.UTC().Format(time.RFC3339)
	}
	if !c.ApprovalDeadline.IsZero() && c.State == contract.StatusAwaitingApproval {
		cv.TimeLeft = human.Duration(c.ApprovalDeadline.Sub(now))
	}
	for _, f := range human.Metadata(c.Metadata) {
		cv.Metadata = append(cv.Metadata, kv{K: f.K, V: visible(f.V)})
	}
	if c.Result != nil {
		cv.Result = newCellResultView(*c.Result)
	}
	return cv
}

// newCellResultView is a cell's result as the session page shows it: as a run's, with the files
// the cell created or changed shown as input files are (text whole up to inputPreviewBytes, tabs
// drawn at Python's columns): they stay in /work, where a later cell can import them.
func newCellResultView(res guard.Result) *resultView {
	v := newResultView(res)
	for i, f := range res.Files {
		of := &v.Files[i]
		of.Preview, of.Binary, of.Cut = preview(f.Content, inputPreviewBytes)
		of.Preview = pysource.ShowTabsText(of.Preview)
	}
	return v
}

// checkSessionShown refuses an approval in a session whose settings digest is not the digest of
// the settings its status shows with the file contents and env values of its start input.
func checkSessionShown(st contract.SessionStatus, in contract.SessionInput, readErr error) error {
	if readErr != nil {
		return fmt.Errorf("the inbox cannot check the settings the status shows against the session's start: %w", readErr)
	}
	return shownSession(st, in)
}

// cellStatements writes the approve and deny statements of the waiting cell that principal may
// sign, each with a fresh approval id and an expiry of DecisionTTL (or the cell's approval
// deadline, when that comes first). An approval the status does not support is not offered,
// and the page says why.
func (s *Server) cellStatements(st contract.SessionStatus, v *sessionView, principal string) {
	now := s.cfg.Now()
	expires := now.Add(s.cfg.DecisionTTL)
	if wc := waitingCell(st); wc != nil && !wc.ApprovalDeadline.IsZero() && wc.ApprovalDeadline.Before(expires) {
		expires = wc.ApprovalDeadline
	}
	expires = expires.UTC().Truncate(time.Second)
	for _, sv := range []*statementView{&v.Approve, &v.Deny} {
		sv.Approve = sv == &v.Approve
		f, err := cellStatementFor(st, v.Waiting.Index, client.StatementOptions{Deny: !sv.Approve, Expires: expires, Reviewer: principal}, now)
		if err == nil {
			var b []byte
			if b, err = f.Statement(); err == nil {
				sv.ApprovalID, sv.Expires, sv.Text = f.ApprovalID, f.Expires.Format(time.RFC3339), string(b)
				continue
			}
		}
		*sv = statementView{}
		if sv == &v.Approve {
			v.ApproveRefused = err.Error()
		} else if v.Problem == "" {
			v.Problem = "no denial can be made: " + err.Error()
		}
	}
}

// envRows lists env vars for a page: each name with its value quoted and escaped
// (pysource.QuoteValue), a sensitive one as its length only, and "(value not read)" when values
// is nil.
func envRows(names, sensitive []string, values map[string]string) []kv {
	var out []kv
	for _, n := range names {
		val, ok := values[n]
		switch {
		case slices.Contains(sensitive, n) && ok:
			out = append(out, kv{K: visible(n), V: guard.SensitiveValue(len(val))})
		case slices.Contains(sensitive, n):
			out = append(out, kv{K: visible(n), V: "‹sensitive›"})
		case ok:
			out = append(out, kv{K: visible(n), V: pysource.QuoteValue(val)})
		default:
			out = append(out, kv{K: visible(n), V: "(value not read)"})
		}
	}
	return out
}
