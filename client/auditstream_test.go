package client

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	updatepb "go.temporal.io/api/update/v1"
	"go.temporal.io/sdk/converter"
	"golang.org/x/crypto/ssh"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/hosttest"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// history builds events for streamRecords, numbering them and stamping their times.
type history struct {
	t      *testing.T
	dc     converter.DataConverter
	events []*historypb.HistoryEvent
	at     time.Time
}

func newHistory(t *testing.T) *history {
	return &history{t: t, dc: converter.GetDefaultDataConverter(), at: time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)}
}

func (h *history) payloads(v any) *commonpb.Payloads {
	p, err := h.dc.ToPayloads(v)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// add appends an event of type typ with attrs, dt after the previous one (negative: earlier, as a
// buffered signal's time is).
func (h *history) add(typ enumspb.EventType, dt time.Duration, set func(e *historypb.HistoryEvent)) {
	h.at = h.at.Add(dt)
	e := &historypb.HistoryEvent{EventId: int64(len(h.events) + 1), EventType: typ, EventTime: timestamppb.New(h.at)}
	set(e)
	h.events = append(h.events, e)
}

func (h *history) started(workflowType string, in any) {
	h.add(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, 0, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
			WorkflowType: &commonpb.WorkflowType{Name: workflowType}, Input: h.payloads(in)}}
	})
}

func (h *history) marker(result any) {
	h.add(enumspb.EVENT_TYPE_MARKER_RECORDED, time.Second, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{
			MarkerName: localActivityMarker, Details: map[string]*commonpb.Payloads{"result": h.payloads(result)}}}
	})
}

func (h *history) signal(name string, dt time.Duration, v any) {
	h.add(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, dt, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_WorkflowExecutionSignaledEventAttributes{WorkflowExecutionSignaledEventAttributes: &historypb.WorkflowExecutionSignaledEventAttributes{
			SignalName: name, Input: h.payloads(v)}}
	})
}

func (h *history) failed(typ, msg string) {
	h.add(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED, time.Second, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_WorkflowExecutionFailedEventAttributes{WorkflowExecutionFailedEventAttributes: &historypb.WorkflowExecutionFailedEventAttributes{
			Failure: &failurepb.Failure{Message: msg, FailureInfo: &failurepb.Failure_ApplicationFailureInfo{ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{Type: typ}}}}}
	})
}

func kindsOf(recs []keyedRecord) string {
	var k []string
	for _, r := range recs {
		k = append(k, r.rec.Kind)
	}
	return strings.Join(k, " ")
}

