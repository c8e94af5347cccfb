//go:build integration

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"google.golang.org/protobuf/proto"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/tracing"
)

// otlpReceiver is an OTLP/HTTP trace receiver on loopback: it decodes every export with the
// OpenTelemetry protobufs and keeps the spans with their resources.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []receivedSpan
	url   string
}

type receivedSpan struct {
	resource []*commonpb.KeyValue
	span     *tracepb.Span
}

func startReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{url: "http://" + ln.Addr().String()}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if req.URL.Path != "/v1/traces" || err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
			return
		}
		var export coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &export); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range export.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					r.spans = append(r.spans, receivedSpan{resource: rs.GetResource().GetAttributes(), span: s})
				}
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

func (r *otlpReceiver) all() []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedSpan(nil), r.spans...)
}

// attrText renders an attribute value, whatever its kind, for the content search.
func attrText(v *commonpb.AnyValue) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestIntegrationTracesOfARun: with OTEL_EXPORTER_OTLP_ENDPOINT naming a receiver on loopback,
// a run started by the starter binary and one started by a Go orchestrator inside its own span
// each give one trace, carried from the start call (the starter's StartWorkflow span; the
// orchestrator's span), holding the workflow's span and sandboxflow's check, wait for a
// decision, claim, take-sandbox and run spans; no attribute, span name or event anywhere holds
// the code, an env value or the output.
func TestIntegrationTracesOfARun(t *testing.T) {
	recv := startReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.url)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "200")
	tr, err := tracing.On(context.Background(), "sandboxflow-worker-test")
	if err != nil || tr.Interceptor == nil {
		t.Fatalf("tracing.On = %+v, %v; want an interceptor", tr, err)
	}
	e := agenttest.Setup(t, agenttest.Options{Interceptors: []interceptor.WorkerInterceptor{tr.Interceptor}})

	const codeMarker, envMarker, outMarker = "CODE-MARKER-7f3a", "ENV-MARKER-91c2", "OUT-MARKER-5d0e"
	code := fmt.Sprintf("import os\n# %s\nprint('%s-' + os.environ['SECRETISH'][:3])\nprint(os.environ['SECRETISH'])\n", codeMarker, outMarker)

	// The starter binary starts the first run; its StartWorkflow span roots the trace.
	r := binary(t, e, "", "run", "--code", code, "--env", "SECRETISH="+envMarker)
	if r.code != 0 {
		t.Fatalf("starter run: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	var started client.Started
	if err := json.Unmarshal([]byte(r.stdout), &started); err != nil {
		t.Fatal(err)
	}
	agenttest.Decide(t, e, started.WorkflowID, true)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	if res, err := e.Client.Result(ctx, started.WorkflowID); err != nil || !strings.Contains(string(res.Stdout), outMarker) {
		t.Fatalf("first run: %+v, %v", res, err)
	}

	// A Go orchestrator starts the second inside a span of its own, through a Temporal client
	// with the same interceptor: the run's trace is the orchestrator's.
	parentExp := tracetest.NewInMemoryExporter()
	parentTP := sdktrace.NewTracerProvider(sdktrace.WithSyncer(parentExp))
	orchCtx, parent := parentTP.Tracer("orchestrator").Start(ctx, "orchestrator.tool_call")
	tc, err := tclient.Dial(tclient.Options{HostPort: e.Address, Namespace: e.Namespace, Interceptors: []interceptor.ClientInterceptor{tr.Interceptor}})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	orch, err := client.New(client.Options{Temporal: tc, TaskQueue: e.TaskQueue})
	if err != nil {
		t.Fatal(err)
	}
	second, err := orch.Start(orchCtx, guard.Request{Code: code, Settings: guard.Settings{Env: map[string]string{"SECRETISH": envMarker}}}, client.StartOptions{})
	parent.End()
	if err != nil {
		t.Fatal(err)
	}
	agenttest.Decide(t, e, second.WorkflowID, true)
	if _, err := e.Client.Result(ctx, second.WorkflowID); err != nil {
		t.Fatal(err)
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	spans := recv.all()
	traceOf := map[string]string{} // workflow id -> trace id, from the workflow's span
	for _, s := range spans {
		if s.span.GetName() == "RunWorkflow:RunCode" {
			for _, a := range s.span.GetAttributes() {
				if a.GetKey() == "temporalWorkflowID" {
					traceOf[a.GetValue().GetStringValue()] = fmt.Sprintf("%x", s.span.GetTraceId())
				}
			}
		}
	}
	want := []string{tracing.SpanCheck, tracing.SpanWait, tracing.SpanClaim, tracing.SpanTakeSandbox, tracing.SpanRun,
		"RunWorkflow:RunCode", "RunActivity:SandboxRun"}
	for _, id := range []string{started.WorkflowID, second.WorkflowID} {
		trace := traceOf[id]
		if trace == "" {
			t.Fatalf("no RunWorkflow:RunCode span for %s among %d spans", id, len(spans))
		}
		names := map[string]int{}
		for _, s := range spans {
			if fmt.Sprintf("%x", s.span.GetTraceId()) == trace {
				names[s.span.GetName()]++
			}
		}
		t.Logf("run %s: trace %s: %v", id, trace, names)
		for _, n := range want {
			if names[n] == 0 {
				t.Errorf("run %s: the trace lacks a %s span; it has %v", id, n, names)
			}
		}
		// The starter starts a run with the update await-check (update-with-start), or with a
		// plain start where the server takes no update-with-start.
		if id == started.WorkflowID && names["UpdateWithStartWorkflow:"+contract.UpdateAwaitCheck] == 0 && names["StartWorkflow:RunCode"] == 0 {
			t.Errorf("run %s: the starter's start span (UpdateWithStartWorkflow or StartWorkflow) is not in the run's trace: %v", id, names)
		}
		if id == second.WorkflowID && trace != parent.SpanContext().TraceID().String() {
			t.Errorf("run %s: trace %s; want the orchestrator's %s", id, trace, parent.SpanContext().TraceID())
		}
	}
	if traceOf[started.WorkflowID] == traceOf[second.WorkflowID] {
		t.Error("the two runs share one trace")
	}
	// Nothing of the code, the env values or the output in any span.
	for _, s := range spans {
		texts := []string{s.span.GetName()}
		for _, a := range append(append([]*commonpb.KeyValue(nil), s.resource...), s.span.GetAttributes()...) {
			texts = append(texts, a.GetKey(), attrText(a.GetValue()))
		}
		for _, ev := range s.span.GetEvents() {
			texts = append(texts, ev.GetName())
			for _, a := range ev.GetAttributes() {
				texts = append(texts, a.GetKey(), attrText(a.GetValue()))
			}
		}
		texts = append(texts, s.span.GetStatus().GetMessage())
		for _, txt := range texts {
			for _, m := range []string{codeMarker, envMarker, outMarker, "ENV-MARKER", "SECRETISH"} {
				if strings.Contains(txt, m) {
					t.Errorf("span %s carries %q: %.200s", s.span.GetName(), m, txt)
				}
			}
		}
	}
	t.Logf("%d spans received for two runs", len(spans))
}
