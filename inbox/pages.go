package inbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/guard/human"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// pageData is what every page template gets.
type pageData struct {
	Title         string
	CSRF          string
	Principal     string
	Notice        string
	ReviewersPath string
	RPID          string
	// Origin is the inbox's configured origin: the page's script refuses to start a passkey
	// ceremony at any other (where the browser would refuse it with no reason given).
	Origin  string
	Rows    []pendingRow
	Run     *runView
	Session *sessionView
	Err     string
}

// kv is a labelled value.
type kv = human.Field

// statementView is one decision the reviewer may sign.
type statementView struct {
	Approve    bool
	ApprovalID string
	Expires    string
	Text       string
}

// barView is the decision bar (templates/decisionbar.html): what it decides and which decisions
// the page offers.
type barView struct {
	What          string
	Approve, Deny bool
	// Refused says why the run or session will refuse this reviewer's decision, if it will.
	Refused string
}

// Bar is the run page's decision bar.
func (v runView) Bar() barView {
	return barView{What: "run", Approve: v.ApproveRefused == "", Deny: true, Refused: v.NotCheckedWith}
}

// DownloadBase is where the run page's downloads are.
func (v runView) DownloadBase() string { return "/run/" + url.PathEscape(v.ID) }

// runView is the run page.
type runView struct {
	ID, RunID, State string
	Language         string
	CodeSize         string
	Lines            []codeLine
	Invisible        int
	// Names are the code's names that can read as others (pysource.ConfusableNames), one line each.
	Names []string
	// Tabs says the code holds tabs, drawn as pysource.TabMarker at Python's columns.
	Tabs     bool
	Files    []inputFile
	FilesErr string
	// Env is each env var as "NAME" and its value quoted and escaped (pysource.QuoteValue), a
	// sensitive one as its length (guard.SensitiveValue).
	Env     []kv
	Secrets []string
	// Packages are the lock's packages, installed before the code runs.
	Packages []packageView
	// Warnings are the input files the interpreter may run without the code calling them
	// (pysource.StartupWarnings), each as one line.
	Warnings []string
	// PolicyWarnings are the policy rules' warnings; PolicyMissing what approvals the rules'
	// groups still need while the run waits ("1 approval from security").
	PolicyWarnings []string
	PolicyMissing  []string
	Limits         []kv
	Network        string
	Egress         []string
	Backend        string
	// Image is the checked request's image ID (what the code runs in), when it names one.
	Image             string
	SandboxTaskQueue  string
	Digest            string
	Metadata          []kv
	Started, TimeLeft string
	Decision          *contract.DecisionRecord
	Rejected, Ignored int
	LastRejection     string
	RunAttempts       int
	Error             string
	Awaiting          bool
	// Cancellable offers the Cancel form; Cancel is the accepted cancel request, if any.
	Cancellable   bool
	Cancel        *guard.Cancellation
	Approve, Deny statementView
	// Quorum is how many approvals the run needs (0 for runs checked before quorums);
	// Approvals those it has; Edit the reviewer's edit its code is, if any.
	Quorum    int
	Approvals []contract.DecisionRecord
	Edit      *guard.Edit
	// Code is the code as text, for the editor (approve with edits).
	Code string
	// ApproveRefused says why the page offers no approval (the status does not hash to its
	// digest); a denial stays possible.
	ApproveRefused string
	// NotCheckedWith says that the signed-in passkey was listed after the run was checked, so the
	// run will refuse its decision (notCheckedWithError).
	NotCheckedWith string
	CredentialID   string
	Result         *resultView
	ResultErr      string
	// Changes is what changed since the previous run of the request's conversation (nil: it
	// names none).
	Changes *changesView
}

// resultView is a finished run's result: the result itself (so the page can show everything the
// host measured), with its output and files as previews, text only, never HTML.
type resultView struct {
	guard.Result
	ExitCode, Duration         string
	Stdout, Stderr             string
	StdoutBinary, StderrBinary bool
	// StdoutCut and StderrCut say the page shows only the first outputPreviewBytes of the stream.
	StdoutCut, StderrCut bool
	Files                []outputFile
	// Shown is what the code showed (Result.Outputs), one entry for each thing shown.
	Shown []shownThing
	// Links is where the result's downloads are: the prefix of its output-N and file-N
	// (setLinks).
	Links string
	// LiveMismatch says that the live output this page showed while the code ran is not the
	// result's (liveShown.check); "" when it is, or none was shown.
	LiveMismatch string
	// Phases is where a run's time went (client.PhasesText); "" for a cell, or when the run's
	// history could not be read.
	Phases string
}

