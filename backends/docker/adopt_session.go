package docker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Adopting a session (issue 44): a session's container outlives its worker (its stdin stays
// open, KeepStdin, and the daemon keeps its whole output, KeepLog), so a worker of the same
// deployment started later reads what the supervisor reported since the container started,
// collects the cell the dead worker had sent, and attaches to run the session's further cells.

var _ guard.SessionAdopter = (*Backend)(nil)

// errKeptEnd stops the read of a container's kept output at the pending cell's end.
var errKeptEnd = errors.New("the pending cell's end was read")

// AdoptSession takes over the session container id (or the one whose id begins with id) that a
// worker of this deployment opened for s and lost (guard.SessionAdopter). The container must
// carry this backend's labels and LabelSession, s's settings digest, its uid and nonce labels,
// and be running. A session with egress keeps it: its proxy died with its worker, so the
// pending cell's connections got no answer and its result says its egress report was lost
// (guard.EgressReport.Lost), and each further cell gets a proxy of this backend's, as a
// session's cells always do. Its uid
// is reserved in this backend's pool (refused when this backend holds it already, for another
// sandbox or for this one adopted twice); it takes a sandbox slot when one is free, and runs
// over Config.MaxSandboxes otherwise until Close (the container exists either way: refusing
// would free nothing).
//
// With pending, AdoptSession reads the container's kept output from its first byte (never a
// live stream joined mid-way, where the code's stdout bytes could pass for frames): the
// opening, then one report per cell, each end checked against the session's nonce, which the
// code cannot know, so a log the daemon cut at its bound is refused. It stops at the end of
// pending.Cell, then reads the log once more from its first byte (the follow may have crossed
// a cut) for the cell's result, built as RunCell's, with pending.Limits and the duration the
// supervisor measured; at pending.Deadline (a nil result); or when the container stops (a
// SandboxLost). A nil result leaves the session lost: the cell may still run, or a frame cut
// short may wait in the supervisor's stdin, so the container is killed and the returned
// sandbox refuses every cell with a SandboxLost (Close removes it). Without pending the kept
// output must show the supervisor idle (its last cell ended). The supervisor is idle when this
// worker attaches, so nothing is lost between the read and the attach.
//
// The caller makes sure the first worker is gone (its attachment would share the stdin), and
// adopts before this backend hands out uids, as far as it can: a uid already given to another
// sandbox makes the session lost. Other errors: a guard.IntegrationError when the daemon fails
// or ctx ends (CodeMayHaveStarted set when pending is not nil).
func (b *Backend) AdoptSession(ctx context.Context, id string, s guard.CheckedSession, pending *guard.PendingCell) (guard.Sandbox, *guard.Result, error) {
	start := time.Now()
	if len(s.Egress) > 0 {
		c := s.CellChecked(guard.Cell{Language: s.Languages[0]})
		if _, err := b.proxyConfig(c); err != nil {
			return nil, nil, err // this worker could not give the session's cells a proxy
		}
	}
	sb, err := b.sessionAdoptee(ctx, id, s)
	if err != nil {
		return nil, nil, err
	}
	releaseSlot, free := b.tryTakeSlot()
	if !free {
		releaseSlot = func() {}
		b.log.Warn("adopted session runs over the sandbox limit: every slot is in use", "container", sb.id, "max_sandboxes", b.cfg.MaxSandboxes)
	}
	c := s.CellChecked(guard.Cell{Language: s.Languages[0]})
	c.Digest = s.Digest
	sess := &Session{b: b, sb: sb, s: s, c: c, diag: guard.NewCapBuffer(diagBytes), done: make(chan struct{}), releaseSlot: releaseSlot}
	rep, err := sess.readKept(ctx, pending)
	if err == nil {
		err = sess.attachAdopted(ctx, pending != nil)
	}
	if err != nil {
		sb.release()
		releaseSlot()
		return nil, nil, err
	}
	b.register(sess)
	b.log.Info("session sandbox adopted", "container", sb.id, "workflow_id", s.Owner.WorkflowID, "run_id", s.Owner.RunID, "digest", s.Digest)
	switch {
	case rep != nil:
		res := sess.reported(rep, pending.Limits, start)
		res.Duration = time.Duration(rep.exit.DurationMS) * time.Millisecond
		if len(s.Egress) > 0 {
			res.Egress = &guard.EgressReport{Lost: true}
		}
		return sess, &res, nil
	case pending != nil:
		sess.lose(fmt.Sprintf("the end of %s did not come by its deadline; its outcome is unknown", pending.Cell))
	}
	return sess, nil, nil
}

