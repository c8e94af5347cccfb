package receipt

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

func newSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func hostOf(name string, s ssh.Signer) Host {
	return Host{Name: name, PublicKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey()))), Fingerprint: ssh.FingerprintSHA256(s.PublicKey())}
}

const approvalID = "0b7f3c1e-2d4a-4f6b-9c8d-1e2f3a4b5c6d"

// sample is a guarded result with a cut stdout, a dropped file and an egress attempt.
func sample() (Run, guard.Result) {
	res := guard.Enforce(guard.Result{
		ExitCode: 0, Stdout: []byte("hello \xff world, and more"), Stderr: []byte("warn\n"),
		Files:    []guard.File{{Name: "out.txt", Content: []byte("data")}, {Name: "big.bin", Content: make([]byte, 64)}},
		Measured: &guard.Measured{Stdout: &guard.StreamMeasure{Bytes: 999, SHA256: strings.Repeat("ab", 32)}, Runtime: "runsc"},
		Egress:   &guard.EgressReport{Attempts: []guard.EgressAttempt{{Host: "pypi.org", Port: 443, Allowed: true, BytesOut: 10, BytesIn: 20}}},
		ImageID:  "sha256:" + strings.Repeat("1", 64),
		Outputs: []guard.Output{{Index: 1, Source: guard.OutputFigure, MIME: guard.MIMEPNG, Data: []byte("\x89PNG....")},
			{Index: 2, Source: guard.OutputValue, MIME: guard.MIMEText, Data: []byte("42")},
			{Index: 3, Source: guard.OutputDisplay, MIME: guard.MIMEPNG, Data: make([]byte, 40)}},
	}, guard.Limits{MaxStdoutBytes: 12, MaxStderrBytes: 100, MaxFiles: 5, MaxFileBytes: 32, MaxTotalFileBytes: 100,
		MaxOutputs: 5, MaxOutputBytes: 32, MaxTotalOutputBytes: 100})
	res.Digest, res.Backend, res.ApprovalID = "sha256:"+strings.Repeat("c", 64), "docker", approvalID
	res.Usage = &guard.Usage{CPUTime: guard.Duration(2101344843), PeakMemoryBytes: 113778688, SandboxPeakMemoryBytes: 119373824,
		WallTime: guard.Duration(2500 * time.Millisecond), FilesBytes: 4096, EgressBytesOut: 10, EgressBytesIn: 20, MeasuredBy: guard.UsageByCgroup}
	run := Run{WorkflowID: "wf-1", RunID: "run-1", ActivityID: "5", Digest: res.Digest,
		Approvals: []Approval{{ID: approvalID, Reviewer: "alice", Fingerprint: "SHA256:abc"}},
		Backend:   "docker", Secrets: []string{"PYPI_TOKEN"},
		Started: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC), Ended: time.Date(2026, 12, 2, 3, 0, 1, 5, time.UTC)}
	return run, res
}

func signed(t *testing.T, s ssh.Signer, name string) (*Hosts, guard.Receipt, guard.Result) {
	t.Helper()
	run, res := sample()
	run.Host = hostOf(name, s)
	rec, err := Sign(s, New(run, res))
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := ParseHosts([]byte(HostLine(name, s.PublicKey())))
	if err != nil {
		t.Fatal(err)
	}
	return hosts, rec, res
}

func refusedField(t *testing.T, err error) string {
	t.Helper()
	var rr *guard.ReceiptRefused
	if !errors.As(err, &rr) {
		t.Fatalf("got %v; want a *guard.ReceiptRefused", err)
	}
	return rr.Field
}

