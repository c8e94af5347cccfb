package receipt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Namespace is the SSHSIG namespace of every receipt signature (ssh-keygen -Y sign -n).
const Namespace = "sandboxflow-receipt"

// Version is the value of a statement's "receipt" field.
const Version = "sandboxflow-receipt/v1"

// OutcomeError is a statement's outcome when the backend failed after the code may have started.
const OutcomeError = "error"

// timeLayout is RFC 3339 in UTC with nanoseconds, as time.RFC3339Nano writes it.
const timeLayout = time.RFC3339Nano

// maxStatementBytes bounds a statement (egress attempts are capped by guard.MaxEgressConns).
const maxStatementBytes = 1 << 20

// Statement is what a sandbox host signs after a run or cell. Its JSON form, in this field order,
// is the canonical statement (see the package documentation).
type Statement struct {
	// Receipt is Version.
	Receipt string `json:"receipt"`
	// WorkflowID, RunID and ActivityID name the run and the sandbox activity, from the activity's
	// own info (which no caller chooses).
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	ActivityID string `json:"activity_id"`
	// Digest is the digest the host computed for what ran: the request's (a cell's digest for a
	// session's cell).
	Digest string `json:"digest"`
	// Approvals are the approvals the host verified before the code started.
	Approvals []Approval `json:"approvals"`
	// Host is the host that ran the code and signed.
	Host Host `json:"host"`
	// Backend, Runtime and ImageID say what ran it; empty when the backend has none.
	Backend string `json:"backend"`
	Runtime string `json:"runtime"`
	ImageID string `json:"image_id"`
	// Started and Ended are the host's clock around the run (RFC 3339, UTC, nanoseconds).
	Started string `json:"started"`
	Ended   string `json:"ended"`
	// Outcome is the result's outcome (guard.Outcome's string), or OutcomeError; Error then says
	// what failed (its type, and an IntegrationError's operation).
	Outcome  string `json:"outcome"`
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
	Signal   int    `json:"signal"`
	TimedOut bool   `json:"timed_out"`
	// StateReset is a cell's result's flag: it ran in a fresh interpreter.
	StateReset bool `json:"state_reset"`
	// ThreadsAlive is how many threads besides its driver's the host counted in a session's
	// interpreter when the cell ended (guard.Result.ThreadsAlive). Absent when 0.
	ThreadsAlive int `json:"threads_alive,omitempty"`
	// ExitReportedBy says who gave the exit code and the end (guard.Result.ExitReportedBy):
	// "interpreter" for a session cell whose interpreter reported them; absent when the host
	// measured them.
	ExitReportedBy string `json:"exit_reported_by,omitempty"`
	// Stdout and Stderr are the output streams, whole and as kept.
	Stdout Stream `json:"stdout"`
	Stderr Stream `json:"stderr"`
	// Files are the produced files as the backend returned them, each marked kept or not.
	Files          []File `json:"files"`
	FilesTruncated bool   `json:"files_truncated"`
	// Egress is each connection attempt through the egress proxy; EgressDropped counts those
	// past the connection cap that were refused unlisted.
	Egress        []Egress `json:"egress"`
	EgressDropped int      `json:"egress_dropped"`
	// Secrets are the secret names (never values) the run could use.
	Secrets []string `json:"secrets"`
	// Cell is set for a session's cell.
	Cell *Cell `json:"cell,omitempty"`
	// Claim is the commitment of the host's claim on the run's approval (contract.SandboxClaim),
	// which binds a late result to the claim the run's history shows held. Absent from receipts
	// signed before late results.
	Claim string `json:"claim,omitempty"`
	// Outputs are the outputs the result carries (guard.Output), each with its data measured;
	// OutputsTruncated is the result's flag. Both absent when the result has none.
	Outputs          []Output `json:"outputs,omitempty"`
	OutputsTruncated bool     `json:"outputs_truncated,omitempty"`
	// EgressLost says the egress proxy's report of the run was lost with the worker that carried
	// it (guard.EgressReport.Lost): Egress lists nothing of it. Absent when false.
	EgressLost bool `json:"egress_lost,omitempty"`
	// PolicyHash is the hash ("sha256:<hex>" of the file's bytes) of the policy rules the host
	// applied before it ran the code (worker --policy). Absent when the host has no policy file.
	PolicyHash string `json:"policy_hash,omitempty"`
	// Usage is what the run or cell cost as the host measured it (guard.Result.Usage). Absent
	// when the result has none.
	Usage *guard.Usage `json:"usage,omitempty"`
}

