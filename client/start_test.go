package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// fakeTemporal is a Temporal client that answers the few calls Start, RequireRunCode and Review
// make; any other call panics (the embedded interface is nil), which fails the test.
type fakeTemporal struct {
	tclient.Client
	pollers      int
	describeErr  error
	startErr     error
	workflowType string
	started      []tclient.StartWorkflowOptions
	described    int
}

func (f *fakeTemporal) DescribeTaskQueue(ctx context.Context, q string, typ enumspb.TaskQueueType) (*workflowservice.DescribeTaskQueueResponse, error) {
	f.described++
	if f.describeErr != nil {
		return nil, f.describeErr
	}
	resp := &workflowservice.DescribeTaskQueueResponse{}
	for range f.pollers {
		resp.Pollers = append(resp.Pollers, &taskqueuepb.PollerInfo{Identity: "w"})
	}
	return resp, nil
}

func (f *fakeTemporal) ExecuteWorkflow(ctx context.Context, opts tclient.StartWorkflowOptions, wf any, args ...any) (tclient.WorkflowRun, error) {
	f.started = append(f.started, opts)
	return nil, f.startErr
}

// NewWithStartWorkflowOperation and UpdateWithStartWorkflow are Start's update-with-start: the
// start is recorded, and fails with startErr.
func (f *fakeTemporal) NewWithStartWorkflowOperation(opts tclient.StartWorkflowOptions, wf any, args ...any) tclient.WithStartWorkflowOperation {
	f.started = append(f.started, opts)
	return failedStart{}
}

func (f *fakeTemporal) UpdateWithStartWorkflow(ctx context.Context, opts tclient.UpdateWithStartWorkflowOptions) (tclient.WorkflowUpdateHandle, error) {
	return nil, f.startErr
}

// failedStart is the start operation of an update-with-start that failed.
type failedStart struct{}

func (failedStart) Get(ctx context.Context) (tclient.WorkflowRun, error) {
	return nil, errors.New("not started")
}

func (f *fakeTemporal) DescribeWorkflowExecution(ctx context.Context, id, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflow.WorkflowExecutionInfo{
		Type: &commonpb.WorkflowType{Name: f.workflowType},
	}}, nil
}

// QueryWorkflow and WorkflowService's history read are the reads a statement sends beside its
// describe: the fake answers neither (the describe's refusal is what the tests want).
func (f *fakeTemporal) QueryWorkflow(ctx context.Context, id, runID, name string, args ...any) (converter.EncodedValue, error) {
	return nil, serviceerror.NewUnavailable("the fake answers no query")
}

func (f *fakeTemporal) WorkflowService() workflowservice.WorkflowServiceClient { return fakeService{} }

type fakeService struct {
	workflowservice.WorkflowServiceClient
}

func (fakeService) GetWorkflowExecutionHistory(ctx context.Context, req *workflowservice.GetWorkflowExecutionHistoryRequest, opts ...grpc.CallOption) (*workflowservice.GetWorkflowExecutionHistoryResponse, error) {
	return nil, serviceerror.NewUnavailable("the fake keeps no history")
}

func newFake(t *testing.T, f tclient.Client) *Client {
	t.Helper()
	c, err := New(Options{Temporal: f, Namespace: "ns", WorkerWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Finding 2 of issue 17: bytes that are not UTF-8 were replaced with U+FFFD by the JSON encoding
// of the start request; now nothing is sent.
func TestStartRefusesInvalidUTF8BeforeSending(t *testing.T) {
	for name, req := range map[string]guard.Request{
		"code":      {Code: "\xff\xfe"},
		"env value": {Code: "print(1)", Settings: guard.Settings{Env: map[string]string{"A": "x\xff"}}},
		"env name":  {Code: "print(1)", Settings: guard.Settings{Env: map[string]string{"A\xff": "x"}}},
		"file name": {Code: "print(1)", Settings: guard.Settings{Files: map[string][]byte{"\xffa.txt": []byte("x")}}},
	} {
		f := &fakeTemporal{pollers: 1}
		_, err := newFake(t, f).Start(context.Background(), req, StartOptions{})
		var tu *guard.ToolUsageError
		if !errors.As(err, &tu) || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("%s: Start = %v; want a ToolUsageError about UTF-8", name, err)
		}
		if len(f.started) != 0 || f.described != 0 {
			t.Errorf("%s: Start sent something to Temporal", name)
		}
	}
}

// Finding 4 of issue 17: inputs over Temporal's limits ended in raw gRPC errors; now they are a
// ToolUsageError that names the limit, before any call.
func TestStartRefusesOversizedRequest(t *testing.T) {
	tests := map[string]guard.Request{
		"huge file":       {Code: "print(1)", Settings: guard.Settings{Files: map[string][]byte{"big.bin": bytes.Repeat([]byte{0xff}, 3<<20)}}},
		"huge code":       {Code: strings.Repeat("#", 5<<20)},
		"base64 overhead": {Code: "print(1)", Settings: guard.Settings{Files: map[string][]byte{"a.bin": bytes.Repeat([]byte{1}, 1700<<10)}}},
	}
	for name, req := range tests {
		f := &fakeTemporal{pollers: 1}
		_, err := newFake(t, f).Start(context.Background(), req, StartOptions{})
		var tu *guard.ToolUsageError
		if !errors.As(err, &tu) || !strings.Contains(err.Error(), "2097152") {
			t.Errorf("%s: Start = %v; want a ToolUsageError naming the limit of 2097152 bytes", name, err)
		}
		if len(f.started) != 0 {
			t.Errorf("%s: Start called Temporal", name)
		}
	}
}

func TestDecisionRefusedBeforeSending(t *testing.T) {
	f := &fakeTemporal{workflowType: contract.WorkflowName}
	c := newFake(t, f)
	var tu *guard.ToolUsageError
	if _, err := c.Decide(context.Background(), "id", contract.Decision{ApprovalID: "a", Reviewer: "bob", Reason: "\xff"}); !errors.As(err, &tu) {
		t.Errorf("Decide with a bad reason = %v; want a ToolUsageError", err)
	}
	if _, err := c.Decide(context.Background(), "id", contract.Decision{ApprovalID: "a", Reviewer: "bob", Reason: strings.Repeat("r", 3<<20)}); !errors.As(err, &tu) {
		t.Errorf("Decide with a 3 MiB reason = %v; want a ToolUsageError", err)
	}
}

// Finding 1 of issue 17: an existing workflow id silently returned the old run.
func TestStartRefusesExistingWorkflowID(t *testing.T) {
	f := &fakeTemporal{pollers: 1, startErr: serviceerror.NewWorkflowExecutionAlreadyStarted("already started", "req", "run-1")}
	_, err := newFake(t, f).Start(context.Background(), guard.Request{Code: "print(1)"}, StartOptions{WorkflowID: "mine"})
	var ce *guard.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), `"mine"`) {
		t.Fatalf("Start = %v; want a ConfigError naming the id", err)
	}
	o := f.started[0]
	if !o.WorkflowExecutionErrorWhenAlreadyStarted || o.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL ||
		o.WorkflowIDReusePolicy != enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE {
		t.Fatalf("start options %+v; want an error when the id exists, open or closed", o)
	}
}

