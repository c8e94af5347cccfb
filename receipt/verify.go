package receipt

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/guard"
)

// Fields a refusal names besides the statement's and the result's own.
const (
	FieldReceipt   = "receipt"   // the result carries none
	FieldSignature = "signature" // the signature does not verify, or is in another namespace
	FieldHostKey   = "host_key"  // the signing key is not in the hosts file, or may not sign receipts
	FieldStatement = "statement" // the statement cannot be read, or is not canonical
)

// refused returns the refusal of field.
func refused(field string, err error, format string, args ...any) *guard.ReceiptRefused {
	return &guard.ReceiptRefused{Field: field, Msg: fmt.Sprintf(format, args...), Err: err}
}

// Hash is the SHA-256 (hex) of a receipt's statement, which the next cell's statement names.
func Hash(r guard.Receipt) string {
	sum := sha256.Sum256([]byte(r.Statement))
	return hex.EncodeToString(sum[:])
}

// Sign signs st with the host's key, an SSHSIG in Namespace, and returns the receipt.
func Sign(signer ssh.Signer, st Statement) (guard.Receipt, error) {
	b, err := st.Bytes()
	if err != nil {
		return guard.Receipt{}, err
	}
	sig, err := approval.SignNamespace(signer, Namespace, b)
	if err != nil {
		return guard.Receipt{}, fmt.Errorf("receipt: sign: %w", err)
	}
	return guard.Receipt{Statement: string(b), Signature: sig}, nil
}

// Verify checks that r is signed, in Namespace, by a key of hosts whose line names the host the
// statement names and allows Namespace (and whose valid-after and valid-before include the
// statement's end), and returns the statement. A refusal is a *guard.ReceiptRefused naming the
// field that failed. It does no I/O and reads no clock.
func Verify(hosts *Hosts, r *guard.Receipt) (Statement, error) {
	if r == nil {
		return Statement{}, refused(FieldReceipt, guard.ErrNoReceipt, "no receipt from a sandbox host")
	}
	key, err := approval.VerifyNamespace(r.Signature, Namespace, []byte(r.Statement))
	if err != nil {
		var ref *approval.RefusalError
		if errors.As(err, &ref) && ref.Reason == approval.ReasonWrongNamespace {
			return Statement{}, refused(FieldSignature, err, "the signature is not a receipt (namespace %s)", Namespace)
		}
		return Statement{}, refused(FieldSignature, err, "the receipt's signature does not verify")
	}
	st, err := Parse([]byte(r.Statement))
	if err != nil {
		return Statement{}, refused(FieldStatement, err, "the receipt's statement")
	}
	var lines []approval.Key
	if hosts != nil {
		for _, k := range hosts.keys {
			if k.PublicKey == key.PublicKey {
				lines = append(lines, k)
			}
		}
	}
	if len(lines) == 0 {
		return Statement{}, refused(FieldHostKey, nil, "key %s %s is not in the hosts file", key.KeyType, key.Fingerprint)
	}
	if st.Host.PublicKey != key.PublicKey || st.Host.Fingerprint != key.Fingerprint {
		return Statement{}, refused("host", nil, "the statement names host key %s but %s signed it", clip(st.Host.Fingerprint), key.Fingerprint)
	}
	ended, err := time.Parse(timeLayout, st.Ended)
	if err != nil {
		return Statement{}, refused("ended", err, "the statement's end time")
	}
	var first error
	for _, k := range lines {
		switch {
		case !k.AllowsNamespace(Namespace):
			first = cmpFirst(first, refused(FieldHostKey, nil, "key %s is limited to namespaces=%q, which does not include %s", k.Fingerprint, k.Namespaces, Namespace))
		case !slices.Contains(k.Principals, st.Host.Name):
			first = cmpFirst(first, refused("host", nil, "the statement names host %q but key %s is %v's", clip(st.Host.Name), k.Fingerprint, k.Principals))
		case !k.ValidAfter.IsZero() && ended.Before(k.ValidAfter), !k.ValidBefore.IsZero() && ended.After(k.ValidBefore):
			first = cmpFirst(first, refused(FieldHostKey, nil, "key %s was not valid at the run's end, %s", k.Fingerprint, st.Ended))
		default:
			return st, nil
		}
	}
	return Statement{}, first
}