// TestStreamRecordsOfARun: a run's history gives its check (digest, agent, quorum, the policy
// hash the check recorded under rules.policy_hash), each
// decision (not judged before a check), each claim, and its refusal and end, in order, each with
// the schema version; a signal written after a workflow task with the earlier time of its arrival
// takes the time of the event before it, so records of one run never go back in time.
func TestStreamRecordsOfARun(t *testing.T) {
	h := newHistory(t)
	h.started(contract.WorkflowName, contract.Input{Request: guard.Request{Code: "print(1)", Settings: guard.Settings{Metadata: guard.Metadata{Agent: "loop-1"}}}})
	h.marker(withRules(t, contract.CheckResult{Checked: guard.Checked{Digest: "sha256:abc", Language: guard.Python}, Quorum: 2}, "sha256:p"))
	h.signal(contract.SignalApproval, -300*time.Millisecond, contract.Decision{ApprovalID: "a1", Digest: "sha256:abc", Approve: true, Reviewer: "alice", Signature: "not a signature"})
	h.signal(contract.SignalSandboxClaim, time.Second, contract.SandboxClaim{RunID: "r", ApprovalID: "a1", ActivityID: "9", Commitment: "sha256:c"})
	h.failed(guard.TypeReceiptRefused, "the receipt does not verify")
	recs, err := streamRecords(h.dc, "wf", "r", h.events)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := kindsOf(recs), "check decision refusal claim refusal end"; got != want {
		t.Fatalf("kinds %q; want %q", got, want)
	}
	check, dec, decRef, claim, ref, end := recs[0].rec, recs[1].rec, recs[2].rec, recs[3].rec, recs[4].rec, recs[5].rec
	if decRef.Refusal.Stage != "decision" || decRef.Refusal.Type != guard.TypeApprovalRefused || !strings.Contains(decRef.Refusal.Message, "a1") || decRef.EventID != dec.EventID {
		t.Errorf("refusal of the decision %+v; want stage decision, %s, naming a1, of its event", decRef.Refusal, guard.TypeApprovalRefused)
	}
	if check.Check.Digest != "sha256:abc" || check.Check.Quorum != 2 || check.Check.PolicyHash != "sha256:p" || check.Agent != "loop-1" || check.Subject != contract.SubjectRun || check.EventID != 2 {
		t.Errorf("check %+v %+v; want digest sha256:abc, quorum 2, agent loop-1, subject run, event 2", check, check.Check)
	}
	if !dec.Decision.Judged || dec.Decision.Accepted || dec.Decision.Refused == "" || dec.Decision.Reviewer != "alice" {
		t.Errorf("decision %+v; want judged, refused (its signature does not verify), by alice", dec.Decision)
	}
	if !dec.Time.Equal(check.Time) {
		t.Errorf("the buffered decision's time %s; want the check's %s (never earlier)", dec.Time, check.Time)
	}
	if claim.Claim == nil || claim.Claim.Commitment != "sha256:c" {
		t.Errorf("claim %+v", claim.Claim)
	}
	if ref.Refusal == nil || ref.Refusal.Stage != "receipt" || ref.Refusal.Type != guard.TypeReceiptRefused || ref.EventID != end.EventID {
		t.Errorf("refusal %+v; want stage receipt, type %s, of the close event", ref.Refusal, guard.TypeReceiptRefused)
	}
	if end.End.Outcome != "error" || end.End.Record == nil || end.End.Record.Checked.Digest != "sha256:abc" || recs[4].key.compare(recs[5].key) >= 0 {
		t.Errorf("end %+v; want outcome error, the whole record, after the refusal", end.End)
	}
	for i, r := range recs {
		if r.rec.SchemaVersion != contract.AuditStreamVersion || r.rec.WorkflowID != "wf" || r.rec.RunID != "r" {
			t.Errorf("record %d: %+v", i, r.rec)
		}
		if i > 0 && recs[i-1].key.compare(r.key) >= 0 {
			t.Errorf("record %d's key is not after record %d's", i, i-1)
		}
	}
}

// TestStreamRecordsOfARefusedStart: a run that failed before its check recorded anything was
// refused by the check (or the policy): a refusal at stage "check" with the failure's type and
// message, then its end.
func TestStreamRecordsOfARefusedStart(t *testing.T) {
	h := newHistory(t)
	h.started(contract.WorkflowName, contract.Input{Request: guard.Request{Code: "puts 1", Language: "ruby"}})
	h.failed(guard.TypeToolUsageError, "language ruby is not offered")
	recs, err := streamRecords(h.dc, "wf", "r", h.events)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := kindsOf(recs), "refusal end"; got != want {
		t.Fatalf("kinds %q; want %q", got, want)
	}
	if r := recs[0].rec.Refusal; r.Stage != "check" || r.Type != guard.TypeToolUsageError || r.Message != "language ruby is not offered" {
		t.Errorf("refusal %+v", r)
	}
	if e := recs[1].rec.End; e.Record != nil || e.Error == nil || e.Error.Type != guard.TypeToolUsageError {
		t.Errorf("end %+v; want no record (nothing was checked) and the failure", e)
	}
}

