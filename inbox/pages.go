package inbox

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/human"
)

// pageData is what every page template gets.
type pageData struct {
	Title         string
	CSRF          string
	Principal     string
	Notice        string
	ReviewersPath string
	RPID          string
	Rows          []pendingRow
	Run           *runView
	Err           string
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

// runView is the run page.
type runView struct {
	ID, RunID, State  string
	Language          string
	CodeSize          string
	Lines             []codeLine
	Invisible         int
	Files             []inputFile
	FilesErr          string
	EnvNames          []string
	Secrets           []string
	Limits            []kv
	Network           string
	Egress            []string
	Backend           string
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
	Approve, Deny     statementView
	// ApproveRefused says why the page offers no approval (the status does not hash to its
	// digest); a denial stays possible.
	ApproveRefused string
	CredentialID   string
	Result         *resultView
	ResultErr      string
}

// resultView is a finished run's result: text only, never HTML.
type resultView struct {
	Outcome, ExitCode, Duration      string
	Stdout, Stderr                   string
	StdoutTruncated, StderrTruncated bool
	StdoutBinary, StderrBinary       bool
	Files                            []outputFile
	FilesTruncated                   bool
}

type outputFile struct {
	N       int
	Name    string
	Size    string
	Preview string
	Binary  bool
	Cut     bool
}

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{"visible": visible, "pathseg": url.PathEscape}
	pages := map[string]*template.Template{}
	for _, name := range []string{"signin", "list", "rows", "run"} {
		t, err := template.New(name).Funcs(funcs).ParseFS(embedded, "templates/layout.html", "templates/rowsbody.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("inbox: templates: %w", err)
		}
		pages[name] = t
	}
	return pages, nil
}