// sessionAdoptee finds the session container AdoptSession takes among this backend's own and
// reserves its uid.
func (b *Backend) sessionAdoptee(ctx context.Context, id string, s guard.CheckedSession) (*sandbox, error) {
	lost := func(why string) error {
		return &guard.SandboxLost{Msg: fmt.Sprintf("session container %q cannot be adopted: %s", id, why)}
	}
	if id == "" {
		return nil, lost("no container id was given")
	}
	list, err := b.eng.List(ctx, b.ownLabels())
	if err != nil {
		return nil, &guard.IntegrationError{Op: "docker: list sandbox containers to adopt session " + id, Err: err}
	}
	for _, ct := range list {
		l := ct.Labels
		if !strings.HasPrefix(ct.ID, id) || l[LabelSession] == "" {
			continue
		}
		uid, uerr := strconv.Atoi(l[LabelUID])
		switch {
		case l[LabelDigest] != s.Digest:
			return nil, lost(fmt.Sprintf("it was opened with settings digest %s, not %s", l[LabelDigest], s.Digest))
		case l[LabelSessionNonce] == "" || uerr != nil:
			return nil, lost("it carries no nonce or uid label (made by a worker that could not be adopted from)")
		case ct.State != "running":
			return nil, lost("it is not running (" + ct.State + ")")
		}
		release, ok := b.uids.reserve(uid)
		if !ok {
			return nil, lost(fmt.Sprintf("its uid %d is held by another sandbox of this worker (or it was adopted already)", uid))
		}
		return &sandbox{id: ct.ID, name: ct.Name, uid: uid, image: imageInfo{ID: l[LabelImageID]}, release: release,
			session: true, nonce: l[LabelSessionNonce]}, nil
	}
	return nil, lost("no session container of this deployment has that id (it was removed, or is another deployment's)")
}

// readKept reads the container's kept output from its start: up to pending's end (its report),
// or to pending.Deadline (nil), or, without pending, what there is, which must end with the
// opening or a cell's end.
func (s *Session) readKept(ctx context.Context, pending *guard.PendingCell) (*report, error) {
	b, id := s.b, s.sb.id
	lost := func(why string) error { return &guard.SandboxLost{Msg: "session container " + id + ": " + why} }
	w := &sessionLog{limits: s.s.Limits, max: maxResultBytes(s.s.Limits), nonce: s.sb.nonce, egress: len(s.s.Egress) > 0}
	if pending == nil {
		err := b.eng.Logs(ctx, id, w, s.diag)
		switch {
		case w.err != nil:
			return nil, lost("its kept output cannot be read: " + w.err.Error())
		case err != nil:
			return nil, &guard.IntegrationError{Op: "docker: read the kept output of session container " + id, Err: err}
		case !w.opened || w.cur != nil || len(w.buf) > 0:
			return nil, lost("its kept output does not end with the opening or a cell's end (a cell runs that no one collects)")
		}
		return nil, nil
	}
	w.want, w.limits = pending.Cell.Index, pending.Limits
	w.max = max(w.max, maxResultBytes(pending.Limits))
	fctx, cancel := context.WithDeadline(ctx, pending.Deadline)
	defer cancel()
	err := b.eng.FollowLogs(fctx, id, w, s.diag)
	switch {
	case w.got != nil:
		return s.readKeptAgain(ctx, w)
	case w.err != nil:
		return nil, lost("its kept output cannot be read: " + w.err.Error())
	case ctx.Err() != nil:
		return nil, &guard.IntegrationError{Op: "docker: read the kept output of session container " + id, Err: ctx.Err(), CodeMayHaveStarted: true}
	case fctx.Err() != nil:
		return nil, nil // pending.Deadline passed
	case err != nil:
		return nil, &guard.IntegrationError{Op: "docker: read the kept output of session container " + id, Err: err, CodeMayHaveStarted: true}
	}
	return nil, lost(fmt.Sprintf("it stopped before the end of %s (container stderr: %q)", pending.Cell, clip(s.diag.Bytes())))
}

