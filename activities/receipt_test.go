package activities

import (
	"errors"
	"testing"

	"go.temporal.io/sdk/converter"
	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/historytest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/hosttest"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// TestRunSignsReceipts: a host with a key signs a receipt of every run that returned, and of one
// that failed after its code may have started (it travels with the IntegrationError); a failure
// before the code could start gets none. The check records the hosts file.
func TestRunSignsReceipts(t *testing.T) {
	host := hosttest.New(t, "host-a")
	hosts, err := receipt.LoadHosts(host.File)
	if err != nil {
		t.Fatal(err)
	}
	newActs := func(b *echoBackend) *Activities {
		a, err := New(Config{Backend: b, ReviewersFile: reviewersFile(t), HostKeyFile: host.KeyFile, HostName: host.Name, HostsFile: host.File})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	b := &echoBackend{Result: guard.Result{Stdout: []byte("out"), Files: []guard.File{{Name: "f", Content: []byte("x")}}}}
	a := newActs(b)
	check, err := a.SandboxCheck(t.Context(), contract.CheckInput{Request: guard.Request{Code: "print(1)"}})
	if err != nil || check.Hosts.Len() != 1 {
		t.Fatalf("check recorded hosts %v (%v); want host-a's key", check.Hosts.Keys(), err)
	}
	c := check.Checked
	res, err := runActivity(t, a, approved(t, c, fields(c.Digest)))
	if err != nil {
		t.Fatal(err)
	}
	st, err := receipt.Verify(hosts, res.Receipt)
	if err != nil {
		t.Fatalf("receipt: %v", err)
	}
	if err := receipt.CheckRun(st, receipt.Expect{WorkflowID: testWorkflowID, RunID: testRunID, Digest: c.Digest,
		Approvals: []receipt.Approval{{ID: approvalID, Fingerprint: ssh.FingerprintSHA256(testReviewer().Signer.PublicKey())}}}); err != nil {
		t.Error(err)
	}
	if err := receipt.CheckResult(st, res); err != nil {
		t.Error(err)
	}
	var claim contract.SandboxClaim
	claims := a.history.(*historytest.Log).Signals(testWorkflowID, testRunID)
	if len(claims) != 1 || converter.GetDefaultDataConverter().FromPayloads(claims[0].GetWorkflowExecutionSignaledEventAttributes().GetInput(), &claim) != nil {
		t.Fatalf("signals %v; want the host's claim", claims)
	}
	if st.Claim == "" || st.Claim != claim.Commitment {
		t.Errorf("receipt names claim %q; want the host's claim %q", st.Claim, claim.Commitment)
	}
	if check.Run.LateResultWait != DefaultLateResultWait {
		t.Errorf("check recorded late result wait %s with a hosts file; want %s", check.Run.LateResultWait, DefaultLateResultWait)
	}
	if len(st.Approvals) != 1 || st.Approvals[0].Reviewer != "alice" || st.Approvals[0].Fingerprint == "" || st.Host.Name != "host-a" {
		t.Errorf("statement approvals %+v, host %+v; want alice's verified key and host-a", st.Approvals, st.Host)
	}

	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"after start", &guard.IntegrationError{Op: "echo: read", Err: errors.New("garbled <out-s3cret>"), CodeMayHaveStarted: true}, true},
		{"before start", &guard.IntegrationError{Op: "echo: connect", Err: errors.New("refused")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newActs(&echoBackend{Err: tc.err})
			c := checked(t, a, guard.Request{Code: "print(1)"})
			_, err := runActivity(t, a, approved(t, c, fields(c.Digest)))
			var ie *guard.IntegrationError
			if !errors.As(contract.FromFailure(err), &ie) {
				t.Fatalf("Run: %v; want an IntegrationError", err)
			}
			if (ie.Receipt != nil) != tc.want {
				t.Fatalf("receipt %v; want one: %t", ie.Receipt, tc.want)
			}
			if !tc.want {
				return
			}
			st, err := receipt.Verify(hosts, ie.Receipt)
			if err != nil || st.Outcome != receipt.OutcomeError || st.Error != "IntegrationError: echo: read" {
				t.Errorf("error receipt %+v, %v; want outcome error naming the operation only", st, err)
			}
			if receipt.CheckResult(st, guard.Result{}) == nil {
				t.Error("an error's receipt passed as a result's")
			}
		})
	}
}