func TestReceiptVerifiesAndSignsWhatRan(t *testing.T) {
	s := newSigner(t)
	hosts, rec, res := signed(t, s, "host-a")
	st, err := Verify(hosts, &rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckRun(st, Expect{WorkflowID: "wf-1", RunID: "run-1", Digest: res.Digest, Approvals: []Approval{{ID: approvalID, Fingerprint: "SHA256:abc"}}}); err != nil {
		t.Fatal(err)
	}
	if err := CheckResult(st, res); err != nil {
		t.Fatal(err)
	}
	// What the host sets besides the statement, as the host sets it, passes.
	res.Reviewer, res.Duration = "alice", time.Second
	res.Approvals = []guard.Approval{{ApprovalID: approvalID, Reviewer: "alice", Fingerprint: "SHA256:abc"}}
	res.Edit = &guard.Edit{Editor: "alice", OriginalDigest: "sha256:" + strings.Repeat("e", 64), Digest: res.Digest}
	if err := CheckResult(st, res); err != nil {
		t.Fatalf("the host's own fields: %v", err)
	}
	if st.Stdout.Written.Bytes != 999 || !st.Stdout.Truncated || st.Stdout.Kept.Bytes != int64(len(mustText(res.Stdout))) {
		t.Errorf("stdout %+v; want written 999 bytes, truncated, kept as the result's text", st.Stdout)
	}
	if len(st.Files) != 2 || !st.Files[0].Kept || st.Files[1].Kept || !st.FilesTruncated {
		t.Errorf("files %+v; want out.txt kept and big.bin produced but dropped", st.Files)
	}
	if st.Usage == nil || *st.Usage != *res.Usage {
		t.Errorf("usage: the statement signs %+v; want the result's %+v", st.Usage, res.Usage)
	}
	if st.Runtime != "runsc" || len(st.Egress) != 1 || st.Secrets[0] != "PYPI_TOKEN" {
		t.Errorf("runtime %q, egress %+v, secrets %v", st.Runtime, st.Egress, st.Secrets)
	}
}

func mustText(b []byte) string { s, _ := guard.TextOf(b, false); return s }

func TestReceiptRefusesEveryChange(t *testing.T) {
	s := newSigner(t)
	hosts, rec, res := signed(t, s, "host-a")
	st, err := Verify(hosts, &rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, field string
		change      func(r *guard.Result)
	}{
		{"stdout", "stdout", func(r *guard.Result) { r.Stdout = append([]byte("H"), r.Stdout[1:]...) }},
		{"stderr", "stderr", func(r *guard.Result) { r.Stderr = []byte("no warnings\n") }},
		{"file bytes", "files[0]", func(r *guard.Result) { r.Files[0].Content = []byte("dat4") }},
		{"file added", "files", func(r *guard.Result) { r.Files = append(r.Files, guard.File{Name: "x", Content: []byte("x")}) }},
		{"output bytes", "outputs[0]", func(r *guard.Result) { r.Outputs[0].Data = []byte("\x89PNG...!") }},
		{"output type", "outputs[1]", func(r *guard.Result) { r.Outputs[1].MIME = guard.MIMEHTML }},
		{"output source", "outputs[1]", func(r *guard.Result) { r.Outputs[1].Source = guard.OutputDisplay }},
		{"output left out put back", "outputs[2]", func(r *guard.Result) { r.Outputs[2].Data, r.Outputs[2].LeftOut = make([]byte, 40), false }},
		{"output dropped", "outputs", func(r *guard.Result) { r.Outputs = r.Outputs[:2] }},
		{"outputs truncated", "outputs_truncated", func(r *guard.Result) { r.OutputsTruncated = false }},
		{"exit code", "exit_code", func(r *guard.Result) { r.ExitCode = 3 }},
		// An exit the interpreter reported passed off as one the host measured, and the reverse.
		{"who reported the exit", "exit_reported_by", func(r *guard.Result) { r.ExitReportedBy = guard.ReportedByInterpreter }},
		{"threads alive", "threads_alive", func(r *guard.Result) { r.ThreadsAlive = 1 }},
		{"egress bytes", "egress[0]", func(r *guard.Result) { r.Egress.Attempts[0].BytesIn++ }},
		{"egress host", "egress[0]", func(r *guard.Result) { r.Egress.Attempts[0].Host = "evil.example" }},
		{"egress secret", "egress[0]", func(r *guard.Result) { r.Egress.Attempts[0].Secrets = []string{"OTHER"} }},
		{"egress hidden", "egress", func(r *guard.Result) { r.Egress = nil }},
		{"truncation", "stdout_truncated", func(r *guard.Result) { r.StdoutTruncated = false }},
		{"image", "image_id", func(r *guard.Result) { r.ImageID = "sha256:" + strings.Repeat("2", 64) }},
		// What a reader acts on without the statement signing it as such: derived from what it signs.
		{"ok of a failed run", "ok", func(r *guard.Result) { r.OK = false }},
		{"another reviewer", "reviewer", func(r *guard.Result) { r.Reviewer = "mallory" }},
		{"a reviewer without the approval", "reviewer", func(r *guard.Result) { r.ApprovalID, r.Reviewer = "", "alice" }},
		{"an approval's reviewer", "approvals[0]", func(r *guard.Result) {
			r.Approvals = []guard.Approval{{ApprovalID: approvalID, Reviewer: "mallory", Fingerprint: "SHA256:abc"}}
		}},
		{"an approval the host never verified", "approvals[1]", func(r *guard.Result) {
			r.Approvals = []guard.Approval{{ApprovalID: approvalID, Reviewer: "alice", Fingerprint: "SHA256:abc"}, {ApprovalID: "other", Reviewer: "bob"}}
		}},
		{"an edit that never happened", "edit", func(r *guard.Result) {
			r.Edit = &guard.Edit{Editor: "mallory", OriginalDigest: "sha256:" + strings.Repeat("e", 64), Digest: r.Digest}
		}},
		{"an edit to other code", "edit", func(r *guard.Result) {
			r.Edit = &guard.Edit{Editor: "alice", Digest: "sha256:" + strings.Repeat("e", 64)}
		}},
		{"a cancel that never happened", "cancelled", func(r *guard.Result) { r.Cancelled = &guard.Cancellation{By: "alice"} }},
		{"a duration past the host's clock", "duration", func(r *guard.Result) { r.Duration = 2 * time.Second }},
		// What the run cost, as the host measured it: one figure changed, or all of it hidden.
		{"cpu time", "usage", func(r *guard.Result) { u := *r.Usage; u.CPUTime /= 2; r.Usage = &u }},
		{"peak memory", "usage", func(r *guard.Result) { u := *r.Usage; u.PeakMemoryBytes = 1 << 20; r.Usage = &u }},
		{"egress bytes in the usage", "usage", func(r *guard.Result) { u := *r.Usage; u.EgressBytesIn = 0; r.Usage = &u }},
		{"usage hidden", "usage", func(r *guard.Result) { r.Usage = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := res
			r.Files = append([]guard.File(nil), res.Files...)
			r.Outputs = append([]guard.Output(nil), res.Outputs...)
			eg := *res.Egress
			eg.Attempts = append([]guard.EgressAttempt(nil), res.Egress.Attempts...)
			r.Egress = &eg
			tc.change(&r)
			if got := refusedField(t, CheckResult(st, r)); got != tc.field {
				t.Errorf("refused field %q; want %q", got, tc.field)
			}
		})
	}
	// A statement changed by one byte no longer verifies.
	bad := rec
	bad.Statement = strings.Replace(rec.Statement, `"exit_code":0`, `"exit_code":1`, 1)
	if got := refusedField(t, func() error { _, err := Verify(hosts, &bad); return err }()); got != FieldSignature {
		t.Errorf("a changed statement: refused %q; want %q", got, FieldSignature)
	}
	for _, w := range []struct {
		field string
		want  Expect
	}{
		{"workflow_id", Expect{WorkflowID: "wf-2", RunID: "run-1", Digest: res.Digest}},
		{"run_id", Expect{WorkflowID: "wf-1", RunID: "run-2", Digest: res.Digest}},
		{"digest", Expect{WorkflowID: "wf-1", RunID: "run-1", Digest: "sha256:" + strings.Repeat("d", 64)}},
		{"approvals", Expect{WorkflowID: "wf-1", RunID: "run-1", Digest: res.Digest, Approvals: []Approval{{ID: approvalID, Fingerprint: "SHA256:other"}}}},
	} {
		if got := refusedField(t, CheckRun(st, w.want)); got != w.field {
			t.Errorf("CheckRun: refused %q; want %q", got, w.field)
		}
	}
}

func TestReceiptRefusesOtherKeysAndNamespaces(t *testing.T) {
	s, other := newSigner(t), newSigner(t)
	hosts, _, _ := signed(t, s, "host-a")
	// Signed by a key the hosts file does not list.
	_, foreign, _ := signed(t, other, "host-a")
	if _, err := Verify(hosts, &foreign); refusedField(t, err) != FieldHostKey {
		t.Errorf("a receipt by an unlisted key: %v; want a host_key refusal", err)
	}
	// The listed key, but the statement names another host than its line.
	run, res := sample()
	run.Host = hostOf("host-b", s)
	rec, err := Sign(s, New(run, res))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(hosts, &rec); refusedField(t, err) != "host" {
		t.Errorf("a receipt naming another host: %v; want a host refusal", err)
	}
	// A reviewer's SSH signature (namespace sandboxflow-approval) over the very statement bytes,
	// by the host's own key, is not a receipt.
	_, good, _ := signed(t, s, "host-a")
	sig, err := approval.Sign(s, []byte(good.Statement))
	if err != nil {
		t.Fatal(err)
	}
	forged := guard.Receipt{Statement: good.Statement, Signature: sig}
	_, err = Verify(hosts, &forged)
	var ref *approval.RefusalError
	if refusedField(t, err) != FieldSignature || !errors.As(err, &ref) || ref.Reason != approval.ReasonWrongNamespace {
		t.Errorf("a reviewer's signature presented as a receipt: %v; want a wrong_namespace signature refusal", err)
	}
	// And a receipt is no approval: its namespace is not the reviewers'.
	if _, err := approval.VerifyNamespace(good.Signature, approval.Namespace, []byte(good.Statement)); !errors.Is(err, approval.ReasonWrongNamespace) {
		t.Errorf("a receipt presented as an approval: %v; want wrong_namespace", err)
	}
	// A hosts line limited to another namespace does not sign receipts.
	limited, err := ParseHosts([]byte("host-a namespaces=\"sandboxflow-approval\" " + string(ssh.MarshalAuthorizedKey(s.PublicKey()))))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(limited, &good); refusedField(t, err) != FieldHostKey {
		t.Errorf("a key limited to approvals: %v; want a host_key refusal", err)
	}
	if _, err := Verify(hosts, nil); refusedField(t, err) != FieldReceipt {
		t.Errorf("no receipt: %v; want a receipt refusal", err)
	}
}

func TestStatementIsCanonical(t *testing.T) {
	run, res := sample()
	b, err := New(run, res).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(b); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{
		"spaces":        strings.Replace(string(b), `,"run_id"`, `, "run_id"`, 1),
		"no newline":    strings.TrimSuffix(string(b), "\n"),
		"unknown field": strings.Replace(string(b), `{"receipt"`, `{"x":1,"receipt"`, 1),
		"version":       strings.Replace(string(b), Version, "sandboxflow-receipt/v0", 1),
		"reordered":     strings.Replace(string(b), `"workflow_id":"wf-1","run_id":"run-1"`, `"run_id":"run-1","workflow_id":"wf-1"`, 1),
	} {
		if _, err := Parse([]byte(v)); err == nil {
			t.Errorf("%s: parsed; want refused", name)
		}
	}
}

func TestHostsRoundTrip(t *testing.T) {
	s := newSigner(t)
	hosts, rec, _ := signed(t, s, "host-a")
	b, err := hosts.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var back Hosts
	if err := back.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(&back, &rec); err != nil {
		t.Fatalf("hosts read back from JSON: %v", err)
	}
	tampered := strings.Replace(string(b), `"fingerprint":"SHA256:`, `"fingerprint":"SHA256:x`, 1)
	if err := back.UnmarshalJSON([]byte(tampered)); err == nil {
		t.Error("hosts JSON with a wrong fingerprint: accepted; want refused")
	}
}

// TestSSHKeygenVerifiesReceipt checks a receipt with OpenSSH itself, against the hosts file as
// operators write it, and that ssh-keygen refuses it in the approval namespace.
func TestSSHKeygenVerifiesReceipt(t *testing.T) {
	need.Need(t, need.SSHKeygen)
	const keygen = "ssh-keygen"
	s := newSigner(t)
	_, rec, _ := signed(t, s, "host-a")
	dir := t.TempDir()
	hostsFile, sigFile := filepath.Join(dir, "hosts"), filepath.Join(dir, "receipt.sig")
	if err := os.WriteFile(hostsFile, []byte(HostLine("host-a", s.PublicKey())), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sigFile, []byte(rec.Signature), 0o644); err != nil {
		t.Fatal(err)
	}
	verify := func(ns, stmt string) error {
		cmd := exec.Command(keygen, "-Y", "verify", "-f", hostsFile, "-I", "host-a", "-n", ns, "-s", sigFile)
		cmd.Stdin = strings.NewReader(stmt)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return errors.New(string(out))
		}
		return nil
	}
	if err := verify(Namespace, rec.Statement); err != nil {
		t.Fatalf("ssh-keygen -Y verify: %v", err)
	}
	if err := verify(approval.Namespace, rec.Statement); err == nil {
		t.Error("ssh-keygen verified the receipt in the approval namespace")
	}
	if err := verify(Namespace, strings.Replace(rec.Statement, `"exit_code":0`, `"exit_code":1`, 1)); err == nil {
		t.Error("ssh-keygen verified a changed statement")
	}
}

// TestHostKeyMadeAsTheREADMESays: a host key made with ssh-keygen and its hosts line written with
// the echo of docs/receipts-and-audit.md (once in the README) verify a receipt signed with that key.
func TestHostKeyMadeAsTheREADMESays(t *testing.T) {
	need.Need(t, need.SSHKeygen)
	dir := t.TempDir()
	cmd := exec.Command("sh", "-ec", `ssh-keygen -q -t ed25519 -N '' -C host-1 -f host-1.key
echo "host-1 namespaces=\"sandboxflow-receipt\" $(cat host-1.key.pub)" >> hosts`)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	signer, err := approval.LoadSigner(filepath.Join(dir, "host-1.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := LoadHosts(filepath.Join(dir, "hosts"))
	if err != nil {
		t.Fatal(err)
	}
	run, res := sample()
	run.Host = hostOf("host-1", signer)
	rec, err := Sign(signer, New(run, res))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(hosts, &rec); err != nil {
		t.Fatalf("a receipt by the ssh-keygen host key: %v", err)
	}
}
