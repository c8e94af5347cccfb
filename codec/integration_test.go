//go:build integration

package codec

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Secrets the test workflow carries: code and an env value in its input, output in its result, a
// signal value, and an error message that quotes output. None may reach history in the clear.
const (
	codeSecret   = "print('CODE-SECRET-c0de')"
	envSecret    = "ENV-SECRET-e4v1"
	outputSecret = "OUTPUT-SECRET-0u7p"
	signalSecret = "SIGNAL-SECRET-519n"
	errorSecret  = "ERROR-SECRET-e7707"
)

var allSecrets = []string{"CODE-SECRET", envSecret, outputSecret, signalSecret, errorSecret}

type echoInput struct {
	Code          string
	Env           map[string]string
	WaitForSignal bool
	Fail          bool
}

type echoOutput struct {
	Stdout string
	Code   string
	Env    string
	Signal string
}

const goSignal = "go"

type echoActivities struct{}

// Run echoes its input into its output, or fails with an error whose message quotes output.
func (*echoActivities) Run(_ context.Context, in echoInput) (echoOutput, error) {
	if in.Fail {
		return echoOutput{}, temporal.NewNonRetryableApplicationError("sandbox printed "+errorSecret, "ToolUsageError", nil)
	}
	return echoOutput{Stdout: outputSecret, Code: in.Code, Env: in.Env["API_TOKEN"]}, nil
}

func echoWorkflow(ctx workflow.Context, in echoInput) (echoOutput, error) {
	var signal string
	if in.WaitForSignal {
		workflow.GetSignalChannel(ctx, goSignal).Receive(ctx, &signal)
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	var a *echoActivities
	var out echoOutput
	if err := workflow.ExecuteActivity(ctx, a.Run, in).Get(ctx, &out); err != nil {
		return echoOutput{}, err
	}
	out.Signal = signal
	return out, nil
}

func startEchoWorker(t *testing.T, c client.Client, taskQueue string) worker.Worker {
	t.Helper()
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflow(echoWorkflow)
	w.RegisterActivity(&echoActivities{})
	if err := w.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	return w
}

func echoIn() echoInput {
	return echoInput{Code: codeSecret, Env: map[string]string{"API_TOKEN": envSecret}}
}

// rawHistory returns a run's events, read by c without decoding anything, and their bytes as
// protobuf and as protobuf JSON.
func rawHistory(ctx context.Context, t *testing.T, c client.Client, id, runID string) ([]*historypb.HistoryEvent, []byte) {
	t.Helper()
	var events []*historypb.HistoryEvent
	var raw bytes.Buffer
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("read history of %s: %v", id, err)
		}
		events = append(events, ev)
		b, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		raw.Write(b)
		j, err := protojson.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		raw.Write(j)
	}
	return events, raw.Bytes()
}

func findEvent(events []*historypb.HistoryEvent, typ enumspb.EventType) *historypb.HistoryEvent {
	for _, ev := range events {
		if ev.GetEventType() == typ {
			return ev
		}
	}
	return nil
}

func secretsIn(raw []byte) []string {
	var found []string
	for _, s := range allSecrets {
		if bytes.Contains(raw, []byte(s)) {
			found = append(found, s)
		}
	}
	return found
}

func newTestServer(t *testing.T) *temporaltest.TestServer {
	t.Helper()
	return temporaltest.NewServer(temporaltest.WithT(t))
}