// Finding 3 of issue 17: with no worker on the task queue, run waited forever.
func TestStartFailsFastWithoutWorker(t *testing.T) {
	f := &fakeTemporal{}
	_, err := newFake(t, f).Start(context.Background(), guard.Request{Code: "print(1)"}, StartOptions{})
	var nw *NoWorkerError
	if !errors.As(err, &nw) || nw.TaskQueue != contract.DefaultTaskQueue || ErrorType(err) != TypeNoWorker {
		t.Fatalf("Start = %v; want a *NoWorkerError for %s", err, contract.DefaultTaskQueue)
	}
	if len(f.started) != 0 {
		t.Fatal("Start started a run no worker would check")
	}
}

// A client that may not describe the task queue starts the run as before.
func TestStartWithoutPermissionToDescribe(t *testing.T) {
	f := &fakeTemporal{describeErr: serviceerror.NewPermissionDenied("no", ""), startErr: errors.New("started")}
	_, err := newFake(t, f).Start(context.Background(), guard.Request{Code: "print(1)"}, StartOptions{})
	if len(f.started) != 1 || !strings.Contains(fmt.Sprint(err), "started") {
		t.Fatalf("Start = %v after %d starts; want the start tried", err, len(f.started))
	}
}

// Finding 3: show, approve, deny and result refuse a workflow of another type at once.
func TestRefuseOtherWorkflowTypes(t *testing.T) {
	f := &fakeTemporal{workflowType: "SomethingElse"}
	c := newFake(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	bob := reviewertest.New(t, "bob").Signer
	calls := map[string]func() error{
		"review":  func() error { _, err := c.Review(ctx, Run("x"), ReviewOptions{}); return err },
		"approve": func() error { _, err := c.Approve(ctx, Run("x"), "d", bob, ""); return err },
		"deny":    func() error { _, err := c.Deny(ctx, Run("x"), bob, "no"); return err },
		"result":  func() error { _, err := c.WaitResult(ctx, Run("x"), time.Second); return err },
		"read":    func() error { _, err := c.ReadRun(ctx, "x"); return err },
	}
	for name, call := range calls {
		err := call()
		var nr *NotRunCodeError
		if !errors.As(err, &nr) || nr.Type != "SomethingElse" {
			t.Errorf("%s = %v; want a *NotRunCodeError naming SomethingElse", name, err)
		}
	}
	out := NewErrorOutput(&NotRunCodeError{WorkflowID: "x", Type: "T"})
	if out.Error.Type != TypeNotRunCode {
		t.Errorf("error output type %q; want %s", out.Error.Type, TypeNotRunCode)
	}
}

// Finding 6: what show prints names the code's invisible characters and shows each as an escape.
func TestWriteJSONShowsSuspiciousCharacters(t *testing.T) {
	code := "access = 'user' # \u202e \u2066// admin\u2069 \u2066\nprint('\U000E0041')\n"
	r := Review{WorkflowID: "w", SuspiciousCharacters: pysource.SuspiciousCharacters(code)}
	r.Request.Code = code
	r.Warning = SuspiciousWarning(r.SuspiciousCharacters)
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, raw := range []string{"\u202e", "\u2066", "\u2069", "\U000E0041"} {
		if strings.Contains(out, raw) {
			t.Errorf("output holds %U raw: %s", []rune(raw)[0], out)
		}
	}
	for _, want := range []string{`\u202e`, `\u2066`, `\udb40\udc41`, "WARNING", "U+202E RIGHT-TO-LEFT OVERRIDE at line 1 column 19"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s: %s", want, out)
		}
	}
	var back Review
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back.Request.Code != code {
		t.Fatalf("the JSON does not decode to the same code: %q, %v", back.Request.Code, err)
	}
	if SuspiciousWarning(nil) != "" {
		t.Error("a warning for plain code")
	}
}
