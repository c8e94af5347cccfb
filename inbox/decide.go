package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
)

// decideRequest is what the run page posts after the passkey signed a statement.
type decideRequest struct {
	Approve    bool                        `json:"approve"`
	ApprovalID string                      `json:"approval_id"`
	Expires    string                      `json:"expires"`
	Statement  string                      `json:"statement"`
	Reason     string                      `json:"reason"`
	WebAuthn   *approval.WebAuthnAssertion `json:"webauthn"`
	// Edit is the reviewer's edit of the code, for an approval of the edited code (edit.go):
	// the statement then signs the edited request's digest. Optional.
	Edit *contract.DecisionEdit `json:"edit,omitempty"`
	// start is the run's start input, read for an approval (the edited digest is computed
	// from it).
	start contract.Input
}

// handleDecide verifies the reviewer's passkey assertion over this run's statement, exactly as
// the workflow will, and sends the decision as the update "decide". A refusal is shown to the
// reviewer and nothing is sent.
func (s *Server) handleDecide(w http.ResponseWriter, r *http.Request, who *signIn) {
	id := r.PathValue("id")
	var in decideRequest
	if !readDecision(w, r, &in, &in) {
		return
	}
	ri, ok := s.loadWaitingRun(w, r, id)
	if !ok {
		return
	}
	logged := []any{"workflow_id", id, "principal", who.principal}
	if in.Approve {
		start, readErr := s.readInput(r.Context(), id, ri.Status.RunID)
		in.start = start
		if err := checkShown(ri.Status, start, readErr); err != nil {
			s.refuseLogged(w, http.StatusConflict, "inbox: approval refused", "approval refused: ", err, logged)
			return
		}
	}
	d, err := s.verifyDecision(ri, in, who)
	if err != nil {
		s.refuseLogged(w, http.StatusForbidden, "inbox: decision refused", "decision refused: ", err, logged)
		return
	}
	keys, readErr := s.recordedReviewers(r.Context(), id, ri.Status.RunID)
	if err := checkedWith(keys, readErr, who.fingerprint, "run"); err != nil {
		s.refuseLogged(w, http.StatusForbidden, "inbox: decision refused", "decision refused: ", err, logged)
		return
	}
	res, err := s.sendDecision(r.Context(), ri, d)
	if err != nil {
		s.refuseLogged(w, http.StatusForbidden, "inbox: the workflow refused the decision", "the workflow refused the decision: ", err, logged)
		return
	}
	s.log.Info("inbox: decision sent", "workflow_id", id, "approve", d.Approve, "reviewer", d.Reviewer, "approval_id", d.ApprovalID)
	writeJSON(w, http.StatusOK, res)
}

// readDecision decodes the posted decision into in, of which d is the decision, and refuses one
// whose reason will not do; false when it refused.
func readDecision(w http.ResponseWriter, r *http.Request, in any, d *decideRequest) bool {
	if err := json.NewDecoder(r.Body).Decode(in); err != nil {
		writeRefusal(w, http.StatusBadRequest, "inbox: decision: "+err.Error())
		return false
	}
	if msg := reasonProblem(*d); msg != "" {
		writeRefusal(w, http.StatusBadRequest, msg)
		return false
	}
	return true
}

// loadWaitingRun reads run id for a decision on it, or an edit of it: it must wait for one. It
// refuses, and returns false, when it cannot be read or no longer waits.
func (s *Server) loadWaitingRun(w http.ResponseWriter, r *http.Request, id string) (*client.RunInfo, bool) {
	ri, err := s.loadRun(r.Context(), id)
	if err != nil {
		writeRefusal(w, http.StatusNotFound, err.Error())
		return nil, false
	}
	if !ri.Running || ri.Status.State != contract.StatusAwaitingApproval {
		writeRefusal(w, http.StatusConflict, "the run no longer waits for a decision (state "+ri.Status.State+"): another decision came first, or it expired or was cancelled; reload the page to see what happened")
		return nil, false
	}
	return ri, true
}

// refuseLogged logs msg with the attributes logged and err, and refuses with code: prefix and
// err's text.
func (s *Server) refuseLogged(w http.ResponseWriter, code int, msg, prefix string, err error, logged []any) {
	s.log.Warn(msg, append(slices.Clip(logged), "error", err)...)
	writeRefusal(w, code, outOfDate(err)+prefix+err.Error())
}