func cmpFirst(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// Expect is what the verifier knows of a run by itself, to compare with a statement.
type Expect struct {
	WorkflowID, RunID string
	// Digest is the digest the verifier computed (the request's, or the cell's).
	Digest string
	// Approvals are the approval ids and reviewers' key fingerprints the verifier accepted; each
	// must be among the statement's.
	Approvals []Approval
	// Cell, for a session's cell: its index and the previous receipt's hash (Previous) the
	// verifier expects; nil for a run.
	Cell *Cell
}

// CheckRun checks that st is the statement of the run want describes. A refusal is a
// *guard.ReceiptRefused naming the statement's field.
func CheckRun(st Statement, want Expect) error {
	for _, f := range []struct{ name, got, want string }{
		{"workflow_id", st.WorkflowID, want.WorkflowID},
		{"run_id", st.RunID, want.RunID},
	} {
		if f.got != f.want {
			return refused(f.name, nil, "the receipt is for %s %q; this run's is %q", f.name, clip(f.got), clip(f.want))
		}
	}
	switch {
	case want.Cell == nil && st.Cell != nil:
		return refused("cell", nil, "the receipt is a session cell's; this is a run")
	case want.Cell != nil && st.Cell == nil:
		return refused("cell", nil, "the receipt is a run's; this is a session cell")
	case want.Cell != nil && st.Cell.Index != want.Cell.Index:
		return refused("cell.index", nil, "the receipt is for cell %d; this is cell %d", st.Cell.Index, want.Cell.Index)
	case want.Cell != nil && st.Cell.Previous != want.Cell.Previous:
		return refused("cell.previous", nil, "the receipt chains to %q; the previous cell's receipt is %q", clip(st.Cell.Previous), clip(want.Cell.Previous))
	}
	if st.Digest != want.Digest {
		return refused("digest", nil, "the receipt is for digest %q; this run's is %q", clip(st.Digest), clip(want.Digest))
	}
	for _, a := range want.Approvals {
		found := false
		for _, b := range st.Approvals {
			found = found || (b.ID == a.ID && (a.Fingerprint == "" || b.Fingerprint == a.Fingerprint))
		}
		if !found {
			return refused("approvals", nil, "the receipt does not name approval %s by key %s", a.ID, a.Fingerprint)
		}
	}
	return nil
}

// CheckResult checks res against what st signs: outcome, exit, signal, flags, the kept streams'
// lengths and hashes, every file's bytes (and that the result carries exactly the files marked
// kept), every output's bytes, the egress attempts, the usage, and the digest, approval, backend and image the result names. A
// refusal is a *guard.ReceiptRefused naming the result's field ("stdout", "files[1]", ...).
func CheckResult(st Statement, res guard.Result) error {
	if st.Outcome == OutcomeError {
		return refused("outcome", nil, "the receipt is of a run that failed (%s), not of a result", clip(st.Error))
	}
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"outcome", res.Outcome.String(), st.Outcome},
		{"exit_code", res.ExitCode, st.ExitCode},
		{"signal", res.Signal, st.Signal},
		{"timed_out", res.TimedOut, st.TimedOut},
		{"state_reset", res.StateReset, st.StateReset},
		{"threads_alive", res.ThreadsAlive, st.ThreadsAlive},
		{"exit_reported_by", res.ExitReportedBy, st.ExitReportedBy},
		{"files_truncated", res.FilesTruncated, st.FilesTruncated},
		{"digest", res.Digest, st.Digest},
		{"backend", res.Backend, st.Backend},
		{"image_id", res.ImageID, st.ImageID},
	} {
		if f.got != f.want {
			return refused(f.name, nil, "the result says %v; the receipt signs %v", f.got, f.want)
		}
	}
	if res.ApprovalID != "" && !slices.ContainsFunc(st.Approvals, func(a Approval) bool { return a.ID == res.ApprovalID }) {
		return refused("approval_id", nil, "the result names approval %s, which the receipt does not", res.ApprovalID)
	}
	if err := checkStream("stdout", res.Stdout, res.StdoutBinary, res.StdoutTruncated, st.Stdout); err != nil {
		return err
	}
	if err := checkStream("stderr", res.Stderr, res.StderrBinary, res.StderrTruncated, st.Stderr); err != nil {
		return err
	}
	var kept []File
	for _, f := range st.Files {
		if f.Kept {
			kept = append(kept, f)
		}
	}
	if len(kept) != len(res.Files) {
		return refused("files", nil, "the result carries %d files; the receipt signs %d kept", len(res.Files), len(kept))
	}
	for i, f := range res.Files {
		m := guard.MeasureBytes(f.Content)
		if f.Name != kept[i].Name || m != kept[i].Produced || f.Size != m.Bytes {
			return refused(fmt.Sprintf("files[%d]", i), nil, "file %q (%d bytes, sha256 %s) is not the receipt's %q (%d bytes, sha256 %s)",
				clip(f.Name), m.Bytes, m.SHA256, clip(kept[i].Name), kept[i].Produced.Bytes, kept[i].Produced.SHA256)
		}
	}
	if err := checkOutputs(st, res); err != nil {
		return err
	}
	if (res.Usage == nil) != (st.Usage == nil) || (res.Usage != nil && *res.Usage != *st.Usage) {
		return refused("usage", nil, "the result's usage %s is not the receipt's %s", usageText(res.Usage), usageText(st.Usage))
	}
	var attempts []guard.EgressAttempt
	dropped, lost := 0, false
	if res.Egress != nil {
		attempts, dropped, lost = res.Egress.Attempts, res.Egress.Dropped, res.Egress.Lost
	}
	if len(attempts) != len(st.Egress) || dropped != st.EgressDropped || lost != st.EgressLost {
		return refused("egress", nil, "the result lists %d egress attempts (%d dropped, lost %v); the receipt signs %d (%d dropped, lost %v)",
			len(attempts), dropped, lost, len(st.Egress), st.EgressDropped, st.EgressLost)
	}
	for i, a := range attempts {
		got, want := egressOf(a), st.Egress[i]
		if got.Host != want.Host || got.Port != want.Port || got.Allowed != want.Allowed || got.Reason != want.Reason ||
			got.BytesOut != want.BytesOut || got.BytesIn != want.BytesIn || !slices.Equal(got.Secrets, want.Secrets) {
			return refused(fmt.Sprintf("egress[%d]", i), nil, "the result's attempt %+v is not the receipt's %+v", got, st.Egress[i])
		}
	}
	return checkDerived(st, res)
}

