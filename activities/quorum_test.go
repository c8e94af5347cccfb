package activities

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/codec"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/historytest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// The sandbox host counts approvals against its own policy (quorum 2 here), whatever the
// workflow accepted: one approval, the same approval twice, two by one principal (two keys),
// two by one key (two principals), a denial among them, an edit whose editor approved nothing or
// that names another digest than the request's, a second approval for another digest,
// all refused as ApprovalRefused; two distinct reviewers' approvals are accepted, in order.
func TestVerifyQuorumCountsOnTheHost(t *testing.T) {
	alice, bob := testReviewer(), reviewertest.New(t, "bob")
	alice2 := reviewertest.New(t, "alice") // a second key of principal alice
	multi := reviewertest.New(t, "carol,ops")
	file := reviewertest.WriteAllowedSigners(t, t.TempDir(), alice, bob, alice2, multi)
	a, err := New(Config{Backend: &echoBackend{}, Sink: &MemorySink{}, ReviewersFile: file, Policy: guard.Policy{Quorum: 2}})
	if err != nil {
		t.Fatal(err)
	}
	c := checked(t, a, guard.Request{Code: "print(1)"})
	info := activity.Info{TaskQueue: testTaskQueue, ScheduledTime: time.Now()}
	info.WorkflowExecution.ID, info.WorkflowExecution.RunID = testWorkflowID, testRunID
	sign := func(r *reviewertest.Reviewer, principal string, approve bool) contract.Decision {
		f := fields(c.Digest)
		f.ApprovalID, f.Reviewer, f.Approve = uuid.NewString(), principal, approve
		return r.Decision(t, f)
	}
	da, db := sign(alice, "alice", true), sign(bob, "bob", true)
	input := func(ds ...contract.Decision) contract.RunInput {
		return contract.RunInput{Checked: c, Decision: ds[0], Decisions: ds}
	}
	edited := func(in contract.RunInput, editor string) contract.RunInput {
		in.Edit = &guard.Edit{Editor: editor, OriginalDigest: "sha256:original", Digest: c.Digest}
		return in
	}
	for _, tc := range []struct {
		name string
		in   contract.RunInput
		want guard.RefusedReason
	}{
		{"one approval (Decision alone)", contract.RunInput{Checked: c, Decision: da}, guard.RefusedQuorum},
		{"one approval", input(da), guard.RefusedQuorum},
		{"the same approval twice", input(da, da), guard.RefusedQuorum},
		{"one principal, two keys", input(da, sign(alice2, "alice", true)), guard.RefusedQuorum},
		{"one key, two principals", input(sign(multi, "carol", true), sign(multi, "ops", true)), guard.RefusedQuorum},
		{"a denial among them", input(da, sign(bob, "bob", false)), guard.RefusedNoApproval},
		{"decision is not the first", contract.RunInput{Checked: c, Decision: db, Decisions: []contract.Decision{da, db}}, guard.RefusedMismatch},
		{"an edit whose editor approved nothing", edited(input(da, db), "carol"), guard.RefusedQuorum},
		{"an edit that names another digest", func() contract.RunInput {
			in := edited(input(da, db), "bob")
			in.Edit.Digest = "sha256:" + strings.Repeat("0", 64)
			return in
		}(), guard.RefusedMismatch},
		{"a second approval for another digest", input(da, func() contract.Decision {
			f := fields("sha256:" + strings.Repeat("0", 64))
			f.ApprovalID, f.Reviewer = uuid.NewString(), "bob"
			return bob.Decision(t, f)
		}()), guard.RefusedMismatch},
	} {
		_, err := a.verifyAdmission(a.runAdmission(info, c, tc.in))
		var ar *guard.ApprovalRefused
		if !errors.As(err, &ar) || ar.Reason != tc.want {
			t.Errorf("%s: %v; want an ApprovalRefused (%s)", tc.name, err, tc.want)
		}
	}
	vs, err := a.verifyAdmission(a.runAdmission(info, c, edited(input(da, db), "bob")))
	if err != nil || len(vs) != 2 || vs[0].Principal != "alice" || vs[1].Principal != "bob" {
		t.Fatalf("alice and bob: %v, %v; want both verified, in order", vs, err)
	}
	got := approvalsOf([]contract.Decision{da, db}, vs)
	if len(got) != 2 || got[0].ApprovalID != da.ApprovalID || got[1].Reviewer != "bob" || got[1].Fingerprint == "" {
		t.Errorf("approvals of the result %+v; want alice's then bob's, with fingerprints", got)
	}
	if err := allValid(vs).StillValid(time.Now().Add(2 * time.Hour)); !errors.Is(err, approval.ReasonExpired) {
		t.Errorf("StillValid two hours on: %v; want expired", err)
	}
}