// TestStreamRecordsOfASession: a session's check, a cell's decision (as sent) and its claim carry
// the cell's index and subject "cell"; the session's close is an end with subject "session".
func TestStreamRecordsOfASession(t *testing.T) {
	h := newHistory(t)
	h.started(contract.SessionWorkflowName, contract.SessionInput{})
	h.marker(contract.SessionCheckResult{Session: guard.CheckedSession{Digest: "sha256:s", CheckedSettings: guard.CheckedSettings{Metadata: guard.Metadata{Agent: "nb"}}}, Quorum: 2})
	h.add(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED, time.Second, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_WorkflowExecutionUpdateAcceptedEventAttributes{WorkflowExecutionUpdateAcceptedEventAttributes: &historypb.WorkflowExecutionUpdateAcceptedEventAttributes{
			AcceptedRequest: &updatepb.Request{Input: &updatepb.Input{Name: contract.UpdateDecideCell,
				Args: h.payloads(contract.CellDecision{Cell: 1, Decision: contract.Decision{ApprovalID: "c1", Approve: true, Reviewer: "bob"}})}}}}
	})
	h.signal(contract.SignalSandboxClaim, time.Second, contract.SandboxClaim{RunID: "r", ApprovalID: "c1", Cell: 1, Commitment: "sha256:k"})
	h.add(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, time.Second, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_WorkflowExecutionCompletedEventAttributes{WorkflowExecutionCompletedEventAttributes: &historypb.WorkflowExecutionCompletedEventAttributes{}}
	})
	recs, err := streamRecords(h.dc, "s1", "r", h.events)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := kindsOf(recs), "check decision claim end"; got != want {
		t.Fatalf("kinds %q; want %q", got, want)
	}
	check, dec, claim, end := recs[0].rec, recs[1].rec, recs[2].rec, recs[3].rec
	if check.Subject != contract.SubjectSession || check.Check.Digest != "sha256:s" || check.Check.Quorum != 2 || check.Agent != "nb" {
		t.Errorf("check %+v", check)
	}
	if dec.Subject != contract.SubjectCell || dec.Cell == nil || *dec.Cell != 1 || dec.Decision.Judged || dec.Decision.Reviewer != "bob" {
		t.Errorf("decision %+v %+v; want cell 1's, as sent, by bob", dec, dec.Decision)
	}
	if claim.Subject != contract.SubjectCell || claim.Cell == nil || *claim.Cell != 1 {
		t.Errorf("claim %+v", claim)
	}
	if end.Subject != contract.SubjectSession || end.End.Outcome != "closed" || end.End.Record == nil || end.End.Record.Session == nil {
		t.Errorf("end %+v", end.End)
	}
}

// TestCursor: a cursor reads back as the key it was written from, orders as keys do, and anything
// else (another version, not base64, not JSON, no time) is refused.
func TestCursor(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 123456789, time.UTC)
	k := streamKey{Time: at, WorkflowID: "wf|x", RunID: "r", EventID: 7, Seq: 1}
	got, err := parseCursor(k.cursor())
	if err != nil || got.compare(k) != 0 || !got.Time.Equal(at) {
		t.Fatalf("parseCursor(cursor(%+v)) = %+v, %v", k, got, err)
	}
	later := []streamKey{
		{Time: at.Add(time.Nanosecond)},
		{Time: at, WorkflowID: "wf|y"},
		{Time: at, WorkflowID: "wf|x", RunID: "s"},
		{Time: at, WorkflowID: "wf|x", RunID: "r", EventID: 8},
		{Time: at, WorkflowID: "wf|x", RunID: "r", EventID: 7, Seq: 2},
	}
	for _, l := range later {
		if k.compare(l) != -1 || l.compare(k) != 1 {
			t.Errorf("%+v is not before %+v", k, l)
		}
	}
	for _, bad := range []string{"", "!!", "bm90IGpzb24", streamKeyWire(t, `{"v":"other/v1","t":"2026-12-06T10:00:00Z"}`), streamKeyWire(t, `{"v":"`+contract.AuditStreamVersion+`"}`)} {
		if _, err := parseCursor(bad); err == nil {
			t.Errorf("parseCursor(%q) accepted it", bad)
		}
	}
}