// Approval is one approval the host verified.
type Approval struct {
	ID          string `json:"id"`
	Reviewer    string `json:"reviewer"`
	Fingerprint string `json:"fingerprint"`
}

// Host names the signing host and its key.
type Host struct {
	// Name is the host's name, a principal of its hosts-file line.
	Name string `json:"name"`
	// PublicKey is the host's key in authorized_keys form ("ssh-ed25519 AAAA...").
	PublicKey string `json:"public_key"`
	// Fingerprint is the key's SHA256 fingerprint.
	Fingerprint string `json:"fingerprint"`
}

// Stream is one output stream.
type Stream struct {
	// Written is the whole stream as the code wrote it, before any cap; null when the backend
	// measured none (the HTTP and callable backends).
	Written *guard.StreamMeasure `json:"written"`
	// Kept is what the result carries, as its JSON carries it (UTF-8 text).
	Kept guard.StreamMeasure `json:"kept"`
	// Truncated and Binary are the result's flags.
	Truncated bool `json:"truncated"`
	Binary    bool `json:"binary"`
}

// File is one produced file as the backend returned it.
type File struct {
	Name     string              `json:"name"`
	Produced guard.StreamMeasure `json:"produced"`
	// Kept says the result carries it (the guard's limits dropped it otherwise).
	Kept bool `json:"kept"`
}

// Output is one output as the result carries it: Data measures the bytes it carries (none when
// LeftOut), Size is the size the code produced.
type Output struct {
	Index   int                 `json:"index"`
	Source  string              `json:"source"`
	MIME    string              `json:"mime"`
	Size    int64               `json:"size"`
	Data    guard.StreamMeasure `json:"data"`
	LeftOut bool                `json:"left_out"`
}

// outputsOf measures the outputs of a result.
func outputsOf(outs []guard.Output) []Output {
	var s []Output
	for _, o := range outs {
		s = append(s, Output{Index: o.Index, Source: o.Source, MIME: o.MIME, Size: o.Size, Data: guard.MeasureBytes(o.Data), LeftOut: o.LeftOut})
	}
	return s
}

// Egress is one connection attempt through the egress proxy.
type Egress struct {
	Host     string `json:"host"`
	Port     uint16 `json:"port"`
	Allowed  bool   `json:"allowed"`
	Reason   string `json:"reason"`
	BytesOut int64  `json:"bytes_out"`
	BytesIn  int64  `json:"bytes_in"`
	// Secrets are the secrets whose headers the proxy added to this attempt.
	Secrets []string `json:"secrets"`
}

// Cell binds a session's cell to its place in the session.
type Cell struct {
	Index int `json:"index"`
	// SettingsDigest is the session's settings digest; Chain the session's chain before the cell.
	SettingsDigest string `json:"settings_digest"`
	Chain          string `json:"chain"`
	// Previous is Hash of the receipt of the cell that ran before this one in the sandbox, ""
	// for the first.
	Previous string `json:"previous"`
}