// A session's cells under a quorum (issue 32): a worker whose policy needs 2 for the session's
// cells records it when the session is checked; a sandbox host whose own policy needs 2 counts
// each cell's approvals again: one approval (as an input recorded before session quorums
// carries it, or alone in Decisions), the same reviewer twice, or one key for two principals
// are refused (ApprovalRefused, quorum) and nothing runs; two distinct reviewers' approvals run
// the cell once, and its result names both.
func TestSessionsUnderAQuorum(t *testing.T) {
	h := newSessionHost(t)
	bob, multi := reviewertest.New(t, "bob"), reviewertest.New(t, "carol,ops")
	h.a.reviewers = reviewertest.WriteAllowedSigners(t, t.TempDir(), testReviewer(), bob, multi)
	h.a.policy.Quorum = 2
	check, err := h.a.SessionCheck(context.Background(), contract.SessionCheckInput{Request: guard.SessionRequest{}})
	if err != nil || check.Quorum != 2 {
		t.Fatalf("SessionCheck under quorum 2: quorum %d, %v; want 2 recorded", check.Quorum, err)
	}
	h.a.policy.Quorum, h.a.policy.RiskyQuorum = 1, 2
	if check, err := h.a.SessionCheck(context.Background(), contract.SessionCheckInput{Request: guard.SessionRequest{}}); err != nil || check.Quorum != 1 {
		t.Errorf("SessionCheck of a session without network, egress or secrets under risky quorum 2: quorum %d, %v; want 1", check.Quorum, err)
	}
	h.a.policy.Quorum, h.a.policy.RiskyQuorum = 2, 0

	in := h.cell(1, "print(1)", h.chain, nil)
	sign := func(r *reviewertest.Reviewer, principal string) contract.Decision {
		f := reviewertest.Fields(testWorkflowID, testRunID, in.Decision.Digest, testTaskQueue, true)
		f.ApprovalID, f.Reviewer = uuid.NewString(), principal
		return r.Decision(t, f)
	}
	with := func(ds ...contract.Decision) contract.CellRunInput {
		out := in
		out.Decision, out.Decisions = ds[0], ds
		return out
	}
	db := sign(bob, "bob")
	for _, tc := range []struct {
		name string
		in   contract.CellRunInput
	}{
		{"one approval (Decision alone)", in},
		{"one approval", with(in.Decision)},
		{"the same approval twice", with(in.Decision, in.Decision)},
		{"one key, two principals", with(sign(multi, "carol"), sign(multi, "ops"))},
	} {
		_, err := h.run(tc.in)
		wantRefused(t, tc.name+" on a host that needs 2", err, guard.RefusedQuorum)
	}
	if n := h.backend.Cells(); n != 0 {
		t.Fatalf("%d cells ran; want none", n)
	}
	res, err := h.run(with(in.Decision, db))
	if err != nil {
		t.Fatalf("alice's and bob's approvals: %v; want the cell run", err)
	}
	if h.backend.Cells() != 1 || res.ApprovalID != in.Decision.ApprovalID || res.Reviewer != "alice" || len(res.Approvals) != 2 ||
		res.Approvals[0].Reviewer != "alice" || res.Approvals[1].Reviewer != "bob" || res.Approvals[1].ApprovalID != db.ApprovalID {
		t.Fatalf("%d cells ran; result approval %s by %s, approvals %+v; want one, alice's first then bob's", h.backend.Cells(), res.ApprovalID, res.Reviewer, res.Approvals)
	}
}

// startedWith is a run's history that starts with req, its input encoded by dc.
func startedWith(t *testing.T, dc converter.DataConverter, req guard.Request) historytest.Events {
	t.Helper()
	input, err := dc.ToPayloads(contract.Input{Request: req})
	if err != nil {
		t.Fatal(err)
	}
	return historytest.Events{{EventId: 1, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{Input: input}}}}
}