func streamKeyWire(t *testing.T, s string) string {
	t.Helper()
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

// TestVerifyAuditStreamShapes: a record of another schema version, a kind that carries another
// kind's body or none, an unknown kind, or one without its run or cursor fails; so does an empty
// stream; and a check whose digest is not the run's (from its end record) fails.
func TestVerifyAuditStreamShapes(t *testing.T) {
	good := func() contract.AuditStreamRecord {
		return contract.AuditStreamRecord{SchemaVersion: contract.AuditStreamVersion, Cursor: "c", Kind: contract.StreamCheck,
			WorkflowID: "wf", RunID: "r", Check: &contract.StreamCheckBody{Digest: "sha256:a"}}
	}
	if v := VerifyAuditStream([]contract.AuditStreamRecord{good()}, nil, nil); !v.OK {
		t.Fatalf("a well-formed check record: %+v", v)
	}
	for name, edit := range map[string]func(*contract.AuditStreamRecord){
		"version":    func(r *contract.AuditStreamRecord) { r.SchemaVersion = "sandboxflow-audit-stream/v0" },
		"two bodies": func(r *contract.AuditStreamRecord) { r.Claim = &contract.SandboxClaim{} },
		"no body":    func(r *contract.AuditStreamRecord) { r.Check = nil },
		"wrong body": func(r *contract.AuditStreamRecord) { r.Kind = contract.StreamEnd },
		"kind":       func(r *contract.AuditStreamRecord) { r.Kind = "approve" },
		"no run":     func(r *contract.AuditStreamRecord) { r.RunID = "" },
		"no cursor":  func(r *contract.AuditStreamRecord) { r.Cursor = "" },
	} {
		r := good()
		edit(&r)
		if v := VerifyAuditStream([]contract.AuditStreamRecord{r}, nil, nil); v.OK {
			t.Errorf("%s: verified", name)
		}
	}
	if v := VerifyAuditStream(nil, nil, nil); v.OK {
		t.Error("an empty stream verified")
	}
	end := contract.AuditStreamRecord{SchemaVersion: contract.AuditStreamVersion, Cursor: "c", Kind: contract.StreamEnd, WorkflowID: "wf", RunID: "r",
		End: &contract.StreamEndBody{Outcome: "error", Record: &contract.AuditRecord{Audit: contract.AuditVersion, WorkflowID: "wf", RunID: "r", Checked: guard.Checked{Digest: "sha256:b"}}}}
	v := VerifyAuditStream([]contract.AuditStreamRecord{good(), end}, nil, nil)
	if v.OK || !strings.Contains(v.Checks[0].Error, "is not the run's") {
		t.Errorf("a check whose digest is not its run's: %+v", v)
	}
}

// withRules is cr's JSON with "rules": {"policy_hash": hash}, as a check under a policy file
// records it.
func withRules(t *testing.T, cr contract.CheckResult, hash string) map[string]any {
	t.Helper()
	b, err := json.Marshal(cr)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["rules"] = map[string]string{"policy_hash": hash}
	return m
}

// TestSettled: records come out in key order across runs, each with its own cursor; one later
// than the horizon waits for a later poll; one at or before the last key is taken as emitted on the
// first poll (the follower the cursor came from wrote it), and on a later poll comes out marked
// late with the cursor of the record before it; nothing comes out twice.
func TestSettled(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	rec := func(wf string, sec int, id int64) keyedRecord {
		k := streamKey{Time: at.Add(time.Duration(sec) * time.Second), WorkflowID: wf, RunID: "r", EventID: id}
		return keyedRecord{key: k, rec: contract.AuditStreamRecord{WorkflowID: wf, EventID: id}}
	}
	a := &followedRun{seen: map[streamKey]bool{}, records: []keyedRecord{rec("a", 1, 1), rec("a", 4, 2), rec("a", 9, 3)}}
	b := &followedRun{seen: map[streamKey]bool{}, records: []keyedRecord{rec("b", 2, 1), rec("b", 5, 2)}}
	last := streamKey{Time: at.Add(3 * time.Second)}
	got := settled([]*followedRun{a, b}, &last, at.Add(6*time.Second), true)
	names := func(rs []contract.AuditStreamRecord) string {
		var s []string
		for _, r := range rs {
			s = append(s, fmt.Sprintf("%s%d late=%t", r.WorkflowID, r.EventID, r.Late))
		}
		return strings.Join(s, " ")
	}
	if n := names(got); n != "a2 late=false b2 late=false" {
		t.Fatalf("first poll: %s; want a2 b2 (a1 and b1 are before the cursor, a3 after the horizon)", n)
	}
	if k, err := parseCursor(got[0].Cursor); err != nil || k.compare(a.records[1].key) != 0 {
		t.Errorf("a2's cursor reads %+v, %v; want a2's key", k, err)
	}
	// A run the visibility store listed late: its record at 4 s is before b2's (5 s).
	c := &followedRun{seen: map[streamKey]bool{}, records: []keyedRecord{rec("c", 4, 7)}}
	got = settled([]*followedRun{a, b, c}, &last, at.Add(10*time.Second), false)
	if n := names(got); n != "c7 late=true a3 late=false" {
		t.Fatalf("second poll: %s; want c7 late, then a3", n)
	}
	if k, _ := parseCursor(got[0].Cursor); k.compare(b.records[1].key) != 0 {
		t.Errorf("the late record's cursor is %+v; want b2's, the last written before it", k)
	}
	if got = settled([]*followedRun{a, b, c}, &last, at.Add(time.Hour), false); len(got) != 0 {
		t.Errorf("third poll: %s; want nothing again", names(got))
	}
}

// TestVerifyCellEnd: a cell's end verifies when its receipt is by a listed host, of this session
// and this cell, and signs its result; another cell's index, another session's receipt, a changed
// stdout and an unlisted host each fail.
func TestVerifyCellEnd(t *testing.T) {
	host, other := hosttest.New(t, "host-1"), hosttest.New(t, "host-2")
	hosts, err := receipt.LoadHosts(host.File)
	if err != nil {
		t.Fatal(err)
	}
	res := guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Digest: "sha256:c", Stdout: []byte("42\n")}
	signed := func(h *hosttest.Host, workflowID string) guard.Result {
		pub := h.Signer.PublicKey()
		rec, err := receipt.Sign(h.Signer, receipt.New(receipt.Run{WorkflowID: workflowID, RunID: "r", Digest: "sha256:c", Started: time.Now(), Ended: time.Now(),
			Cell: &receipt.Cell{Index: 2}, Host: receipt.Host{Name: h.Name, PublicKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))), Fingerprint: ssh.FingerprintSHA256(pub)}}, res))
		if err != nil {
			t.Fatal(err)
		}
		r := res
		r.Receipt = &rec
		return r
	}
	end := func(r guard.Result, cell int) contract.AuditStreamRecord {
		return contract.AuditStreamRecord{SchemaVersion: contract.AuditStreamVersion, Cursor: "c", Kind: contract.StreamEnd, Subject: contract.SubjectCell,
			WorkflowID: "s1", RunID: "r", Cell: &cell, End: &contract.StreamEndBody{Outcome: "succeeded", Result: &r}}
	}
	if err := verifyCellEnd(end(signed(host, "s1"), 2), hosts); err != nil {
		t.Fatalf("cell 2's end: %v", err)
	}
	changed := signed(host, "s1")
	changed.Stdout = []byte("43\n")
	for name, r := range map[string]contract.AuditStreamRecord{
		"another cell":    end(signed(host, "s1"), 3),
		"another session": end(signed(host, "s2"), 2),
		"changed stdout":  end(changed, 2),
		"unlisted host":   end(signed(other, "s1"), 2),
	} {
		if err := verifyCellEnd(r, hosts); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
	if v := VerifyAuditStream([]contract.AuditStreamRecord{end(changed, 2)}, nil, hosts); v.OK {
		t.Error("VerifyAuditStream took a cell end with a changed stdout")
	}
}

