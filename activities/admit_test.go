package activities

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// testInfo is the activity info of the test environment's run, at attempt.
func testInfo(attempt int32) activity.Info {
	info := activity.Info{TaskQueue: testTaskQueue, ScheduledTime: time.Now(), Attempt: attempt}
	info.WorkflowExecution.ID, info.WorkflowExecution.RunID = testWorkflowID, testRunID
	return info
}

// Admission refuses any attempt of the activity after the first, for a run and for a cell
// alike, though its approvals verify: an earlier attempt may have started the code. The refusal
// is an IntegrationError whose code may have started; the first attempt of the same input is
// admitted.
func TestAdmissionRefusesALaterAttempt(t *testing.T) {
	h := newSessionHost(t)
	hs := h.a.sessions.get(sessionKey{testWorkflowID, testRunID})
	cell := h.cell(1, "x = 1", h.chain, nil)
	a, err := New(Config{Backend: &echoBackend{}, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t)})
	if err != nil {
		t.Fatal(err)
	}
	c := checked(t, a, guard.Request{Code: "print(1)"})
	run := approved(t, c, fields(c.Digest))
	for _, tc := range []struct {
		name  string
		host  *Activities
		admit func(info activity.Info) *admission
	}{
		{"a run", a, func(info activity.Info) *admission { return a.runAdmission(info, c, run) }},
		{"a cell", h.a, func(info activity.Info) *admission { return h.a.cellAdmission(info, hs, cell) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ie *guard.IntegrationError
			_, err := tc.host.verifyAdmission(tc.admit(testInfo(2)))
			if !errors.As(err, &ie) || !ie.CodeMayHaveStarted || !strings.Contains(ie.Op, "attempt 2") {
				t.Fatalf("attempt 2: %v; want an IntegrationError whose code may have started", err)
			}
			if _, err := tc.host.verifyAdmission(tc.admit(testInfo(1))); err != nil {
				t.Fatalf("attempt 1: %v; want it admitted", err)
			}
		})
	}
}

// A cell whose run's outcome is unknown (the backend failed after the code may have started)
// leaves the sandbox taking no more cells: the next, genuinely approved over the same chain, is
// a SandboxLost and does not run.
func TestSessionCellAfterAnUnknownOutcomeIsLost(t *testing.T) {
	h := newSessionHost(t)
	h.backend.CellErr = &guard.IntegrationError{Op: "sessiontest: exec", Err: errors.New("connection reset"), CodeMayHaveStarted: true}
	if _, err := h.run(h.cell(1, "x = 1", h.chain, nil)); err == nil {
		t.Fatal("cell 1: no error; want the backend's failure")
	}
	_, err := h.run(h.cell(2, "print(1)", h.chain, nil))
	if guard.TypeOf(contract.FromFailure(err)) != guard.TypeSandboxLost {
		t.Fatalf("cell 2 after an unknown outcome: %v; want a SandboxLost", err)
	}
	if n := h.backend.Cells(); n != 1 {
		t.Errorf("%d cells ran; want 1 (cell 1, whose outcome is unknown)", n)
	}
}

// A cell whose packages did not install (a PackageError: nothing of it ran) leaves the sandbox
// as it was: the next cell runs in it.
func TestSessionCellAfterAPackageErrorRuns(t *testing.T) {
	h := newSessionHost(t)
	h.backend.CellErr = &guard.PackageError{Reason: guard.PackageHashMismatch, Package: "gamma", Msg: "the wheel's sha256 is not the lock's"}
	if _, err := h.run(h.cell(1, "x = 1", h.chain, nil)); guard.TypeOf(contract.FromFailure(err)) != guard.TypePackageError {
		t.Fatalf("cell 1: %v; want the backend's PackageError", err)
	}
	if _, err := h.run(h.cell(2, "print(1)", h.chain, nil)); err != nil {
		t.Fatalf("cell 2 after a PackageError: %v; want it run", err)
	}
	if n := h.backend.Cells(); n != 2 {
		t.Errorf("%d cells reached the backend; want 2", n)
	}
}