// The sandbox host checks an edit against the run's start (its first event, which the server
// wrote): the edit's original digest must be the started request's, and the edited request may
// differ from it in its code only. A forged original digest, an "edit" that changes an env value
// too, and a history whose first event is no start are refused; the true edit is taken. The
// sandbox activity checks its edit so before it claims the approval: a forged original digest
// runs nothing, though its approval verifies.
func TestCheckEditAgainstTheStart(t *testing.T) {
	b := &echoBackend{}
	a, err := New(Config{Backend: b, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t)})
	if err != nil {
		t.Fatal(err)
	}
	started := guard.Request{Code: "print('started')", Settings: guard.Settings{Env: map[string]string{"MODE": "dry"}}}
	orig := checked(t, a, started)
	editedReq := started
	editedReq.Code = "print('edited')"
	edited := checked(t, a, editedReq)
	widerReq := editedReq
	widerReq.Env = map[string]string{"MODE": "wet"}
	wider := checked(t, a, widerReq)
	start := startedWith(t, converter.GetDefaultDataConverter(), started)
	info := activity.Info{TaskQueue: testTaskQueue}
	info.WorkflowExecution.ID, info.WorkflowExecution.RunID = testWorkflowID, testRunID
	edit := func(c guard.Checked, original string) *guard.Edit {
		return &guard.Edit{Editor: "alice", OriginalDigest: original, Digest: c.Digest}
	}
	if err := a.checkEdit(context.Background(), start, info, edited, edit(edited, orig.Digest)); err != nil {
		t.Fatalf("the true edit: %v; want it taken", err)
	}
	for _, tc := range []struct {
		name string
		h    HistoryReader
		c    guard.Checked
		e    *guard.Edit
	}{
		{"a forged original digest", start, edited, edit(edited, edited.Digest)},
		{"an edit that changes an env value too", start, wider, edit(wider, orig.Digest)},
		{"a history that starts with no start", historytest.Events{historytest.Other(1, "x")}, edited, edit(edited, orig.Digest)},
	} {
		err := a.checkEdit(context.Background(), tc.h, info, tc.c, tc.e)
		var ar *guard.ApprovalRefused
		if !errors.As(err, &ar) || ar.Reason != guard.RefusedMismatch {
			t.Errorf("%s: %v; want an ApprovalRefused (mismatch)", tc.name, err)
		}
	}
	a.history = &historytest.Log{Events: start, ScheduleCaller: true}
	in := approved(t, edited, fields(edited.Digest))
	in.Edit = edit(edited, edited.Digest)
	_, err = runActivity(t, a, in)
	wantRefused(t, "the sandbox activity of an edit with a forged original digest", err, guard.RefusedMismatch)
	if len(b.ran) != 0 {
		t.Fatalf("the backend ran %d times; want none", len(b.ran))
	}
	in.Edit = edit(edited, orig.Digest)
	if _, err := runActivity(t, a, in); err != nil || len(b.ran) != 1 {
		t.Errorf("the sandbox activity of the true edit: %v, %d runs; want it run once", err, len(b.ran))
	}
}

// With payloads encrypted, the host reads the start with the data converter it is given (the
// worker's, with its payload codec); without it, it cannot read the start and refuses the edit.
func TestCheckEditReadsAnEncryptedStart(t *testing.T) {
	ring, err := codec.ParseKeyRing([]byte("k1:" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	dc := codec.DataConverter(ring)
	plain, err := New(Config{Backend: &echoBackend{}, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t)})
	if err != nil {
		t.Fatal(err)
	}
	withCodec, err := New(Config{Backend: &echoBackend{}, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t), DataConverter: dc})
	if err != nil {
		t.Fatal(err)
	}
	started := guard.Request{Code: "print('started')"}
	orig := checked(t, plain, started)
	edited := checked(t, plain, guard.Request{Code: "print('edited')"})
	start := startedWith(t, dc, started)
	info := activity.Info{TaskQueue: testTaskQueue}
	e := &guard.Edit{Editor: "alice", OriginalDigest: orig.Digest, Digest: edited.Digest}
	if err := withCodec.checkEdit(context.Background(), start, info, edited, e); err != nil {
		t.Errorf("with the codec: %v; want the edit taken", err)
	}
	var ar *guard.ApprovalRefused
	if err := plain.checkEdit(context.Background(), start, info, edited, e); !errors.As(err, &ar) {
		t.Errorf("without the codec: %v; want an ApprovalRefused", err)
	}
}