type outputFile struct {
	N       int
	Name    string
	Size    string
	Preview string
	Binary  bool
	Cut     bool
	// Picture says the file is a PNG or JPEG the inbox draws (by its name and its bytes,
	// checkPicture), of size Width x Height.
	Picture bool
	picture
}

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{"visible": visible, "lines": previewLines, "pathseg": url.PathEscape, "maxReasonBytes": func() int { return contract.MaxReasonBytes }}
	pages := map[string]*template.Template{}
	for _, name := range []string{"signin", "list", "rows", "run", "session"} {
		t, err := template.New(name).Funcs(funcs).ParseFS(embedded, "templates/layout.html", "templates/rowsbody.html", "templates/inputfiles.html", "templates/conversation.html", "templates/live.html", "templates/outputs.html", "templates/decisionbar.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("inbox: templates: %w", err)
		}
		pages[name] = t
	}
	return pages, nil
}

func (s *Server) pageData(who *signIn, title string) pageData {
	d := pageData{Title: title, Origin: s.cfg.Origin}
	if who != nil {
		d.CSRF, d.Principal = who.csrf, who.principal
	}
	return d
}

// render executes a page into a buffer first, so that a template error is a clean 500.
func (s *Server) render(w http.ResponseWriter, name string, data pageData) {
	var b bytes.Buffer
	entry := "layout"
	if name == "rows" {
		entry = "rows"
	}
	if err := s.pages[name].ExecuteTemplate(&b, entry, data); err != nil {
		s.log.Error("inbox: render", "page", name, "error", err)
		http.Error(w, "inbox: could not render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, who *signIn) {
	s.renderPending(w, r, who, "Pending runs", "list")
}

// handlePendingRows returns the table body alone, for the list's self-refresh.
func (s *Server) handlePendingRows(w http.ResponseWriter, r *http.Request, who *signIn) {
	s.renderPending(w, r, who, "", "rows")
}

// renderPending renders the template named page with the pending runs, or the error that kept
// them from being listed.
func (s *Server) renderPending(w http.ResponseWriter, r *http.Request, who *signIn, title, page string) {
	data := s.pageData(who, title)
	rows, err := s.pendingRows(r.Context())
	if err != nil {
		data.Err = err.Error()
	}
	data.Rows = rows
	s.render(w, page, data)
}

// subjectPage says how a run's or a session's page reads its subject: the page's template and
// title, how to load it, which load errors mean there is none, and what a 404 says then.
type subjectPage[T any] struct {
	page, title string
	load        func(ctx context.Context, id string) (T, error)
	isNotFound  func(error) bool
	notFound    string
}

// loadPage reads the subject of the page at r's id for who: it answers 404 when there is none and
// renders the page with the error when it could not be read, and then returns false.
func loadPage[T any](s *Server, w http.ResponseWriter, r *http.Request, who *signIn, p subjectPage[T]) (T, string, pageData, bool) {
	id := r.PathValue("id")
	subject, err := p.load(r.Context(), id)
	if p.isNotFound(err) {
		http.Error(w, p.notFound, http.StatusNotFound)
		return subject, id, pageData{}, false
	}
	data := s.pageData(who, p.title+" "+visible(id))
	if err != nil {
		data.Err = err.Error()
		s.render(w, p.page, data)
		return subject, id, data, false
	}
	return subject, id, data, true
}

func (s *Server) handleRun(w http.ResponseWriter, r *http.Request, who *signIn) {
	ri, id, data, ok := loadPage(s, w, r, who, subjectPage[*client.RunInfo]{page: "run", title: "Run", load: s.loadRun, isNotFound: isNotFound, notFound: "no such RunCode run"})
	if !ok {
		return
	}
	v := s.runView(ri)
	v.CredentialID = who.credentialID
	in, readErr := s.readInput(r.Context(), id, ri.Status.RunID)
	if readErr != nil {
		v.FilesErr = readErr.Error()
	} else {
		v.setStartInput(ri.Status.Request, in.Request)
		v.Changes = s.changes(r.Context(), ri, in)
	}
	// A run whose status is already final may not have closed when it was described (the
	// workflow sets its last state, then returns): its result comes within a moment, so wait for
	// it (bounded) rather than draw a final state with no result.
	if !ri.Running || ri.Status.State == contract.StatusSucceeded || ri.Status.State == contract.StatusFailed || ri.Status.State == contract.StatusTimedOut {
		res, err := s.result(r.Context(), id)
		if err != nil {
			v.ResultErr = err.Error()
		} else {
			v.Result = newResultView(res)
			v.Result.setLinks(v.DownloadBase(), 0)
			v.Result.LiveMismatch = s.shown.check(liveKey{signIn: who.id, id: id}, res)
			// Where the run's time went, from its history (the audit record's phases).
			if rec, err := s.runs.Audit(r.Context(), id, ri.Status.RunID); err == nil {
				v.Result.Phases = client.PhasesText(rec.Phases)
			}
		}
	}
	if v.Awaiting {
		if err := s.statements(ri, v, who.principal); err != nil {
			data.Err = err.Error()
		}
		if err := checkShown(ri.Status, in, readErr); err != nil {
			v.Approve, v.ApproveRefused = statementView{}, err.Error()
		}
		keys, keysErr := s.recordedReviewers(r.Context(), id, ri.Status.RunID)
		if err := checkedWith(keys, keysErr, who.fingerprint, "run"); err != nil {
			v.NotCheckedWith = err.Error()
		}
	}
	data.Run = v
	s.render(w, "run", data)
}

// runView turns a status into the run page's fields.
func (s *Server) runView(ri *client.RunInfo) *runView {
	st, req := ri.Status, ri.Status.Request
	v := &runView{
		ID: st.WorkflowID, RunID: st.RunID, State: st.State,
		Language: req.Language, CodeSize: human.Bytes(int64(req.CodeBytes)),
		Network: human.Network(req), Egress: req.Egress, Backend: req.Backend, Image: req.Image,
		SandboxTaskQueue: st.SandboxTaskQueue, Digest: req.Digest,
		Started:  ri.Started.UTC().Format(time.RFC3339),
		Decision: st.Decision, Rejected: st.RejectedDecisions, Ignored: st.IgnoredDecisions,
		LastRejection: st.LastRejection, RunAttempts: st.RunAttempts, Error: st.Error,
		Awaiting:    ri.Running && st.State == contract.StatusAwaitingApproval,
		Cancellable: cancellable(ri), Cancel: st.Cancel,
		Quorum: st.Quorum, Approvals: st.Approvals, Edit: st.Edit, Code: req.Code,
	}
	v.Lines, v.Invisible = highlight(req.Code, req.Language)
	v.Tabs = strings.Contains(req.Code, "\t")
	for _, c := range pysource.ConfusableNames(req.Code) {
		v.Names = append(v.Names, c.Where()+": "+c.Name+" "+c.Reason)
	}
	v.setEnv(req, nil)
	for _, w := range req.Warnings {
		v.Warnings = append(v.Warnings, w.String())
	}
	if st.Rules != nil {
		for _, w := range st.Rules.Warnings {
			v.PolicyWarnings = append(v.PolicyWarnings, visible(w))
		}
		if v.Awaiting {
			for _, m := range st.Missing {
				v.PolicyMissing = append(v.PolicyMissing, visible(m))
			}
		}
	}
	for _, n := range req.Secrets {
		v.Secrets = append(v.Secrets, visible(n))
	}
	v.Packages = packageViews(req.Packages)
	v.Limits = human.Limits(req.Limits)
	for _, f := range human.Metadata(req.Metadata) {
		v.Metadata = append(v.Metadata, kv{K: f.K, V: visible(f.V)})
	}
	if !st.ApprovalDeadline.IsZero() && v.Awaiting {
		v.TimeLeft = human.Duration(st.ApprovalDeadline.Sub(s.cfg.Now()))
	}
	return v
}

// setEnv fills the env rows from the status's names and, once the start input is read, its
// values: each quoted and escaped, a sensitive one as its length only.
func (v *runView) setEnv(sum guard.Summary, values map[string]string) {
	v.Env = envRows(sum.EnvNames, sum.SensitiveEnv, values)
}

// setStartInput shows what the start input holds beyond the status: the input files, the env
// values and the start-up warnings computed from the files' names themselves (not the status's
// copy, which a workflow worker answered).
func (v *runView) setStartInput(sum guard.Summary, req guard.Request) {
	v.Files = inputFiles(req)
	// The names too come from the start input: a status could leave one out.
	sum.EnvNames = slices.Sorted(maps.Keys(req.Env))
	v.setEnv(sum, req.Env)
	for _, n := range slices.Sorted(maps.Keys(req.Files)) {
		for _, c := range pysource.FileConfusableNames(n, req.Files[n]) {
			v.Names = append(v.Names, c.Where()+": "+c.Name+" "+c.Reason)
		}
	}
	v.Warnings = v.Warnings[:0]
	for _, w := range pysource.StartupWarnings(slices.Sorted(maps.Keys(req.Files))) {
		v.Warnings = append(v.Warnings, w.String())
	}
}

// statements writes the approve and deny statements the reviewer, signed in as principal, may
// sign (client.StatementFor), each with a fresh approval id and an expiry of DecisionTTL.
func (s *Server) statements(ri *client.RunInfo, v *runView, principal string) error {
	now := s.cfg.Now()
	expires := now.Add(s.cfg.DecisionTTL).UTC().Truncate(time.Second)
	for _, sv := range []*statementView{&v.Approve, &v.Deny} {
		sv.Approve = sv == &v.Approve
		f, err := client.StatementFor(ri.Status, client.StatementOptions{Deny: !sv.Approve, Expires: expires, Reviewer: principal}, now)
		if sv.Approve && errors.Is(err, client.ErrStatementVersion) {
			// A status asking for an approval no sandbox host accepts: only a denial is offered.
			v.Approve, v.ApproveRefused = statementView{}, err.Error()
			continue
		}
		if err != nil {
			return fmt.Errorf("inbox: %w", err)
		}
		b, err := f.Statement()
		if err != nil {
			return fmt.Errorf("inbox: statement: %w", err)
		}
		sv.ApprovalID, sv.Expires, sv.Text = f.ApprovalID, f.Expires.Format(time.RFC3339), string(b)
	}
	return nil
}

func newResultView(res guard.Result) *resultView {
	v := &resultView{Result: res, ExitCode: fmt.Sprint(res.ExitCode), Duration: res.Duration.String()}
	v.Stdout, v.StdoutBinary, v.StdoutCut = preview(res.Stdout, outputPreviewBytes)
	v.Stderr, v.StderrBinary, v.StderrCut = preview(res.Stderr, outputPreviewBytes)
	v.StdoutBinary, v.StderrBinary = v.StdoutBinary || res.StdoutBinary, v.StderrBinary || res.StderrBinary
	for i, f := range res.Files {
		of := outputFile{N: i, Name: visible(f.Name), Size: human.Bytes(f.Size)}
		of.Preview, of.Binary, of.Cut = preview(f.Content, previewBytes)
		if t := contentType(safeName(f.Name), f.Content); t == guard.MIMEPNG || t == guard.MIMEJPEG {
			of.picture, _ = checkPicture(t, f.Content)
			of.Picture = true
		}
		v.Files = append(v.Files, of)
	}
	v.Shown = shownThings(res.Outputs)
	return v
}

// setLinks says where the result's downloads are: base is the page's DownloadBase, cell the
// session's cell the result is of (0 for a run).
func (v *resultView) setLinks(base string, cell int) {
	v.Links = base + "/download/"
	if cell > 0 {
		v.Links += fmt.Sprintf("cell-%d-", cell)
	}
}

// previewLines splits a file's preview into its lines, each with its line feed, for the page to
// draw each as a block of its own: a line too long for the page goes on in rows that start left
// of every line (as in the code), so its tail cannot pass for a line of the file.
func previewLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > 1 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}
