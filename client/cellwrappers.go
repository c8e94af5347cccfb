package client

import (
	"context"

	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
)

// CellStatement is Statement of cell (0: the waiting one) of sessionID, with the status it was
// made from.
//
// Deprecated: use Statement with client.Cell(sessionID, cell); kept for one release.
func (c *Client) CellStatement(ctx context.Context, sessionID string, cell int, opts StatementOptions) (approval.Fields, contract.SessionStatus, error) {
	return c.statementOf(ctx, Cell(sessionID, cell), opts)
}

// ApproveCell is Approve of cell (0: the waiting one) of sessionID.
//
// Deprecated: use Approve with client.Cell(sessionID, cell); kept for one release.
func (c *Client) ApproveCell(ctx context.Context, sessionID string, cell int, digest string, signer ssh.Signer, reason string) (Decided, error) {
	return c.Approve(ctx, Cell(sessionID, cell), digest, signer, reason)
}

// ApproveCellWait is ApproveAndWait of cell (0: the waiting one) of sessionID, without the wait:
// the answer comes once the cell has ended, with its status in Decided.CellStatus.
//
// Deprecated: use ApproveAndWait with client.Cell(sessionID, cell); kept for one release.
func (c *Client) ApproveCellWait(ctx context.Context, sessionID string, cell int, digest string, signer ssh.Signer, reason string) (Decided, error) {
	out, _, err := c.decide(ctx, Cell(sessionID, cell), digest, signer, reason, false, true)
	return out, err
}

// DenyCell is Deny of cell (0: the waiting one) of sessionID.
//
// Deprecated: use Deny with client.Cell(sessionID, cell); kept for one release.
func (c *Client) DenyCell(ctx context.Context, sessionID string, cell int, signer ssh.Signer, reason string) (Decided, error) {
	return c.Deny(ctx, Cell(sessionID, cell), signer, reason)
}

// CancelCell is Cancel of cell of sessionID.
//
// Deprecated: use Cancel with client.Cell(sessionID, cell); kept for one release.
func (c *Client) CancelCell(ctx context.Context, sessionID string, cell int, reason string) (contract.CancelResult, error) {
	return c.Cancel(ctx, Cell(sessionID, cell), reason)
}

// ReviewSession is Review of a cell of sessionID: what a reviewer reads about the session.
//
// Deprecated: use Review with client.Cell(sessionID, n); kept for one release.
func (c *Client) ReviewSession(ctx context.Context, sessionID string, opts ReviewOptions) (SessionReview, error) {
	return c.reviewSession(ctx, sessionID, opts)
}
