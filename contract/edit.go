package contract

import (
	"fmt"
	"strings"
)

// DecisionEdit is the edit an approving reviewer sends with a Decision: the code to run instead
// of the run's, and the digest of the request they edited (the one the run's status showed).
type DecisionEdit struct {
	// Code is the edited code, which replaces the request's code; everything else of the
	// request (language, files, env, limits, network, egress, secrets) stays. Required.
	Code string `json:"code"`
	// OriginalDigest is the digest of the request the reviewer edited. Required: it must be
	// the run's digest when the edit arrives.
	OriginalDigest string `json:"original_digest"`
}

// EditProblem returns a *Rejection saying what makes d, a decision carrying an edit, malformed
// for a run whose request's digest is now digest, or nil. The signature, over d.Digest (the
// edited request's digest, which only the check of the edited request can confirm), is verified
// apart.
func (d Decision) EditProblem(digest string) *Rejection {
	reject := func(format string, args ...any) *Rejection {
		return &Rejection{Reason: RejectEdit, Msg: fmt.Sprintf(format, args...)}
	}
	e := d.Edit
	switch {
	case e == nil:
		return reject("the decision carries no edit")
	case !d.Approve:
		return reject("an edit is an approval of the edited code: a denial carries none")
	case e.Code == "":
		return reject("the edited code is empty")
	case e.OriginalDigest != digest:
		return reject("the edit is of the request with digest %.80q but this run's digest is now %s; read the run again", e.OriginalDigest, digest)
	case !strings.HasPrefix(d.Digest, "sha256:") || len(d.Digest) != len("sha256:")+64:
		return reject("digest %.80q: an edit must carry the edited request's digest, which its statement signs", d.Digest)
	case d.Digest == digest:
		return reject("the edited request has the run's own digest: approve it without an edit")
	}
	// The decision's other fields are checked as an approval of the edited digest.
	return d.Problem(d.Digest)
}
