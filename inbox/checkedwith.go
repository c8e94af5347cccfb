package inbox

import (
	"context"
	"fmt"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/client"
)

// notCheckedWithError refuses a decision signed by a passkey that the reviewers file lists now
// but did not list when the run (or session) was checked: the workflow and the sandbox host
// verify decisions against the reviewer keys the check recorded, so it would refuse the
// decision anyway, with a reason the reviewer would never see.
type notCheckedWithError struct {
	// Fingerprint is the passkey's; Subject is "run" or "session".
	Fingerprint, Subject string
}

func (e *notCheckedWithError) Error() string {
	return fmt.Sprintf("your passkey %s is in the reviewers file now, but was not when this %s was checked: "+
		"this %s accepts the reviewers it was checked with; ask for a new %s (or a reviewer listed then)",
		e.Fingerprint, e.Subject, e.Subject, e.Subject)
}

// recordedReviewers reads the reviewer keys run runID of RunCode workflow id recorded when it was
// checked (its audit record, read from its history alone).
func (s *Server) recordedReviewers(ctx context.Context, id, runID string) ([]approval.Key, error) {
	return auditedReviewers(ctx, s.runs, id, runID)
}

// auditedReviewers reads the reviewer keys run runID of workflow id (a run or a session)
// recorded when it was checked, from its history alone (client.Audit).
func auditedReviewers(ctx context.Context, c *client.Client, id, runID string) ([]approval.Key, error) {
	ctx, cancel := context.WithTimeout(ctx, temporalTimeout)
	defer cancel()
	rec, err := c.Audit(ctx, id, runID)
	if err != nil {
		return nil, fmt.Errorf("inbox: reviewers %s was checked with: %w", id, err)
	}
	return rec.ReviewerKeys, nil
}

// checkedWith refuses the passkey fingerprint when keys, the reviewers a run or session was
// checked with, do not hold it. When they could not be read (readErr) it says nothing: the
// workflow judges the decision, and its refusal is shown.
func checkedWith(keys []approval.Key, readErr error, fingerprint, subject string) error {
	if readErr != nil {
		return nil
	}
	for _, k := range keys {
		if k.Fingerprint == fingerprint {
			return nil
		}
	}
	return &notCheckedWithError{Fingerprint: fingerprint, Subject: subject}
}
