package client

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// conversationTemporal is a Temporal service holding a few closed workflows, each with its
// conversation, start time, start input and status, answering the calls a conversation's diff
// makes as the server would: the list (by the conversation the query names), the status query
// and the start event. Any other call panics (the embedded interface is nil).
type conversationTemporal struct {
	tclient.Client
	workflows []storedWorkflow
	queries   []string
}

// storedWorkflow is one workflow of conversationTemporal.
type storedWorkflow struct {
	id, runID, typ, conversation string
	started                      time.Time
	input, status                any
}

func (f *conversationTemporal) find(id, runID string) (storedWorkflow, error) {
	for _, w := range f.workflows {
		if w.id == id && w.runID == runID {
			return w, nil
		}
	}
	return storedWorkflow{}, serviceerror.NewNotFound("no workflow " + id)
}

func (f *conversationTemporal) ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	f.queries = append(f.queries, req.GetQuery())
	resp := &workflowservice.ListWorkflowExecutionsResponse{}
	for _, w := range f.workflows {
		if w.conversation != "" && strings.Contains(req.GetQuery(), contract.AttrConversation+" = '"+w.conversation+"'") {
			resp.Executions = append(resp.Executions, &workflow.WorkflowExecutionInfo{
				Execution: &commonpb.WorkflowExecution{WorkflowId: w.id, RunId: w.runID},
				Type:      &commonpb.WorkflowType{Name: w.typ},
				StartTime: timestamppb.New(w.started),
			})
		}
	}
	return resp, nil
}

func (f *conversationTemporal) QueryWorkflow(ctx context.Context, id, runID, name string, args ...any) (converter.EncodedValue, error) {
	w, err := f.find(id, runID)
	if err != nil {
		return nil, err
	}
	if want := map[string]string{contract.WorkflowName: contract.QueryStatus, contract.SessionWorkflowName: contract.QuerySessionStatus}[w.typ]; name != want {
		return nil, serviceerror.NewInvalidArgument("query " + name + " of a " + w.typ)
	}
	b, err := json.Marshal(w.status)
	return jsonValue(b), err
}

// jsonValue is a query's answer, as JSON.
type jsonValue []byte

func (v jsonValue) HasValue() bool    { return len(v) > 0 }
func (v jsonValue) Get(ptr any) error { return json.Unmarshal(v, ptr) }
func (f *conversationTemporal) WorkflowService() workflowservice.WorkflowServiceClient {
	return historyService{f: f}
}

type historyService struct {
	workflowservice.WorkflowServiceClient
	f *conversationTemporal
}

func (h historyService) GetWorkflowExecutionHistory(ctx context.Context, req *workflowservice.GetWorkflowExecutionHistoryRequest, opts ...grpc.CallOption) (*workflowservice.GetWorkflowExecutionHistoryResponse, error) {
	w, err := h.f.find(req.GetExecution().GetWorkflowId(), req.GetExecution().GetRunId())
	if err != nil {
		return nil, err
	}
	input, err := converter.GetDefaultDataConverter().ToPayloads(w.input)
	if err != nil {
		return nil, err
	}
	start := &historypb.HistoryEvent{Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
		WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
			WorkflowType: &commonpb.WorkflowType{Name: w.typ}, Input: input, OriginalExecutionRunId: w.runID}}}
	return &workflowservice.GetWorkflowExecutionHistoryResponse{History: &historypb.History{Events: []*historypb.HistoryEvent{start}}}, nil
}