// The host refuses an input that carries more approvals than any quorum can ask, though each is
// a distinct reviewer's genuine approval: it verifies no more than guard.MaxQuorum signatures.
func TestVerifyApprovalsRefusesMoreThanMaxQuorum(t *testing.T) {
	var reviewers []*reviewertest.Reviewer
	for i := range guard.MaxQuorum + 1 {
		reviewers = append(reviewers, reviewertest.New(t, fmt.Sprintf("reviewer%d", i)))
	}
	file := reviewertest.WriteAllowedSigners(t, t.TempDir(), reviewers...)
	a, err := New(Config{Backend: &echoBackend{}, Sink: &MemorySink{}, ReviewersFile: file})
	if err != nil {
		t.Fatal(err)
	}
	c := checked(t, a, guard.Request{Code: "print(1)"})
	var ds []contract.Decision
	for i, r := range reviewers {
		f := fields(c.Digest)
		f.ApprovalID, f.Reviewer = uuid.NewString(), fmt.Sprintf("reviewer%d", i)
		ds = append(ds, r.Decision(t, f))
	}
	in := contract.RunInput{Checked: c, Decision: ds[0], Decisions: ds}
	_, err = a.verifyAdmission(a.runAdmission(testInfo(1), c, in))
	var ar *guard.ApprovalRefused
	if !errors.As(err, &ar) || ar.Reason != guard.RefusedQuorum || !strings.Contains(ar.Msg, fmt.Sprintf("over %d", guard.MaxQuorum)) {
		t.Fatalf("%d approvals: %v; want an ApprovalRefused (quorum) saying over %d", len(ds), err, guard.MaxQuorum)
	}
	in.Decisions = ds[:guard.MaxQuorum]
	if _, err := a.verifyAdmission(a.runAdmission(testInfo(1), c, in)); err != nil {
		t.Fatalf("%d approvals: %v; want them verified", guard.MaxQuorum, err)
	}
}

// A cell's admission checks the input against this host's record of the sandbox, not only its
// approvals: a chain other than the sandbox's is refused though the approval was signed over the
// sandbox's own; a cell this host's policy refuses is refused with the policy's error; and a
// decision for another digest is refused before any key is read.
func TestCellAdmissionBindsTheSandboxsRecord(t *testing.T) {
	h := newSessionHost(t)
	hs := h.a.sessions.get(sessionKey{testWorkflowID, testRunID})
	admit := func(in contract.CellRunInput) error {
		_, err := h.a.verifyAdmission(h.a.cellAdmission(testInfo(1), hs, in))
		return err
	}
	wantMismatch := func(what string, err error) {
		t.Helper()
		var ar *guard.ApprovalRefused
		if !errors.As(err, &ar) || ar.Reason != guard.RefusedMismatch {
			t.Errorf("%s: %v; want an ApprovalRefused (mismatch)", what, err)
		}
	}
	otherChain := h.cell(1, "x = 1", h.chain, nil)
	otherChain.Chain = guard.ChainNext(h.chain, "sha256:x", "sha256:y")
	wantMismatch("another chain", admit(otherChain))

	ruby := h.cell(1, "x = 1", h.chain, nil)
	ruby.Cell.Language, ruby.Cell.CodeDigest = "ruby", guard.CellCodeDigest("ruby", "x = 1")
	err := admit(ruby)
	wantMismatch("a language the session does not offer", err)
	if tu := (*guard.ToolUsageError)(nil); !errors.As(err, &tu) {
		t.Errorf("a language the session does not offer: %v; want the policy's ToolUsageError in it", err)
	}

	h.a.reviewers = "/nonexistent/allowed_signers"
	wantMismatch("a decision for another digest, with no reviewers file", admit(h.cell(1, "x = 1", h.chain, func(f *approval.Fields) {
		f.Digest = "sha256:" + strings.Repeat("0", 64)
	})))
}
