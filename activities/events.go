package activities

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// Event is one thing that happened to a run. Data holds sizes, counts, exit codes, durations, the
// digest, ids and the backend; code, output, env values and file contents are in it only when the
// request set capture_content.
type Event struct {
	Type contract.EventType // contract.EventSandboxStarted, EventSandboxFinished, EventSandboxRefused, EventSandboxLateResult, ...
	Time time.Time
	Data map[string]any
}

// Sink receives events. Emit must not block for long and must be safe for concurrent use; a sink
// that fails should report its failure itself (the run does not depend on it).
type Sink interface {
	Emit(ctx context.Context, e Event)
}

// SlogSink writes each event as one structured log/slog record at level Info whose message is the
// event type, with the attribute "event" (the type) and one attribute per Data key, in key order.
type SlogSink struct {
	// Logger receives the records. Optional: defaults to slog.Default().
	Logger *slog.Logger
}

// Emit logs e.
func (s SlogSink) Emit(ctx context.Context, e Event) {
	logger := s.Logger
	if logger == nil {
		logger = slog.Default()
	}
	attrs := make([]slog.Attr, 0, len(e.Data)+1)
	attrs = append(attrs, slog.String("event", string(e.Type)))
	keys := make([]string, 0, len(e.Data))
	for k := range e.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, e.Data[k]))
	}
	logger.LogAttrs(ctx, slog.LevelInfo, string(e.Type), attrs...)
}

// MemorySink keeps every event in memory, for tests. The zero value is ready to use.
type MemorySink struct {
	mu     sync.Mutex
	events []Event
}

// Emit records e.
func (m *MemorySink) Emit(_ context.Context, e Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, e)
}

// Events returns a copy of the events recorded so far, oldest first.
func (m *MemorySink) Events() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.events)
}

// startedEvent describes a run about to start. Content only with capture_content.
func startedEvent(c guard.Checked, in contract.RunInput, attempt int32) Event {
	var inputBytes int
	for _, f := range c.Files {
		inputBytes += len(f.Content)
	}
	d := map[string]any{
		"workflow_id":     c.Owner.WorkflowID,
		"run_id":          c.Owner.RunID,
		"activity_id":     c.Owner.ActivityID,
		"attempt":         attempt,
		"approval_id":     in.Decision.ApprovalID,
		"reviewer":        in.Decision.Reviewer,
		"digest":          c.Digest,
		"backend":         c.Backend,
		"language":        c.Language,
		"code_bytes":      len(c.Code),
		"input_files":     len(c.Files),
		"input_bytes":     inputBytes,
		"env_vars":        len(c.Env),
		"network":         c.Network,
		"egress":          c.Egress,
		"secrets":         c.Secrets,
		"timeout_ms":      c.Limits.Timeout.Milliseconds(),
		"capture_content": c.CaptureContent,
	}
	addMetadata(d, c.Metadata)
	if c.CaptureContent {
		d["code"] = c.Code
		d["env"] = c.EnvMap()
		files := make(map[string]string, len(c.Files))
		for _, f := range c.Files {
			files[f.Name] = string(f.Content)
		}
		d["input_file_contents"] = files
	}
	return Event{Type: contract.EventSandboxStarted, Data: d}
}

// addProduced adds the counts and sizes of a result's files and outputs (never their contents).
func addProduced(d map[string]any, res guard.Result) {
	var fileBytes, outputBytes int64
	for _, f := range res.Files {
		fileBytes += f.Size
	}
	mimes := []string{}
	for _, o := range res.Outputs {
		outputBytes += int64(len(o.Data))
		mimes = append(mimes, o.MIME)
	}
	d["files"] = len(res.Files)
	d["file_bytes"] = fileBytes
	d["files_truncated"] = res.FilesTruncated
	d["outputs"] = len(res.Outputs)
	d["output_bytes"] = outputBytes
	d["output_mimes"] = mimes
	d["outputs_truncated"] = res.OutputsTruncated
}

// addUsage adds what the run or cell cost as the host measured it (guard.Usage): every figure,
// 0 with usage_measured_by "" when the backend measured none. Its egress bytes are the event's
// egress_bytes_out and egress_bytes_in (addEgress), from the same proxy report.
func addUsage(d map[string]any, u *guard.Usage) {
	var v guard.Usage
	if u != nil {
		v = *u
	}
	d["usage_measured_by"] = v.MeasuredBy
	d["usage_cpu_time_ms"] = time.Duration(v.CPUTime).Milliseconds()
	d["usage_wall_time_ms"] = time.Duration(v.WallTime).Milliseconds()
	d["usage_peak_memory_bytes"] = v.PeakMemoryBytes
	d["usage_sandbox_peak_memory_bytes"] = v.SandboxPeakMemoryBytes
	d["usage_files_bytes"] = v.FilesBytes
}

