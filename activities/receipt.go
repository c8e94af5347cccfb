package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/activity"
	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// hostKey is this sandbox host's signing key and the name its receipts give.
type hostKey struct {
	signer ssh.Signer
	host   receipt.Host
}

// setUpReceipts loads the host key (a sandbox host signs a receipt for every run with it) and
// checks the hosts file (the check records it, and the workflow verifies results against it).
func (a *Activities) setUpReceipts(cfg Config) error {
	a.hostsFile = cfg.HostsFile
	if cfg.HostsFile != "" {
		if _, err := a.loadHosts(); err != nil {
			return err
		}
	}
	if cfg.HostKeyFile == "" {
		return nil
	}
	signer, err := approval.LoadSigner(cfg.HostKeyFile, nil)
	if err != nil {
		return &guard.ConfigError{Msg: fmt.Sprintf("activities: host key: %v", err)}
	}
	name := cfg.HostName
	if name == "" {
		if name, err = os.Hostname(); err != nil {
			return &guard.ConfigError{Msg: fmt.Sprintf("activities: host name: %v (set one)", err)}
		}
	}
	pub := signer.PublicKey()
	a.hostKey = &hostKey{signer: signer, host: receipt.Host{
		Name: name, PublicKey: string(trimNewline(ssh.MarshalAuthorizedKey(pub))), Fingerprint: ssh.FingerprintSHA256(pub)}}
	return nil
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// loadHosts reads the hosts file (nil when the worker has none). A bad file is a ConfigError.
func (a *Activities) loadHosts() (*receipt.Hosts, error) {
	if a.hostsFile == "" {
		return nil, nil
	}
	h, err := receipt.LoadHosts(a.hostsFile)
	if err != nil {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("activities: %v", err)}
	}
	return h, nil
}

// runReceipt is what sign needs besides the result.
type runReceipt struct {
	info           activity.Info
	digest         string
	backend        string
	secrets        []string
	approvals      []receipt.Approval
	started, ended time.Time
	cell           *receipt.Cell
	// claim is the commitment of the host's claim on the run's approval ("" for a cell).
	claim string
	// policyHash is the hash of the policy rules the host applied ("" without any).
	policyHash string
}

// sign returns the host's receipt for a run that ended with res (runErr nil), or with runErr after
// the code may have started; nil when this host has no key. A failure to sign is an
// IntegrationError whose code has run.
func (a *Activities) sign(r runReceipt, res guard.Result, runErr error) (*guard.Receipt, error) {
	if a.hostKey == nil {
		return nil, nil
	}
	run := receipt.Run{
		WorkflowID: r.info.WorkflowExecution.ID, RunID: r.info.WorkflowExecution.RunID, ActivityID: r.info.ActivityID,
		Digest: r.digest, Host: a.hostKey.host, Backend: r.backend, Secrets: r.secrets,
		Started: r.started, Ended: r.ended, Err: runErr, Cell: r.cell, Approvals: r.approvals, Claim: r.claim, PolicyHash: r.policyHash,
	}
	rec, err := receipt.Sign(a.hostKey.signer, receipt.New(run, res))
	if err != nil {
		return nil, &guard.IntegrationError{Op: "sandbox activity: sign the receipt", Err: err, CodeMayHaveStarted: true}
	}
	return &rec, nil
}

// receiptApprovals is a run's approvals as its receipt names them: every approval the host
// verified (a quorum's too), in order.
func receiptApprovals(as []guard.Approval) []receipt.Approval {
	out := make([]receipt.Approval, len(as))
	for i, ap := range as {
		out[i] = receipt.Approval{ID: ap.ApprovalID, Reviewer: ap.Reviewer, Fingerprint: ap.Fingerprint}
	}
	return out
}

// signCell signs the receipt of a cell that ran in hs, chained to the receipt of the cell before
// it, into res. A failure to sign leaves the sandbox to no further cell (the chain of receipts
// would break there).
func (a *Activities) signCell(hs *hostSandbox, r runReceipt, res *guard.Result) error {
	r.cell.Previous = hs.receipt
	rec, err := a.sign(r, *res, nil)
	if err != nil {
		hs.unknown = true
		return err
	}
	if rec != nil {
		res.Receipt = rec
		hs.receipt = receipt.Hash(*rec)
	}
	return nil
}

// signRun signs the receipt of a run that ended with res, or with runErr after its code may have
// started (the receipt then goes with the IntegrationError); a run that was cancelled, or failed
// before its code could start, gets none.
func (a *Activities) signRun(ctx context.Context, r runReceipt, res guard.Result, runErr error) (guard.Result, error) {
	var ie *guard.IntegrationError
	switch {
	case runErr == nil:
		rec, err := a.sign(r, res, nil)
		res.Receipt = rec
		return res, err
	case ctx.Err() == nil && errors.As(runErr, &ie) && ie.CodeMayHaveStarted:
		rec, err := a.sign(r, guard.Result{Digest: r.digest, Backend: r.backend}, runErr)
		if err != nil {
			return res, errors.Join(runErr, err)
		}
		failed := *ie
		failed.Receipt = rec
		return res, &failed
	}
	return res, runErr
}