// usageText is a usage as a refusal quotes it.
func usageText(u *guard.Usage) string {
	if u == nil {
		return "(none)"
	}
	return fmt.Sprintf("%+v", *u)
}

// checkOutputs checks that the result carries exactly the outputs st signs, byte for byte.
func checkOutputs(st Statement, res guard.Result) error {
	if res.OutputsTruncated != st.OutputsTruncated {
		return refused("outputs_truncated", nil, "the result says %t; the receipt signs %t", res.OutputsTruncated, st.OutputsTruncated)
	}
	got := outputsOf(res.Outputs)
	if len(got) != len(st.Outputs) {
		return refused("outputs", nil, "the result carries %d outputs; the receipt signs %d", len(got), len(st.Outputs))
	}
	for i, o := range got {
		if o != st.Outputs[i] {
			return refused(fmt.Sprintf("outputs[%d]", i), nil, "output %d (%s, %s, %d bytes, sha256 %s) is not the receipt's (%s, %s, %d bytes, sha256 %s)",
				o.Index, clip(o.Source), clip(o.MIME), o.Data.Bytes, o.Data.SHA256, clip(st.Outputs[i].Source), clip(st.Outputs[i].MIME), st.Outputs[i].Data.Bytes, st.Outputs[i].Data.SHA256)
		}
	}
	return nil
}