// A session diffed against the conversation's previous run compares the settings only (the
// run's code is not the session's: its cells are reviewed one by one): the languages, the input
// files line by line, the egress, and the name of an env var whose value changed, never the
// value. A run after that session is diffed against the session the same way; a later session
// in another conversation has nothing before it.
func TestChangesBetweenRunsAndSessions(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	runReq := guard.Request{Code: "print(open('data.csv').read())\n", Conversation: "task-7",
		Settings: guard.Settings{Env: map[string]string{"MODE": "slow-secret"}, Files: map[string][]byte{"data.csv": []byte("a\n1\n")}}}
	sessionReq := guard.SessionRequest{Languages: []string{guard.Shell, guard.Python}, Conversation: "task-7",
		Settings: guard.Settings{Env: map[string]string{"MODE": "fast-secret"}, Files: map[string][]byte{"data.csv": []byte("a\n2\n")}, Egress: []string{"pypi.org"}}}
	laterRun := runReq
	laterRun.Code = "print(2)\n"
	f := &conversationTemporal{workflows: []storedWorkflow{
		{id: "run-1", runID: "r1", typ: contract.WorkflowName, conversation: "task-7", started: t0, input: contract.Input{Request: runReq},
			status: contract.Status{State: contract.StatusSucceeded, DecisionWait: contract.DecisionWait{Decision: &contract.DecisionRecord{Approve: true, Reviewer: "bob"}}}},
		{id: "session-1", runID: "s1", typ: contract.SessionWorkflowName, conversation: "task-7", started: t0.Add(time.Minute),
			input: contract.SessionInput{Request: sessionReq}, status: contract.SessionStatus{State: contract.SessionClosed}},
		{id: "run-2", runID: "r2", typ: contract.WorkflowName, conversation: "task-7", started: t0.Add(2 * time.Minute), input: contract.Input{Request: laterRun}},
	}}
	c := newFake(t, f)
	ctx := context.Background()

	ch, err := c.SessionChangesOf(ctx, "session-1", "s1", t0.Add(time.Minute), sessionReq)
	if err != nil {
		t.Fatal(err)
	}
	// Its status says "approved by bob"; its history records no decision, and no reviewers
	// file was given: unverified.
	if p := ch.Previous; p == nil || p.WorkflowID != "run-1" || p.Session || p.Verified || p.Outcome() != "unverified: no reviewers file to check its decision against was given" {
		t.Fatalf("session's previous %+v; want run-1, unverified", ch.Previous)
	}
	// With the reviewers file, still unverified: the history holds no check and no signed
	// decision (a namespace writer's run whose status says what it likes).
	withReviewers := c.WithReviewersFile(reviewertest.WriteAllowedSigners(t, t.TempDir(), reviewertest.New(t, "bob")), "")
	ch2, err := withReviewers.SessionChangesOf(ctx, "session-1", "s1", t0.Add(time.Minute), sessionReq)
	if p := ch2.Previous; err != nil || p == nil || p.Verified || !strings.HasPrefix(p.Outcome(), "unverified: ") || strings.Contains(p.Outcome(), "approved") {
		t.Fatalf("session's previous, checked against a reviewers file: %+v, %v; want it unverified", ch2.Previous, err)
	}
	if !slices.Equal(ch.ChangedFiles, []string{"files/data.csv", "settings"}) || ch.Notice != ConversationNotice {
		t.Errorf("session's diff changed %q; want the input file and the settings, not the code", ch.ChangedFiles)
	}
	for _, want := range []string{"-1\n+2\n", "-language: python\n", "+language: python, sh\n", "-egress: \n+egress: pypi.org\n",
		"+env values changed (not shown here): MODE\n"} {
		if !strings.Contains(ch.Diff, want) {
			t.Errorf("session's diff lacks %q:\n%s", want, ch.Diff)
		}
	}
	if strings.Contains(ch.Diff, "-secret") || strings.Contains(ch.Diff, "print(") {
		t.Errorf("session's diff shows an env value or the run's code:\n%s", ch.Diff)
	}
	if q := f.queries[0]; !strings.Contains(q, "'"+contract.WorkflowName+"'") || !strings.Contains(q, "'"+contract.SessionWorkflowName+"'") {
		t.Errorf("query %q; want both workflow types", q)
	}

	ch, err = c.ChangesOf(ctx, "run-2", "r2", t0.Add(2*time.Minute), laterRun)
	if err != nil {
		t.Fatal(err)
	}
	if p := ch.Previous; p == nil || p.WorkflowID != "session-1" || !p.Session || p.Kind() != "session" || p.Outcome() != "session closed, unverified (a session's state is its workflow's word)" {
		t.Fatalf("later run's previous %+v; want session-1, closed", ch.Previous)
	}
	if slices.Contains(ch.ChangedFiles, "code") || !strings.Contains(ch.Diff, "-language: python, sh\n+language: python\n") {
		t.Errorf("later run's diff against the session:\n%s", ch.Diff)
	}

	other := sessionReq
	other.Conversation = "task-8"
	f.workflows = append(f.workflows, storedWorkflow{id: "session-2", runID: "s2", typ: contract.SessionWorkflowName, conversation: "task-8", started: t0.Add(3 * time.Minute)})
	ch, err = c.SessionChangesOf(ctx, "session-2", "s2", t0.Add(3*time.Minute), other)
	if err != nil || ch == nil || ch.Previous != nil || ch.Diff != "" {
		t.Errorf("a session in another conversation: %+v, %v; want no previous and no diff", ch, err)
	}
	if ch, err := c.SessionChangesOf(ctx, "session-3", "s3", t0, guard.SessionRequest{}); ch != nil || err != nil {
		t.Errorf("a session in no conversation: %+v, %v; want none", ch, err)
	}
	if _, err := c.SessionChangesOf(ctx, "session-3", "s3", t0, guard.SessionRequest{Conversation: "x' OR '1'='1"}); guard.TypeOf(err) != guard.TypeToolUsageError {
		t.Errorf("a bad conversation: %v; want a ToolUsageError before any query", err)
	}
}