// finishedEvent describes how a run ended. Content only with capture_content.
func finishedEvent(c guard.Checked, in contract.RunInput, res guard.Result, err error, elapsed time.Duration) Event {
	d := map[string]any{
		"workflow_id": c.Owner.WorkflowID,
		"run_id":      c.Owner.RunID,
		"activity_id": c.Owner.ActivityID,
		"approval_id": in.Decision.ApprovalID,
		"reviewer":    in.Decision.Reviewer,
		"digest":      c.Digest,
		"backend":     c.Backend,
		"duration_ms": elapsed.Milliseconds(),
	}
	addMetadata(d, c.Metadata)
	if err != nil {
		// An IntegrationError's cause comes from an untrusted backend and might quote output:
		// without capture_content only its operation is kept.
		d["error_type"] = guard.TypeOf(err)
		var ie *guard.IntegrationError
		isIntegration := errors.As(err, &ie)
		if c.CaptureContent || !isIntegration {
			d["error"] = err.Error()
		} else {
			d["error_op"] = ie.Op
		}
		if isIntegration {
			d["retryable"] = guard.Retryable(err)
			d["code_may_have_started"] = ie.CodeMayHaveStarted
		}
		return Event{Type: contract.EventSandboxFinished, Data: d}
	}
	d["ok"] = res.OK
	d["exit_code"] = res.ExitCode
	d["timed_out"] = res.TimedOut
	d["stdout_bytes"] = len(res.Stdout)
	d["stderr_bytes"] = len(res.Stderr)
	d["stdout_truncated"] = res.StdoutTruncated
	d["stderr_truncated"] = res.StderrTruncated
	d["stdout_binary"] = res.StdoutBinary || !utf8.Valid(res.Stdout)
	d["stderr_binary"] = res.StderrBinary || !utf8.Valid(res.Stderr)
	addProduced(d, res)
	d["outcome"] = res.Outcome.String()
	d["state_reset"] = res.StateReset
	d["threads_alive"] = res.ThreadsAlive
	d["exit_reported_by"] = res.ExitReportedBy
	// Who cancelled is the workflow's record (Result.Cancelled); the host knows only that it
	// stopped the code because the run was cancelled.
	d["cancelled"] = res.Outcome == guard.OutcomeCancelled
	addApprovals(d, res)
	if res.Outcome.LimitKill() {
		d["limit_killed"] = res.Outcome.String()
	}
	if res.Signal != 0 {
		d["signal"] = res.Signal
	}
	if res.ImageID != "" {
		d["image_id"] = res.ImageID
	}
	addEgress(d, res.Egress)
	addUsage(d, res.Usage)
	d["receipt_sha256"] = ""
	if res.Receipt != nil {
		d["receipt_sha256"] = receipt.Hash(*res.Receipt) // what an audit export's receipt must hash to
	}
	if c.CaptureContent {
		d["stdout"] = string(res.Stdout)
		d["stderr"] = string(res.Stderr)
		files := make(map[string]string, len(res.Files))
		for _, f := range res.Files {
			files[f.Name] = string(f.Content)
		}
		d["file_contents"] = files
	}
	return Event{Type: contract.EventSandboxFinished, Data: d}
}

// refusedEvent describes the sandbox host's refusal of a run's approval: nothing ran. Data's
// "reason" is the typed guard.RefusedReason.
func refusedEvent(c guard.Checked, in contract.RunInput, ar *guard.ApprovalRefused) Event {
	d := map[string]any{
		"workflow_id": c.Owner.WorkflowID,
		"run_id":      c.Owner.RunID,
		"activity_id": c.Owner.ActivityID,
		"approval_id": in.Decision.ApprovalID,
		"digest":      c.Digest,
		"backend":     c.Backend,
		"reason":      ar.Reason,
		"error":       ar.Error(),
	}
	addMetadata(d, c.Metadata)
	return Event{Type: contract.EventSandboxRefused, Data: d}
}

// addEgress adds the egress audit: counts, and each attempt's host, port, address, decision and
// byte counts (an attempt never holds payloads or secret values).
func addEgress(d map[string]any, rep *guard.EgressReport) {
	if rep == nil {
		return
	}
	refused := rep.Dropped
	for _, a := range rep.Attempts {
		if !a.Allowed {
			refused++
		}
	}
	d["egress_attempts"] = len(rep.Attempts) + rep.Dropped
	d["egress_refused"] = refused
	d["egress_bytes_out"] = rep.BytesOut
	d["egress_bytes_in"] = rep.BytesIn
	d["egress_byte_cap_reached"] = rep.ByteCapReached
	d["egress_conn_cap_reached"] = rep.ConnCapReached
	d["egress_audit"] = rep.Attempts
}

func addMetadata(d map[string]any, m guard.Metadata) {
	for k, v := range map[string]string{
		"agent": m.Agent, "session": m.Session, "tool_call_id": m.ToolCallID, "requested_by": m.RequestedBy,
	} {
		if v != "" {
			d[k] = v
		}
	}
}