// checkDerived checks the result's fields the statement does not sign itself but that a reader
// acts on, against the signed fields they derive from: ok (the outcome), the reviewer and each
// approval's reviewer and key (the host's verified approvals), an edit (its digest is the one
// that ran, its editor one of the verified approvers), a cancellation (the outcome is
// cancelled) and the duration (within the host's clock around the run).
func checkDerived(st Statement, res guard.Result) error {
	if ok := st.Outcome == guard.OutcomeSucceeded.String(); res.OK != ok {
		return refused("ok", nil, "the result says ok %t; the receipt signs outcome %s", res.OK, clip(st.Outcome))
	}
	byID := func(id string) (Approval, bool) {
		i := slices.IndexFunc(st.Approvals, func(a Approval) bool { return a.ID == id })
		if i < 0 {
			return Approval{}, false
		}
		return st.Approvals[i], true
	}
	if res.Reviewer != "" {
		if a, ok := byID(res.ApprovalID); !ok || a.Reviewer != res.Reviewer {
			return refused("reviewer", nil, "the result names reviewer %q, who did not give the approval the receipt signs", clip(res.Reviewer))
		}
	}
	for i, ap := range res.Approvals {
		if a, ok := byID(ap.ApprovalID); !ok || a.Reviewer != ap.Reviewer || a.Fingerprint != ap.Fingerprint {
			return refused(fmt.Sprintf("approvals[%d]", i), nil, "approval %s by %q (key %s) is not one the receipt signs",
				clip(ap.ApprovalID), clip(ap.Reviewer), clip(ap.Fingerprint))
		}
	}
	if e := res.Edit; e != nil {
		if e.Digest != st.Digest || !slices.ContainsFunc(st.Approvals, func(a Approval) bool { return a.Reviewer == e.Editor }) {
			return refused("edit", nil, "the result says %q edited the code to %s; the receipt signs digest %s and no approval of that editor",
				clip(e.Editor), clip(e.Digest), clip(st.Digest))
		}
	}
	if res.Cancelled != nil && st.Outcome != guard.OutcomeCancelled.String() {
		return refused("cancelled", nil, "the result says the run was cancelled; the receipt signs outcome %s", clip(st.Outcome))
	}
	started, err1 := time.Parse(timeLayout, st.Started)
	ended, err2 := time.Parse(timeLayout, st.Ended)
	if err := errors.Join(err1, err2); err != nil {
		return refused("started", err, "the receipt's clock cannot be read")
	}
	if res.Duration < 0 || res.Duration > ended.Sub(started) {
		return refused("duration", nil, "the result says the run took %s; the host's clock around it says %s", res.Duration, ended.Sub(started))
	}
	return nil
}

func checkStream(name string, kept []byte, binary, truncated bool, want Stream) error {
	got := stream(kept, binary, truncated, want.Written)
	switch {
	case got.Kept != want.Kept:
		return refused(name, nil, "the result's %s (%d bytes, sha256 %s) is not what the receipt signs (%d bytes, sha256 %s)",
			name, got.Kept.Bytes, got.Kept.SHA256, want.Kept.Bytes, want.Kept.SHA256)
	case got.Truncated != want.Truncated:
		return refused(name+"_truncated", nil, "the result says %t; the receipt signs %t", got.Truncated, want.Truncated)
	case got.Binary != want.Binary:
		return refused(name+"_binary", nil, "the result says %t; the receipt signs %t", got.Binary, want.Binary)
	}
	return nil
}