// GetWorkflowHistory is the history GetWorkflowExecutionHistory answers: the start event only.
func (f *conversationTemporal) GetWorkflowHistory(ctx context.Context, id, runID string, _ bool, _ enumspb.HistoryEventFilterType) tclient.HistoryEventIterator {
	resp, err := historyService{f: f}.GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
		Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID}})
	return &eventsIterator{events: resp.GetHistory().GetEvents(), err: err}
}

// eventsIterator iterates over events, or fails with err.
type eventsIterator struct {
	events []*historypb.HistoryEvent
	err    error
}

func (it *eventsIterator) HasNext() bool { return it.err != nil || len(it.events) > 0 }

func (it *eventsIterator) Next() (*historypb.HistoryEvent, error) {
	if it.err != nil {
		err := it.err
		it.err = nil
		return nil, err
	}
	e := it.events[0]
	it.events = it.events[1:]
	return e, nil
}

// The diff's settings show the checked limits, as a run's header does: a request that left the
// timeout to the policy (zero) is diffed with the timeout its check chose, never as "0s".
func TestChangesShowCheckedLimits(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	req := guard.Request{Code: "print(1)\n", Conversation: "task-9"}
	checked := func(d time.Duration) contract.Status {
		return contract.Status{State: contract.StatusSucceeded, Request: guard.Summary{Limits: guard.Limits{Timeout: d}}}
	}
	f := &conversationTemporal{workflows: []storedWorkflow{
		{id: "run-1", runID: "r1", typ: contract.WorkflowName, conversation: "task-9", started: t0, input: contract.Input{Request: req}, status: checked(30 * time.Second)},
		{id: "run-2", runID: "r2", typ: contract.WorkflowName, conversation: "task-9", started: t0.Add(time.Minute), input: contract.Input{Request: req}, status: checked(time.Minute)},
	}}
	c := newFake(t, f)
	cur := req
	cur.Limits = CheckedLimits(req.Limits, guard.Limits{Timeout: time.Minute})
	ch, err := c.ChangesOf(context.Background(), "run-2", "r2", t0.Add(time.Minute), cur)
	if err != nil {
		t.Fatal(err)
	}
	if want := "-timeout: 30s\n+timeout: 1m0s\n"; !strings.Contains(ch.Diff, want) {
		t.Errorf("diff:\n%s\nwant it to hold %q (the checked timeouts)", ch.Diff, want)
	}
	if strings.Contains(ch.Diff, "timeout: 0s") {
		t.Errorf("diff shows a requested zero timeout:\n%s", ch.Diff)
	}
	if got := CheckedLimits(guard.Limits{Timeout: time.Second}, guard.Limits{}); got.Timeout != time.Second {
		t.Errorf("CheckedLimits with nothing checked = %v; want the requested 1s", got.Timeout)
	}
}

// A conversation's diff lists what changed in the packages (added, removed, another version,
// another hash) and shows it in the diff's packages part, one hash a line; the same lock twice
// is no change.
func TestChangesDiffPackages(t *testing.T) {
	h := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
	req := func(lock string) guard.Request {
		return guard.Request{Code: "import alpha\n", Settings: guard.Settings{Packages: lock}}
	}
	prev := req("alpha==1.0 --hash=" + h("a") + "\ngamma==3 --hash=" + h("c") + "\ndelta==4 --hash=" + h("d"))
	cur := req("alpha==1.1 --hash=" + h("a") + "\nbeta==2 --hash=" + h("b") + "\ngamma==3 --hash=" + h("e"))
	ch := &Changes{}
	ch.diff(runCompared(prev), runCompared(cur))
	var got []string
	for _, c := range ch.Packages {
		got = append(got, c.String())
	}
	want := []string{"alpha: version 1.0 -> 1.1", "added beta==2", "removed delta==4", "gamma==3: hashes changed (+1 -1)"}
	if !slices.Equal(got, want) {
		t.Errorf("package changes %q; want %q", got, want)
	}
	if !slices.Contains(ch.ChangedFiles, "packages") {
		t.Errorf("changed %q; want packages among them", ch.ChangedFiles)
	}
	for _, line := range []string{"-alpha==1.0\n", "+alpha==1.1\n", "+beta==2\n", "-delta==4\n", "-    --hash=" + h("c") + "\n", "+    --hash=" + h("e") + "\n"} {
		if !strings.Contains(ch.Diff, line) {
			t.Errorf("the diff lacks %q:\n%s", line, ch.Diff)
		}
	}
	same := &Changes{}
	same.diff(runCompared(cur), runCompared(cur))
	if same.Diff != "" || same.Packages != nil {
		t.Errorf("the same lock twice: %q, %v; want no change", same.Diff, same.Packages)
	}
}
