// Package promela holds approval.pml, a Promela model of the approval protocol of a RunCode run as
// the code implements it, session.pml, one of a session's cells (below, "Sessions"), and the tests
// that check them with spin (make test; model_test.go,
// integration-tagged): spin -a, cc -DSAFETY, then an exhaustive search by pan in each of five
// budgets, failing on any counterexample and printing its trail. It takes about 1-1.5 minutes
// here (2 cores, shared; the largest budget is 8.7 million states, the one-fault-one-writer
// budget with an edit 5.1 million), and the variants below a minute more.
//
// # What it proves
//
// In every execution within the budgets, with two sandbox hosts, a namespace writer, a network
// that loses, delays (reorders) and duplicates signals and their answers, and host crashes at any
// step:
//
//   - P1: code starts at most once per approval (an approval is signed for one run id, so per run);
//   - P2: code never starts without decisions that verify for its run and digest from as many
//     distinct reviewers as its quorum asks (QUORUM: 2, and 1 in one budget), counted again by
//     the host;
//   - P3: the workflow accepts only decisions that verify, from distinct reviewers: one with a
//     wrong digest, or a second from a reviewer already counted, is rejected;
//   - P4: an approved run with a live host ends (every run of the model ends when nothing can
//     move any more, and every loop of the model spends a bounded budget or activity, so every
//     execution gets there);
//   - P5: when the writer neither scheduled an activity nor ended one by id, a run that ends with
//     a result ran its code exactly once, and one that ends "approval unused" never started it;
//   - P6: approve with edits (EDITS): a reviewer's edit replaces the run's code and the approvals
//     of the code before it stop counting; no code runs that fewer than QUORUM reviewers approved
//     as edited (and P2 holds of the code as started).
//
// The budgets (FAULTS, WACTS, RESETS, EDITS) are: two faults; one fault and one writer action, a
// reset among them; two writer actions without a reset; two writer actions with a reset, without
// edits; and one fault and one writer action under a quorum of 1, without edits. With edits, the
// reviewers either approve the code as started, or reviewer 1 approves it, reviewer 2 approves
// an edit of it and reviewer 1 the edited code. A writer action is one of: schedule SandboxRun
// with the run's genuine input, a forged one, one carrying a single genuine approval (what a
// workflow worker whose quorum is 1 sends; answering a workflow task), or edited code with the
// approvals of the code before the edit; complete or fail an activity by id (also typed as a
// failure from before the start), send a claim signal, replay a release it saw, send a decision
// with a wrong digest or a reviewer's decision again, reset the run.
//
// TestModelFindsRemovedChecks builds the model with one check of the code removed at a time
// (-DNO_HISTORY_READ, -DNO_SECRET, -DNO_STARTED_RULE, -DNO_CLAIM_WAIT, -DNO_VERIFY,
// -DNO_DIGEST_CHECK, -DNO_HOST_QUORUM (the host verifies the approvals but does not count them
// against its own quorum), -DNO_CODE_DIGEST (the host verifies each approval over the digest it
// names, not over the request it received: P6 breaks), and for P4 -DNO_HEARTBEAT_TIMEOUT, the timeout (*runCode).run sets) and
// requires spin to find the counterexample each allows; -DSHOW_RAN and
// -DSHOW_UNUSED show that runs do end with a result and with the approval unused.
//
// # Model steps and the code that implements them
//
//	model (approval.pml)                        code
//	Workflow: dec[r]?v, accept if v             workflows: (*runCode).onSignal, validateDecide, decide → refusal (decision.go: the first accepted decision wins; Decision.Problem, approval.Verify bind digest, run id, task queue)
//	Workflow: got |= v until got == FULL        workflows: quorum.go (a reviewer, key or approval id already counted is refused: duplicate_approver), CheckResult.Quorum
//	Workflow: v == 3 → ver = 1, got = {editor}  workflows: quorum.go (*runCode).decideEdit (the check local activity takes the edited request; r.approvals reset; the editor's approval the first), editRefusal (one edit per run)
//	Workflow: schedule_v(r, a, 1, 0, got)       workflows: quorum.go (*runCode).withApprovals (Decisions and Edit in the input)
//	Workflow: schedule(r, a, v)                 workflows: (*runCode).run: workflow.ExecuteActivity(acts.SandboxRun) with MaximumAttempts 1
//	Workflow: K_NOTSTARTED → schedule again     workflows: (*runCode).run: guard.Retryable, attempt < StartAttempts
//	Workflow: K_S2S → W_UNUSED                  workflows: (*runCode).notPickedUp
//	Workflow: other ends → W_RAN / W_FAILED     workflows: (*runCode).run's switch (outcome unknown, the approval was used)
//	Host: poll (A_QUEUED → A_STARTED)           the Temporal worker; activities: (*Activities).SandboxRun
//	Host: HOST_VALID != FULL → K_FAILED         activities: (*Activities).verifyQuorum → verifyApprovals (quorum.go: each signature over guard.Digest of the request received, edited or not; distinct principals and keys; the host's own Policy.QuorumFor), before any claim; checkEdit (the edit's original digest is the started request's)
//	Host: ncommit++; send(c, r, 0, ok)          activities: claimApproval → newClaim, commitment, (*claim).send (once.go)
//	Host: !ok → release, K_NOTSTARTED           activities: claimApproval: guard.Retryable → (*claim).release
//	Host: read (one atomic step)                activities: firstUse → readRun, (*runRecord).add (a claim's run id, a release's secret), activityEnd
//	Host: firstActivity                         activities: (*runRecord).firstActivity
//	Host: holds; wait while pending(c)          activities: (*runRecord).holds, firstUse's wait up to claimVisibleWait
//	Host: firstClaim → FC_OK/REFUSE/NOTFOUND    activities: (*runRecord).firstClaim
//	Host: refuse → send(c, r, 1), K_FAILED      activities: claimApproval: `_ = c.send(..., true)`, a ConfigError
//	Host: backend fails before the start        activities: SandboxRun: guard.Retryable(err) → (*claim).release, then K_NOTSTARTED
//	Host: starts[r]++                           guard: (*Guarded).Run → the backend starts the code
//	Host: finish(a, K_DONE / K_FAILED)          activities: SandboxRun's return, contract.ToFailure (retryable only before the start)
//	Host: crash, lost answer (act_orphan)       a host process killed or cut off
//	Network: deliver / lose a late signal       the frontend; a signal sent during a workflow task is held until it completes
//	Timers: K_S2S, K_TIMEOUT                    the Temporal server: ScheduleToStartTimeout, HeartbeatTimeout, StartToCloseTimeout (set in (*runCode).run)
//	Writer                                      any client with write access to the namespace
//	Writer: reset                               the Temporal server's reset; claims keep their run id ((*runRecord).add drops them), a decision re-verifies against the new run id (refusal, verify)
//
// # What it found
//
// No counterexample in the code as it is. Two observations:
//
//   - firstActivity is a second line of defence: with it removed (its refusal never taken), P1
//     to P5 still hold in every budget. The claims alone keep an approval single-use, because
//     only the host that claimed can release, and does only when its code did not start.
//   - P5 needs "the writer scheduled nothing": a writer that schedules SandboxRun with the
//     genuine input after the workflow's last attempt can have its activity run the code (it is
//     then the first use), while the workflow's own attempts failed before the start and the
//     run ends "failed before the code could start" without the result. The code ran once, with
//     the approval; a writer who answers workflow tasks can end the run as it likes anyway (and
//     the genuine workers then fail its workflow tasks on replay).
//
// # What it leaves out
//
//   - The server never retries SandboxRun (MaximumAttempts 1), so SandboxRun's refusal of an
//     attempt after the first is not modelled; nor are heartbeats, other than as the cause of a
//     timeout (an orphaned activity times out; one still running may, once, as a fault: a
//     partition).
//   - A history read is one step: the history only grows, so reading its pages reads a prefix
//     of it at one moment.
//   - A reset copies the old run's signals into the new run; the activities of the old run's
//     prefix stay the old run's (a host of the new run refuses them anyway: they are not its run).
//   - The approval timeout, denials and cancellation end a run without running anything and
//     are left out; so are the events of the workflow that no host reads. An edit the policy
//     refuses leaves the run waiting for the code as it was, and is left out; so is the truth of
//     the result's edit record (its editor an approver, its original digest the start's:
//     verifyQuorum and checkEdit, tested in activities/).
//   - Activity ids are the model's slot numbers; a commitment is a fresh number, and its secret
//     is known to the host that made it and to whoever reads a release of it.
//
// # Sessions (session.pml)
//
// session.pml models a session's cells as the code runs them: the Session workflow submits cells
// one after the other, a reviewer signs each over what the status shows (the run, the index, the
// chain over the results recorded before it), the cell activity goes to the one host that keeps
// the run's sandbox, and the host admits it or refuses it. With a namespace writer (a copy of a
// genuine cell activity, a forged decision, a genuine decision for another index, a completion or
// failure by id with any result, a reset) and faults (a lost answer, a host crash before, during
// or between cells), within the budgets of TestSessionModelHolds, in every execution:
//
//   - S1: a cell runs at most once (per run and index);
//   - S2: a cell runs only under a decision its reviewer signed for that run, that index and the
//     chain over the results of the cells that really ran before it in that sandbox, and under
//     a quorum (QUORUM, 2) only with approvals so signed by as many distinct reviewers;
//   - S3: a session with a live host ends;
//   - S4: a cell starts only after its host's claim is in the history (signalled, not read back).
//
// The writer may also lower the quorum (LOWER; in the one-action budget, left out of the
// two-action one to keep it at 3.5 million states): its own workflow worker, whose quorum is 1,
// schedules a cell with one reviewer's genuine approval, alone or given twice.
//
// TestSessionModelFindsRemovedChecks removes the host's checks (NO_VERIFY; NO_HOST_CHAIN, where
// the host takes the chain the input carries; with NO_INDEX and NO_USED as well; NO_HOST_QUORUM,
// where the host verifies the approvals but does not count them against its own quorum; for S3
// NO_HEARTBEAT_TIMEOUT; for S4 NO_CLAIM, a host that starts without its claim) and requires the
// counterexample each allows.
//
//	model (session.pml)                          code
//	Workflow: sign over wf_chain, schedule       workflows: the Session's cell loop (submit-cell, decide-cell) and (*session).runCell with MaximumAttempts 1; client: CellStatementFor, VerifyCells
//	Workflow: QUORUM reviewers sign, then schedule  workflows: session_quorum.go: (*session).duplicateCell (a reviewer, key or approval id already counted is refused), countCell, cellRunInput (every approval in Decisions); SessionCheckResult.Quorum
//	Workflow: K_DONE → wf_chain*2+res            workflows: runCell: guard.ChainNext over the recorded result's ResultDigest
//	Workflow: K_REFUSED → next cell              workflows: runCell: a refusal or a failure before the start ends the cell, the session goes on
//	Workflow: K_LOST / K_TIMEOUT → W_LOST        workflows: runCell → cellFailure (SandboxLost), or CodeMayHaveStarted
//	Host: no sandbox for the run → K_LOST        activities: (*Activities).lookup (keyed by workflow id and run id), hostSandbox.unknown
//	Host: idx <= sb_last → K_REFUSED             activities: admitCell: cell.Index <= hs.last
//	Host: sb_used → K_REFUSED                    activities: admitCell: usedIn(hs.used, every approval id)
//	Host: act_n < QUORUM → K_REFUSED             activities: verifyCellApprovals → verifyApprovals: the host's own Policy.QuorumFor
//	Host: act_chain != sb_chain → K_REFUSED      activities: admitCell: in.Chain != hs.chain
//	Host: verify over sb_chain                   activities: admitCell: guard.CellDigest over hs.chain, verifyCellApprovals (each approval, distinct principals and keys)
//	Host: sb_last, sb_used set; claimed[a] = 1   activities: admitCell sets hs.last, hs.used, then claimCell: (*claim).send (once.go), no history read
//	Host: claim fails → K_REFUSED                activities: claimCell: a send error → (*claim).release, a retryable IntegrationError (nothing started)
//	Host: run; sb_chain*2+res                    activities: SessionCell: RunCell, then hs.chain = guard.ChainNext
//	Host: crash                                  a host process killed: every sandbox it keeps is gone (SandboxLost)
//	Server: orphan → K_TIMEOUT                   the Temporal server's heartbeat timeout (runCell's HeartbeatTimeout)
//
// What it found: no counterexample in the code as it is; the index and used-approval checks are a
// second line (with both removed, the host's own chain still refuses every copy, since a copy's
// decision binds the chain before its cell ran). It also shows what the chain is for: a writer
// who copies cell 1's activity gets the copy run and the workflow's own refused, so the status
// shows cell 1 as not run; cell 2's reviewer then signs a chain without cell 1's result, and only
// the host's own chain (which has it) refuses cell 2. The host does not read the history
// for a cell (a run's host does: approval.pml's read): S1-S3 hold from the host's own record of
// the sandbox, which only that host keeps and which is lost with it (a restarted host has no
// sandbox: K_LOST), and a claim signal the server acknowledged is durable (in the history at the
// latest when the workflow task in flight, if any, completes), which is S4's step. A writer's
// claim signals are not modelled: no host reads them. Left out: the contents of code and results
// (a result is one bit, the chain a number that grows with each).
package promela