func (s *Server) pageData(sess *session, title string) pageData {
	d := pageData{Title: title}
	if sess != nil {
		d.CSRF, d.Principal = sess.csrf, sess.principal
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

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, sess *session) {
	s.renderPending(w, r, sess, "Pending runs", "list")
}

// handlePendingRows returns the table body alone, for the list's self-refresh.
func (s *Server) handlePendingRows(w http.ResponseWriter, r *http.Request, sess *session) {
	s.renderPending(w, r, sess, "", "rows")
}

// renderPending renders the template named page with the pending runs, or the error that kept
// them from being listed.
func (s *Server) renderPending(w http.ResponseWriter, r *http.Request, sess *session, title, page string) {
	data := s.pageData(sess, title)
	rows, err := s.pendingRows(r.Context())
	if err != nil {
		data.Err = err.Error()
	}
	data.Rows = rows
	s.render(w, page, data)
}

func (s *Server) handleRun(w http.ResponseWriter, r *http.Request, sess *session) {
	id := r.PathValue("id")
	ri, err := s.loadRun(r.Context(), id)
	if isNotFound(err) {
		http.Error(w, "no such RunCode run", http.StatusNotFound)
		return
	}
	data := s.pageData(sess, "Run "+visible(id))
	if err != nil {
		data.Err = err.Error()
		s.render(w, "run", data)
		return
	}
	v := s.runView(ri)
	v.CredentialID = sess.credentialID
	req, readErr := s.readInput(r.Context(), id, ri.status.RunID)
	if readErr != nil {
		v.FilesErr = readErr.Error()
	} else {
		v.Files = inputFiles(req)
	}
	if !ri.running {
		res, err := s.result(r.Context(), id)
		if err != nil {
			v.ResultErr = err.Error()
		} else {
			v.Result = newResultView(res)
		}
	}
	if v.Awaiting {
		if err := s.statements(ri, v, sess.principal); err != nil {
			data.Err = err.Error()
		}
		if err := checkShown(ri.status, req, readErr); err != nil {
			v.Approve, v.ApproveRefused = statementView{}, err.Error()
		}
	}
	data.Run = v
	s.render(w, "run", data)
}

// runView turns a status into the run page's fields.
func (s *Server) runView(ri *runInfo) *runView {
	st, req := ri.status, ri.status.Request
	v := &runView{
		ID: st.WorkflowID, RunID: st.RunID, State: st.State,
		Language: req.Language, CodeSize: human.Bytes(int64(req.CodeBytes)),
		Network: human.Network(req), Egress: req.Egress, Backend: req.Backend,
		SandboxTaskQueue: st.SandboxTaskQueue, Digest: req.Digest,
		Started:  ri.started.UTC().Format(time.RFC3339),
		Decision: st.Decision, Rejected: st.RejectedDecisions, Ignored: st.IgnoredDecisions,
		LastRejection: st.LastRejection, RunAttempts: st.RunAttempts, Error: st.Error,
		Awaiting: ri.running && st.State == contract.StatusAwaitingApproval,
	}
	v.Lines, v.Invisible = highlight(req.Code, req.Language)
	for _, n := range req.EnvNames {
		v.EnvNames = append(v.EnvNames, visible(n))
	}
	for _, n := range req.Secrets {
		v.Secrets = append(v.Secrets, visible(n))
	}
	v.Limits = human.Limits(req.Limits)
	for _, f := range human.Metadata(req.Metadata) {
		v.Metadata = append(v.Metadata, kv{K: f.K, V: visible(f.V)})
	}
	if !st.ApprovalDeadline.IsZero() && v.Awaiting {
		v.TimeLeft = human.Duration(st.ApprovalDeadline.Sub(s.cfg.Now()))
	}
	return v
}

// statements writes the approve and deny statements the reviewer, signed in as principal, may
// sign, each with a fresh approval id and an expiry of DecisionTTL.
func (s *Server) statements(ri *runInfo, v *runView, principal string) error {
	expires := s.cfg.Now().Add(s.cfg.DecisionTTL).UTC().Truncate(time.Second)
	for _, sv := range []*statementView{&v.Approve, &v.Deny} {
		sv.Approve = sv == &v.Approve
		f := runFields(ri, sv.Approve, uuid.NewString(), principal, expires)
		b, err := f.Statement()
		if err != nil {
			return fmt.Errorf("inbox: statement: %w", err)
		}
		sv.ApprovalID, sv.Expires, sv.Text = f.ApprovalID, expires.Format(time.RFC3339), string(b)
	}
	return nil
}

func newResultView(res guard.Result) *resultView {
	v := &resultView{
		Outcome: res.Outcome.String(), ExitCode: fmt.Sprint(res.ExitCode), Duration: res.Duration.String(),
		StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated, FilesTruncated: res.FilesTruncated,
	}
	v.Stdout, v.StdoutBinary, _ = preview(res.Stdout, outputPreviewBytes)
	v.Stderr, v.StderrBinary, _ = preview(res.Stderr, outputPreviewBytes)
	for i, f := range res.Files {
		of := outputFile{N: i, Name: visible(f.Name), Size: human.Bytes(f.Size)}
		of.Preview, of.Binary, of.Cut = preview(f.Content, previewBytes)
		v.Files = append(v.Files, of)
	}
	return v
}

// runFields is the statement of a decision on the run by principal: the version the run's
// check recorded (2 names the reviewer), its ids, digest and sandbox task queue.
func runFields(ri *runInfo, approve bool, approvalID, principal string, expires time.Time) approval.Fields {
	f := approval.Fields{
		Version:    max(ri.status.StatementVersion, approval.StatementVersion1),
		WorkflowID: ri.status.WorkflowID, RunID: ri.status.RunID, Digest: ri.status.Request.Digest,
		Approve: approve, ApprovalID: approvalID, SandboxTaskQueue: ri.status.SandboxTaskQueue, Expires: expires,
	}
	if f.Version >= approval.StatementVersion2 {
		f.Reviewer = principal
	}
	return f
}