func TestIntegrationHistoryIsEncrypted(t *testing.T) {
	ts := newTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	ring := mustRing(t, "k1:"+testKey(1))
	encClient := ts.NewClientWithOptions(ClientOptions(client.Options{}, ring))
	rawClient := ts.NewClientWithOptions(client.Options{}) // no codec: sees what the server stores

	const tq = "codec-echo"
	w := startEchoWorker(t, encClient, tq)
	defer w.Stop()

	run, err := encClient.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "encrypted-echo", TaskQueue: tq}, echoWorkflow, echoIn())
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	var out echoOutput
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("workflow with a key set did not complete: %v", err)
	}
	if out.Code != codeSecret || out.Env != envSecret || out.Stdout != outputSecret {
		t.Errorf("result via the codec = %+v; want the original code, env value and output", out)
	}

	events, raw := rawHistory(ctx, t, rawClient, run.GetID(), run.GetRunID())
	if found := secretsIn(raw); len(found) > 0 {
		t.Errorf("raw history holds %v in the clear", found)
	}
	done := findEvent(events, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)
	if done == nil {
		t.Fatalf("no completion event in history")
	}
	result := done.GetWorkflowExecutionCompletedEventAttributes().GetResult().GetPayloads()[0]
	if got := string(result.Metadata[MetadataEncoding]); got != EncodingEncrypted {
		t.Errorf("stored result encoding = %q; want %q", got, EncodingEncrypted)
	}
	if got := string(result.Metadata[MetadataKeyID]); got != "k1" {
		t.Errorf("stored result key id = %q; want k1", got)
	}

	// A client without the codec cannot read the result.
	var rawOut echoOutput
	if err := rawClient.GetWorkflow(ctx, run.GetID(), run.GetRunID()).Get(ctx, &rawOut); err == nil {
		t.Errorf("client without the codec read the result %+v; want an error", rawOut)
	}

	// The codec server, called the way the temporal CLI calls it, decodes the stored result.
	srv, err := NewServer(ring, ServerOptions{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	remoteClient := ts.NewClientWithOptions(client.Options{
		DataConverter: converter.NewRemoteDataConverter(converter.GetDefaultDataConverter(), converter.RemoteDataConverterOptions{
			Endpoint: hs.URL + "/" + ts.GetDefaultNamespace(),
			ModifyRequest: func(r *http.Request) error {
				r.Header.Set("Authorization", "Bearer "+testToken)
				return nil
			},
		}),
	})
	var remoteOut echoOutput
	if err := remoteClient.GetWorkflow(ctx, run.GetID(), run.GetRunID()).Get(ctx, &remoteOut); err != nil {
		t.Fatalf("read result through the codec server: %v", err)
	}
	if remoteOut != out {
		t.Errorf("result through the codec server = %+v; want %+v", remoteOut, out)
	}

	// An error whose message quotes output: stored encrypted, readable with the codec.
	in := echoIn()
	in.Fail = true
	failRun, err := encClient.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "encrypted-failure", TaskQueue: tq}, echoWorkflow, in)
	if err != nil {
		t.Fatal(err)
	}
	err = failRun.Get(ctx, nil)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != "ToolUsageError" || !strings.Contains(err.Error(), errorSecret) {
		t.Fatalf("failed run error = %v; want a ToolUsageError whose decoded message quotes the output", err)
	}
	_, rawFail := rawHistory(ctx, t, rawClient, failRun.GetID(), failRun.GetRunID())
	if found := secretsIn(rawFail); len(found) > 0 {
		t.Errorf("raw history of the failed run holds %v in the clear", found)
	}
	if !bytes.Contains(rawFail, []byte("ToolUsageError")) {
		t.Errorf("raw history of the failed run lost the error type; want it readable")
	}
}

// TestIntegrationPlaintextControl shows the search above can fail: without a key, the same run
// leaves every secret readable in history.
func TestIntegrationPlaintextControl(t *testing.T) {
	ts := newTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	plainClient := ts.NewClientWithOptions(ClientOptions(client.Options{}, nil))
	const tq = "codec-plain"
	w := startEchoWorker(t, plainClient, tq)
	defer w.Stop()

	in := echoIn()
	in.WaitForSignal = true
	run, err := plainClient.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "plain-echo", TaskQueue: tq}, echoWorkflow, in)
	if err != nil {
		t.Fatal(err)
	}
	if err := plainClient.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), goSignal, signalSecret); err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	_, raw := rawHistory(ctx, t, plainClient, run.GetID(), run.GetRunID())
	if found := secretsIn(raw); len(found) != 4 { // all but the error message: this run does not fail
		t.Errorf("plaintext history holds %v; want code, env value, output and signal", found)
	}
}