// readKeptAgain reads the kept output once more from its first byte, now that the pending
// cell ended and the supervisor writes nothing until the next cell, and returns the pending
// cell's report from that read. The follow that found the end may have crossed a cut the daemon
// made at the log's bound (it then goes on in the new file, mid-stream); this read cannot: a cut
// log does not begin with the opening's nonce.
func (s *Session) readKeptAgain(ctx context.Context, first *sessionLog) (*report, error) {
	w := &sessionLog{limits: first.limits, max: first.max, nonce: first.nonce, want: first.want, egress: first.egress}
	err := s.b.eng.Logs(ctx, s.sb.id, w, io.Discard)
	switch {
	case w.got != nil:
		return w.got, nil
	case w.err != nil:
		return nil, &guard.SandboxLost{Msg: "session container " + s.sb.id + ": its kept output cannot be read: " + w.err.Error()}
	}
	if err == nil {
		err = errors.New("the pending cell's end is gone from it")
	}
	return nil, &guard.IntegrationError{Op: "docker: read the kept output of session container " + s.sb.id + " again", Err: err, CodeMayHaveStarted: true}
}

// attachAdopted attaches to the adopted container and starts copying its output into the
// current cell's report, as open does.
func (s *Session) attachAdopted(ctx context.Context, mayHaveRun bool) error {
	att, err := s.b.eng.Attach(ctx, s.sb.id)
	if err != nil {
		return &guard.IntegrationError{Op: "docker: attach adopted session container " + s.sb.id, Err: err, CodeMayHaveStarted: mayHaveRun}
	}
	s.att = att
	go func() {
		s.demuxErr = att.Demux(sessionStream{s}, s.diag)
		close(s.done)
	}()
	return nil
}

// sessionLog parses a session container's kept stdout from its first byte: the opening's
// report (ended by frameReady), then one report per cell (each ended by frameCellEnd), every
// end carrying the session's nonce. It is an io.Writer; an error stops the copy.
type sessionLog struct {
	// limits and max bound each cell's report: the pending cell's limits, and the larger
	// result bound of the session's and the pending cell's.
	limits guard.Limits
	max    int64
	nonce  string
	// egress drops the tunnel frames of a session with egress: the worker that carried its
	// connections is gone.
	egress bool
	// want is the pending cell's index (0: none).
	want   int
	buf    []byte
	cur    *report
	opened bool
	// got is the pending cell's report, once it ended.
	got *report
	err error
}

func (w *sessionLog) Write(p []byte) (int, error) {
	if w.err != nil || w.got != nil {
		return 0, errors.Join(w.err, errKeptEnd)
	}
	w.buf = append(w.buf, p...)
	for len(w.buf) >= frameHeaderBytes {
		n := binary.BigEndian.Uint32(w.buf[0:4])
		if n > maxFramePayload {
			w.err = fmt.Errorf("sandbox frame of %d bytes is over %d", n, maxFramePayload)
			return 0, w.err
		}
		size := frameHeaderBytes + int(n)
		if len(w.buf) < size {
			break
		}
		err := w.frame(w.buf[:size])
		w.buf = w.buf[size:]
		if errors.Is(err, errKeptEnd) {
			return 0, err
		}
		if err != nil {
			w.err = err
			return 0, err
		}
	}
	return len(p), nil
}

// frame takes one whole frame into the current report, and checks the report it ends.
func (w *sessionLog) frame(f []byte) error {
	if w.cur == nil {
		w.cur = newReport(w.limits, nil)
		w.cur.max, w.cur.session, w.cur.opening, w.cur.tunnelLost = w.max, true, !w.opened, w.egress
	}
	r := w.cur
	if _, err := r.Write(f); err != nil {
		return err
	}
	if r.supErr != "" {
		return fmt.Errorf("its supervisor failed: %s", r.supErr)
	}
	if r.end == nil {
		return nil
	}
	w.cur = nil
	switch {
	case r.end.Nonce != w.nonce:
		return errors.New("an end frame does not carry the session's nonce: the kept output does not start at the container's first byte")
	case !w.opened:
		w.opened = true // report accepts only frameReady to end the opening
	case r.endKind != frameCellEnd || r.exit == nil:
		return errors.New("the supervisor ended the session, or a cell ended without an exit report")
	case w.want != 0 && r.end.Cell == w.want:
		w.got = r
		return errKeptEnd
	case w.want != 0 && r.end.Cell > w.want:
		return fmt.Errorf("cell %d ended after the pending cell %d", r.end.Cell, w.want)
	}
	return nil
}