// outOfDate is what a refusal says first when the decision signed a statement that is not the
// run's (or cell's) any more: the page was read before its code, digest or run changed (an edit,
// a reset, a page left open). Empty for any other refusal.
func outOfDate(err error) string {
	var ref *approval.RefusalError
	if !errors.As(err, &ref) || ref.Reason != approval.ReasonStatementMismatch {
		return ""
	}
	what := "what it decides on"
	if ref.Field != "" {
		what = "its " + ref.Field
	}
	return "This page is out of date: " + what + " changed since the page was read, so what you read may not be what would run. " +
		"Reload the page and read it again before deciding. "
}

// verifyDecision checks the assertion against the run's statement built from what the inbox
// knows (workflow id, run id, digest, task queue), the decision and the reviewers file, and that
// the passkey is the one the reviewer signed in with.
func (s *Server) verifyDecision(ri *client.RunInfo, in decideRequest, who *signIn) (contract.Decision, error) {
	d, err := s.verifyAssertion(in, who, func(opts client.StatementOptions, now time.Time) (approval.Fields, error) {
		f, err := client.StatementFor(ri.Status, opts, now)
		if err != nil {
			return f, fmt.Errorf("inbox: %w", err)
		}
		if in.Edit != nil {
			if !in.Approve {
				return f, errors.New("inbox: an edit goes with an approval")
			}
			return editedFields(f, ri.Status, in.start, in.Edit.Code, in.Edit.OriginalDigest)
		}
		return f, nil
	})
	d.Edit = in.Edit
	return d, err
}

// verifyAssertion checks in's assertion against the statement that statementFor builds from
// what the inbox read and in's decision, approval id and expiry, with the principal the
// reviewer signed in as, against the reviewers file; the passkey must be the one they signed
// in with, and its counter must grow. It returns the decision to send.
func (s *Server) verifyAssertion(in decideRequest, who *signIn, statementFor func(client.StatementOptions, time.Time) (approval.Fields, error)) (contract.Decision, error) {
	expires, err := time.Parse(time.RFC3339, in.Expires)
	if err != nil {
		return contract.Decision{}, fmt.Errorf("inbox: expires %q: want RFC 3339", in.Expires)
	}
	reviewers, err := s.reviewers.get()
	if err != nil {
		return contract.Decision{}, fmt.Errorf("inbox: reviewers file: %w", err)
	}
	now := s.cfg.Now()
	want, err := statementFor(client.StatementOptions{Deny: !in.Approve, ApprovalID: in.ApprovalID, Expires: expires, Reviewer: who.principal}, now)
	if err != nil {
		return contract.Decision{}, err
	}
	v, err := approval.Verify(reviewers, want, approval.Proof{Reviewer: who.principal, WebAuthn: in.WebAuthn, Statement: in.Statement}, now)
	if err != nil {
		return contract.Decision{}, err
	}
	if v.Fingerprint != who.fingerprint {
		return contract.Decision{}, errors.New("inbox: sign with the passkey you signed in with")
	}
	if err := s.counters.Advance(v); err != nil {
		return contract.Decision{}, err
	}
	return client.AssertedDecision(want, in.WebAuthn, in.Statement, v.Principal, in.Reason), nil
}

// sendDecision sends d to the run the page was read from, through the client.
func (s *Server) sendDecision(ctx context.Context, ri *client.RunInfo, d contract.Decision) (contract.DecideResult, error) {
	ctx, cancel := context.WithTimeout(ctx, temporalTimeout)
	defer cancel()
	res, err := s.runs.DecideRun(ctx, ri.Status.WorkflowID, ri.Status.RunID, d)
	if err != nil {
		return res, fmt.Errorf("inbox: %w", err)
	}
	return res, nil
}

// runDownloads reads run id for a download: its input files, and a finished run's result.
func (s *Server) runDownloads(ctx context.Context, id string) (downloads, error) {
	ri, err := s.loadRun(ctx, id)
	if err != nil {
		return downloads{}, err
	}
	return downloads{runID: ri.Status.RunID, inputFiles: s.runInputFiles, output: func(w http.ResponseWriter, r *http.Request, what string) {
		if ri.Running {
			http.Error(w, "no finished RunCode run "+id, http.StatusNotFound)
			return
		}
		res, err := s.result(r.Context(), id)
		if err != nil {
			http.Error(w, "the run has no result: "+err.Error(), http.StatusNotFound)
			return
		}
		sendResultPart(w, &res, what, wantsInline(r))
	}}, nil
}

// runInputFiles reads the input files run runID of workflow id was started with.
func (s *Server) runInputFiles(ctx context.Context, id, runID string) (map[string][]byte, error) {
	in, err := s.readInput(ctx, id, runID)
	return in.Request.Files, err
}