// Bytes returns the canonical statement.
func (s Statement) Bytes() ([]byte, error) {
	s.Receipt = Version
	for _, l := range []*[]string{&s.Secrets} {
		if *l == nil {
			*l = []string{}
		}
	}
	if s.Approvals == nil {
		s.Approvals = []Approval{}
	}
	if s.Files == nil {
		s.Files = []File{}
	}
	if s.Egress == nil {
		s.Egress = []Egress{}
	}
	s.Egress = slices.Clone(s.Egress) // not the caller's
	for i := range s.Egress {
		if s.Egress[i].Secrets == nil {
			s.Egress[i].Secrets = []string{}
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, fmt.Errorf("receipt: statement: %w", err)
	}
	return b.Bytes(), nil
}

// Parse reads a canonical statement: valid UTF-8 JSON of exactly Statement's fields, in
// canonical form, of Version.
func Parse(b []byte) (Statement, error) {
	var s Statement
	if len(b) > maxStatementBytes {
		return s, fmt.Errorf("receipt: statement: longer than %d bytes", maxStatementBytes)
	}
	if !utf8.Valid(b) {
		return s, fmt.Errorf("receipt: statement: not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("receipt: statement: %w", err)
	}
	if s.Receipt != Version {
		return s, fmt.Errorf("receipt: statement: version %q; want %q", clip(s.Receipt), Version)
	}
	again, err := s.Bytes()
	if err != nil {
		return s, err
	}
	if !bytes.Equal(again, b) {
		return s, fmt.Errorf("receipt: statement: not in canonical form")
	}
	return s, nil
}

// clip bounds a value quoted in an error.
func clip(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// Run is what the host knows of a run besides its result, for New.
type Run struct {
	WorkflowID, RunID, ActivityID string
	Digest                        string
	Approvals                     []Approval
	Host                          Host
	Backend                       string
	Secrets                       []string
	Started, Ended                time.Time
	// Err is the backend's failure after the code may have started (the statement's outcome is
	// then OutcomeError); nil for a result.
	Err  error
	Cell *Cell
	// Claim is the commitment of the host's claim (Statement.Claim); empty when none was made.
	Claim string
	// PolicyHash is Statement.PolicyHash.
	PolicyHash string
}

// New returns the statement of run with result res (as the guard returned it, with res.Measured).
func New(run Run, res guard.Result) Statement {
	s := Statement{
		Receipt: Version, WorkflowID: run.WorkflowID, RunID: run.RunID, ActivityID: run.ActivityID,
		Digest: run.Digest, Approvals: run.Approvals, Host: run.Host, Backend: run.Backend,
		ImageID: res.ImageID, Started: run.Started.UTC().Format(timeLayout), Ended: run.Ended.UTC().Format(timeLayout),
		Outcome: res.Outcome.String(), ExitCode: res.ExitCode, Signal: res.Signal, TimedOut: res.TimedOut,
		StateReset: res.StateReset, ThreadsAlive: res.ThreadsAlive, ExitReportedBy: res.ExitReportedBy, FilesTruncated: res.FilesTruncated, Secrets: run.Secrets, Cell: run.Cell, Claim: run.Claim,
		PolicyHash: run.PolicyHash,
	}
	if run.Err != nil {
		// The type and operation only: a backend's cause can quote the code's output.
		s.Outcome, s.Error = OutcomeError, guard.TypeOf(run.Err)
		var ie *guard.IntegrationError
		if errors.As(run.Err, &ie) {
			s.Error += ": " + ie.Op
		}
	}
	var m guard.Measured
	if res.Measured != nil {
		m = *res.Measured
	}
	s.Runtime = m.Runtime
	s.Stdout = stream(res.Stdout, res.StdoutBinary, res.StdoutTruncated, m.Stdout)
	s.Stderr = stream(res.Stderr, res.StderrBinary, res.StderrTruncated, m.Stderr)
	kept := map[string]guard.StreamMeasure{}
	for _, f := range res.Files {
		kept[f.Name] = guard.MeasureBytes(f.Content)
	}
	produced := m.Files
	if produced == nil { // not enforced by the guard: the result's files are all there is
		for _, f := range res.Files {
			produced = append(produced, guard.FileMeasure{Name: f.Name, Size: guard.MeasureBytes(f.Content)})
		}
	}
	for _, f := range produced {
		k, ok := kept[f.Name]
		s.Files = append(s.Files, File{Name: f.Name, Produced: f.Size, Kept: ok && k == f.Size})
	}
	s.Outputs, s.OutputsTruncated = outputsOf(res.Outputs), res.OutputsTruncated
	if res.Usage != nil {
		u := *res.Usage // not the caller's
		s.Usage = &u
	}
	if res.Egress != nil {
		for _, a := range res.Egress.Attempts {
			s.Egress = append(s.Egress, egressOf(a))
		}
		s.EgressDropped = res.Egress.Dropped
		s.EgressLost = res.Egress.Lost
	}
	return s
}

// stream measures a kept stream as the result's JSON carries it.
func stream(kept []byte, binary, truncated bool, written *guard.StreamMeasure) Stream {
	text, bin := guard.TextOf(kept, binary)
	return Stream{Written: written, Kept: guard.MeasureBytes([]byte(text)), Truncated: truncated, Binary: bin}
}

// egressOf is an attempt as a statement lists it.
func egressOf(a guard.EgressAttempt) Egress {
	secrets := a.Secrets
	if secrets == nil {
		secrets = []string{}
	}
	return Egress{Host: a.Host, Port: a.Port, Allowed: a.Allowed, Reason: a.Reason, BytesOut: a.BytesOut, BytesIn: a.BytesIn, Secrets: secrets}
}