// TestStreamRefusalBySandboxHost: a run that failed with the type its sandbox activity failed with
// was refused by the sandbox host (stage "sandbox"), even when that type is ApprovalRefused.
func TestStreamRefusalBySandboxHost(t *testing.T) {
	h := newHistory(t)
	h.started(contract.WorkflowName, contract.Input{Request: guard.Request{Code: "print(1)"}})
	h.marker(contract.CheckResult{Checked: guard.Checked{Digest: "sha256:abc", Language: guard.Python}})
	h.add(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, time.Second, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
			ActivityType: &commonpb.ActivityType{Name: contract.RunActivityName}}}
	})
	scheduled := h.events[len(h.events)-1].EventId
	h.add(enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED, time.Second, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_ActivityTaskFailedEventAttributes{ActivityTaskFailedEventAttributes: &historypb.ActivityTaskFailedEventAttributes{
			ScheduledEventId: scheduled, Failure: &failurepb.Failure{Message: "the host's rules refuse it",
				FailureInfo: &failurepb.Failure_ApplicationFailureInfo{ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{Type: guard.TypeApprovalRefused}}}}}
	})
	h.failed(guard.TypeApprovalRefused, "the host's rules refuse it")
	recs, err := streamRecords(h.dc, "wf", "r", h.events)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := kindsOf(recs), "check refusal end"; got != want {
		t.Fatalf("kinds %q; want %q", got, want)
	}
	if r := recs[1].rec.Refusal; r.Stage != "sandbox" || r.Type != guard.TypeApprovalRefused {
		t.Errorf("refusal %+v; want stage sandbox, %s", r, guard.TypeApprovalRefused)
	}
}
