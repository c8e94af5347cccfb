package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// VerifyAuditStream checks audit stream records (starter audit --follow's lines) offline, against
// the given reviewers and hosts, as VerifyAudit checks a record: each record's schema version and
// shape; each end record of a run or session by VerifyAudit on the whole record it carries (its
// result must be that record's); each cell's end by its receipt (signature, run, cell and the
// result it signs; the chain is checked by the session's end); and each check, accepted decision
// and claim against the end record of its run, when the records hold it (else its shape only).
func VerifyAuditStream(recs []contract.AuditStreamRecord, reviewers *approval.Reviewers, hosts *receipt.Hosts) AuditVerdict {
	var v AuditVerdict
	add := v.add
	ends := map[runRef]*contract.AuditRecord{}
	for i, r := range recs {
		if err := streamShape(r); err != nil {
			add(fmt.Sprintf("line %d", i+1), err)
			continue
		}
		if r.Kind == contract.StreamEnd && r.End.Record != nil {
			ends[runRef{r.WorkflowID, r.RunID}] = r.End.Record
		}
	}
	for i, r := range recs {
		name := fmt.Sprintf("line %d %s %s", i+1, r.Kind, r.WorkflowID)
		if streamShape(r) != nil {
			continue
		}
		end := ends[runRef{r.WorkflowID, r.RunID}]
		switch {
		case r.Kind == contract.StreamEnd && r.End.Record != nil:
			verifyStreamEnd(r, reviewers, hosts, func(check string, err error) { add(name+": "+check, err) })
		case r.Kind == contract.StreamEnd && r.Cell != nil:
			add(name, verifyCellEnd(r, hosts))
		case end != nil:
			add(name, againstEnd(r, end))
		default:
			add(name, nil)
		}
	}
	v.OK = !slices.ContainsFunc(v.Checks, func(c AuditCheck) bool { return !c.OK })
	if len(v.Checks) == 0 {
		v.OK = false
		v.Checks = append(v.Checks, AuditCheck{Name: "records", Error: "no audit stream record to verify"})
	}
	return v
}

// streamShape checks a record's version, and that it carries the body its kind names and no other.
func streamShape(r contract.AuditStreamRecord) error {
	if r.SchemaVersion != contract.AuditStreamVersion {
		return fmt.Errorf("schema_version %q; want %q", r.SchemaVersion, contract.AuditStreamVersion)
	}
	bodies := map[string]bool{contract.StreamCheck: r.Check != nil, contract.StreamDecision: r.Decision != nil,
		contract.StreamClaim: r.Claim != nil, contract.StreamEnd: r.End != nil, contract.StreamRefusal: r.Refusal != nil}
	if _, ok := bodies[r.Kind]; !ok {
		return fmt.Errorf("kind %q is not one of check, decision, claim, end, refusal", r.Kind)
	}
	for k, set := range bodies {
		if set != (k == r.Kind) {
			return fmt.Errorf("a %s record must carry %q and no other body", r.Kind, r.Kind)
		}
	}
	if r.WorkflowID == "" || r.RunID == "" || r.Cursor == "" {
		return errors.New("a record names its workflow_id, run_id and cursor")
	}
	return nil
}

// verifyStreamEnd checks a run's or a session's end: the whole record it carries, by VerifyAudit,
// and that its result is that record's.
func verifyStreamEnd(r contract.AuditStreamRecord, reviewers *approval.Reviewers, hosts *receipt.Hosts, add func(string, error)) {
	rec := r.End.Record
	if rec.WorkflowID != r.WorkflowID || rec.RunID != r.RunID {
		add("record", fmt.Errorf("the end record carries the record of %s/%s", rec.WorkflowID, rec.RunID))
	}
	if a, b := jsonOf(r.End.Result), jsonOf(rec.Result); !bytes.Equal(a, b) {
		add("result", errors.New("the end's result is not the result of the record it carries"))
	}
	if rec.Result == nil && rec.Receipt == nil && rec.Session == nil {
		verifyUnran(*rec, reviewers, add)
		return
	}
	for _, c := range VerifyAudit(*rec, reviewers, hosts).Checks {
		var err error
		if !c.OK {
			err = errors.New(c.Error)
		}
		add(c.Name, err)
	}
}

// verifyUnran checks the end of a run whose code never ran (denied, expired, cancelled before
// it ran): the checked request and its digest, and the signature of the decision the run took,
// if it took one.
func verifyUnran(rec contract.AuditRecord, reviewers *approval.Reviewers, add func(string, error)) {
	if rec.Audit != contract.AuditVersion {
		add("version", fmt.Errorf("audit %q; want %q", rec.Audit, contract.AuditVersion))
	}
	accepted := acceptedDecision(rec)
	verifyRequest(rec, accepted, add)
	if accepted == nil {
		add("decision", nil)
		return
	}
	want := statementFields(rec, accepted.Decision)
	if stmt, err := want.Statement(); err != nil || string(stmt) != accepted.Statement {
		add("decision", fmt.Errorf("the statement recorded for decision %s is not the one its fields make for this run", accepted.Decision.ApprovalID))
		return
	}
	_, err := approval.Verify(reviewers, want, accepted.Decision.Proof(), accepted.Time)
	add("decision", err)
}

// verifyCellEnd checks a cell's end: its receipt verifies against hosts, is this session's and
// this cell's, and signs its result.
func verifyCellEnd(r contract.AuditStreamRecord, hosts *receipt.Hosts) error {
	if r.End.Result == nil {
		return errors.New("a cell's end carries its result")
	}
	st, err := receipt.Verify(hosts, r.End.Result.Receipt)
	if err != nil {
		return err
	}
	switch {
	case st.WorkflowID != r.WorkflowID || st.RunID != r.RunID:
		return fmt.Errorf("the receipt is of %s/%s", st.WorkflowID, st.RunID)
	case st.Cell == nil || st.Cell.Index != *r.Cell:
		return fmt.Errorf("the receipt is not cell %d's", *r.Cell)
	}
	return receipt.CheckResult(st, *r.End.Result)
}

// againstEnd checks a check, decision or claim record against the whole record of its run's end.
func againstEnd(r contract.AuditStreamRecord, end *contract.AuditRecord) error {
	switch r.Kind {
	case contract.StreamCheck:
		digest := end.Checked.Digest
		if end.Session != nil {
			digest = end.Session.Digest
		}
		if r.Check.Digest != digest && !editedFrom(end, r.Check.Digest) {
			return fmt.Errorf("the check's digest %s is not the run's %s", r.Check.Digest, digest)
		}
	case contract.StreamDecision:
		if r.Cell != nil || !r.Decision.Accepted {
			return nil
		}
		a := acceptedDecision(*end)
		if a == nil || a.Decision.ApprovalID != r.Decision.ApprovalID || a.Fingerprint != r.Decision.Fingerprint {
			return fmt.Errorf("decision %s by key %s is not the run's accepted decision", r.Decision.ApprovalID, r.Decision.Fingerprint)
		}
	case contract.StreamClaim:
		if !slices.ContainsFunc(end.Claims, func(c contract.SandboxClaim) bool { return c == *r.Claim }) && end.Session == nil {
			return fmt.Errorf("claim %s is not among the run's claims", r.Claim.Commitment)
		}
	}
	return nil
}

// editedFrom says the run's accepted decision edited the request whose digest is digest (the
// check recorded the request as started; the record holds the edited one).
func editedFrom(end *contract.AuditRecord, digest string) bool {
	a := acceptedDecision(*end)
	return a != nil && a.Decision.Edit != nil && a.Decision.Edit.OriginalDigest == digest
}

func jsonOf(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