// TestIntegrationKeyRotation: a run started under key a finishes on a worker restarted with b
// current and a still in the ring; without a, reading fails with the clear error, and a worker
// that lacks a fails a run started under a with that error, before anything runs.
func TestIntegrationKeyRotation(t *testing.T) {
	ts := newTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	keyA, keyB := "a:"+testKey(0xa), "b:"+testKey(0xb)
	ringA, ringBA, ringB := mustRing(t, keyA), mustRing(t, keyB+"\n"+keyA), mustRing(t, keyB)
	clientA := ts.NewClientWithOptions(ClientOptions(client.Options{}, ringA))
	clientBA := ts.NewClientWithOptions(ClientOptions(client.Options{}, ringBA))
	clientB := ts.NewClientWithOptions(ClientOptions(client.Options{}, ringB))
	rawClient := ts.NewClientWithOptions(client.Options{})

	const tq = "codec-rotation"
	w1 := startEchoWorker(t, clientA, tq)
	in := echoIn()
	in.WaitForSignal = true
	run, err := clientA.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "rotation", TaskQueue: tq}, echoWorkflow, in)
	if err != nil {
		t.Fatal(err)
	}
	// Wait until worker 1 has run the first workflow task (the run now waits for the signal).
	waitForEvent(ctx, t, rawClient, run.GetID(), enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
	w1.Stop()

	w2 := startEchoWorker(t, clientBA, tq)
	defer w2.Stop()
	if err := clientBA.SignalWorkflow(ctx, run.GetID(), "", goSignal, signalSecret); err != nil {
		t.Fatal(err)
	}
	var out echoOutput
	if err := clientBA.GetWorkflow(ctx, run.GetID(), run.GetRunID()).Get(ctx, &out); err != nil {
		t.Fatalf("run started under a did not finish on the worker with ring [b a]: %v", err)
	}
	if out.Code != codeSecret || out.Env != envSecret || out.Signal != signalSecret {
		t.Errorf("result with ring [b a] = %+v; want the original values", out)
	}

	events, raw := rawHistory(ctx, t, rawClient, run.GetID(), run.GetRunID())
	if found := secretsIn(raw); len(found) > 0 {
		t.Errorf("raw history holds %v in the clear", found)
	}
	started := findEvent(events, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED).GetWorkflowExecutionStartedEventAttributes().GetInput()
	signaled := findEvent(events, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED).GetWorkflowExecutionSignaledEventAttributes().GetInput()
	completed := findEvent(events, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED).GetWorkflowExecutionCompletedEventAttributes().GetResult()
	for _, c := range []struct {
		what string
		id   string
		want string
	}{
		{"input", string(started.GetPayloads()[0].Metadata[MetadataKeyID]), "a"},
		{"signal", string(signaled.GetPayloads()[0].Metadata[MetadataKeyID]), "b"},
		{"result", string(completed.GetPayloads()[0].Metadata[MetadataKeyID]), "b"},
	} {
		if c.id != c.want {
			t.Errorf("%s key id = %q; want %q", c.what, c.id, c.want)
		}
	}

	// Ring [b a] reads the whole history, ring [b] fails on the input with the clear error.
	var gotIn echoInput
	if err := DataConverter(ringBA).FromPayloads(started, &gotIn); err != nil || gotIn.Code != codeSecret {
		t.Errorf("input with ring [b a] = %+v, %v; want the original", gotIn, err)
	}
	err = clientB.GetWorkflow(ctx, run.GetID(), run.GetRunID()).Get(ctx, &out)
	if err != nil {
		t.Errorf("result (under b) with ring [b]: %v; want it readable", err)
	}
	err = DataConverter(ringB).FromPayloads(started, &gotIn)
	assertUnknownKeyA(t, err)

	// A worker without a cannot decode the input of a run started under a. The Go SDK fails the
	// run (an input that cannot be decoded is the workflow's error, not a task failure), with the
	// clear error as its failure, and nothing is scheduled: no code runs on a key problem.
	const tq2 = "codec-rotation-2"
	run2, err := clientA.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "rotation-missing-key", TaskQueue: tq2}, echoWorkflow, echoIn())
	if err != nil {
		t.Fatal(err)
	}
	wB := startEchoWorker(t, clientB, tq2)
	defer wB.Stop()
	err = clientB.GetWorkflow(ctx, run2.GetID(), run2.GetRunID()).Get(ctx, &out)
	if err == nil || !strings.Contains(err.Error(), `payload encrypted with key id "a", which is not in the key ring; add it back to SANDBOXFLOW_KEY_FILE`) {
		t.Fatalf("run under a on a worker with ring [b] = %v; want it failed with the clear unknown-key error", err)
	}
	events2, _ := rawHistory(ctx, t, rawClient, run2.GetID(), run2.GetRunID())
	if ev := findEvent(events2, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED); ev != nil {
		t.Errorf("an activity was scheduled for a run whose input could not be decoded")
	}
}

func assertUnknownKeyA(t *testing.T, err error) {
	t.Helper()
	var uk *UnknownKeyError
	if !errors.As(err, &uk) || uk.KeyID != "a" {
		t.Fatalf("decode with ring [b] = %v; want *UnknownKeyError for key a", err)
	}
	want := `codec: payload encrypted with key id "a", which is not in the key ring; add it back to SANDBOXFLOW_KEY_FILE`
	if err.Error() != want {
		t.Errorf("error = %q; want %q", err, want)
	}
}

func waitForEvent(ctx context.Context, t *testing.T, c client.Client, id string, typ enumspb.EventType) *historypb.HistoryEvent {
	t.Helper()
	for {
		events, _ := rawHistory(ctx, t, c, id, "")
		if ev := findEvent(events, typ); ev != nil {
			return ev
		}
		select {
		case <-ctx.Done():
			var seen []string
			for _, ev := range events {
				seen = append(seen, ev.GetEventType().String())
			}
			t.Fatalf("no %v event in %s before the deadline; history: %v", typ, id, seen)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
