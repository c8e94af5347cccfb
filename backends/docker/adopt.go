package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Adopt (guard.Adopter) collects the result of a run that a worker of this deployment sent to the
// container sandbox (or, when sandbox is "", to the container labelled with c's owner) and did
// not collect, because it was SIGKILLed or stopped while the code ran: the container runs on
// without its worker, and the daemon keeps what its supervisor wrote (containerSpec.KeepLog).
// Adopt waits for the container to stop (bounded by ctx), reads that report from the
// container's start, completes it from the container's state as a run does, and removes the
// container. A run with egress loses its proxy's report with its worker: its result says so
// (guard.EgressReport.Lost), and its supervisor closed the code's connections when the worker
// went. Only a container that carries this backend's own labels is taken, so a spool entry
// cannot point it at another deployment's container.
//
// Errors are IntegrationErrors whose code may have run: the container is gone (a dockerd restart,
// the reaper), it kept no report (made by a worker without KeepLog), or the report is cut short.
func (b *Backend) Adopt(ctx context.Context, sandbox string, c guard.Checked) (guard.Result, error) {
	sb, err := b.adoptee(ctx, sandbox, c)
	if err != nil {
		return guard.Result{}, err
	}
	defer func() {
		if err := b.remove(context.WithoutCancel(ctx), sb.id, true); err != nil {
			b.log.Warn("adopted sandbox container not removed; the reaper will retry", "container", sb.id, "error", err)
		}
	}()
	r := &run{b: b, sb: sb, c: c, rep: newReport(c.Limits, nil), diag: guard.NewCapBuffer(diagBytes), sent: true}
	r.rep.tunnelLost = len(c.Egress) > 0
	// The daemon has written all of a container's output to its log once it reports it stopped.
	if _, err := b.eng.Wait(ctx, sb.id); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("its code did not end in time: %w", ctx.Err())
		}
		return guard.Result{}, r.fail("docker: adopt container", err)
	}
	if err := b.eng.Logs(ctx, sb.id, r.rep, r.diag); err != nil {
		if r.rep.err != nil {
			err = r.rep.err
		}
		return guard.Result{}, r.fail("docker: read the kept report of container", err)
	}
	if r.rep.exit == nil && r.rep.supErr == "" {
		// Without its supervisor's report nothing tells the code's end from a kill from
		// outside (a daemon restart, an operator): under gVisor such a kill looks like a
		// memory-limit kill, which a run only reads it as because its own worker watched.
		return guard.Result{}, r.fail("docker: adopt container", errors.New("it stopped without its supervisor's report"))
	}
	res, _, err := r.collect(ctx)
	if err != nil {
		return guard.Result{}, err
	}
	// As acquired.Run: the backend applies the limits once (the guard re-applies them).
	res = guard.Enforce(res, c.Limits)
	res.Digest = c.Digest
	res.Backend = Name
	res.ImageID = sb.image.ID
	if len(c.Egress) > 0 {
		res.Egress = &guard.EgressReport{Lost: true}
	}
	return res, nil
}

// adoptee finds the container Adopt collects among this backend's own: the one whose id is (or
// begins with) id, or, when id is "", the one labelled with c's owner. A container labelled
// with a digest must carry c's.
func (b *Backend) adoptee(ctx context.Context, id string, c guard.Checked) (*sandbox, error) {
	list, err := b.eng.List(ctx, b.ownLabels())
	if err != nil {
		return nil, &guard.IntegrationError{Op: "docker: list sandbox containers to adopt", Err: err, CodeMayHaveStarted: true}
	}
	for _, ct := range list {
		l := ct.Labels
		mine := id != "" && strings.HasPrefix(ct.ID, id) ||
			id == "" && l[LabelWorkflowID] == c.Owner.WorkflowID && l[LabelRunID] == c.Owner.RunID && l[LabelActivityID] == c.Owner.ActivityID
		if !mine || l[LabelSession] != "" {
			continue
		}
		if d := l[LabelDigest]; d != "" && d != c.Digest {
			return nil, &guard.IntegrationError{Op: "docker: adopt container " + ct.ID, CodeMayHaveStarted: true,
				Err: fmt.Errorf("it ran digest %s, not the run's %s", d, c.Digest)}
		}
		return &sandbox{id: ct.ID, name: ct.Name, image: imageInfo{ID: l[LabelImageID]}}, nil
	}
	return nil, &guard.IntegrationError{Op: "docker: adopt the container of run " + c.Owner.RunID, CodeMayHaveStarted: true,
		Err: errors.New("no container of this deployment holds it (the daemon restarted, or it was removed)")}
}
