// Package model holds approval.pml, a Promela model of the approval protocol of a RunCode run as
// the code implements it, and the test that checks it with spin (make test; model_test.go,
// integration-tagged): spin -a, cc -DSAFETY, then an exhaustive search by pan in each of four
// budgets, failing on any counterexample and printing its trail. It takes about a minute here
// (2 cores, shared; the largest budget is 7.5 million states), and the variants below half a
// minute more.
//
// # What it proves
//
// In every execution within the budgets, with two sandbox hosts, a namespace writer, a network
// that loses, delays (reorders) and duplicates signals and their answers, and host crashes at any
// step:
//
//   - P1: code starts at most once per approval (an approval is signed for one run id, so per run);
//   - P2: code never starts without a decision that verifies for its run and digest;
//   - P3: the workflow accepts only a decision that verifies: the first valid one wins, one with a
//     wrong digest is rejected;
//   - P4: an approved run with a live host ends (every run of the model ends when nothing can
//     move any more, and every loop of the model spends a bounded budget or activity, so every
//     execution gets there);
//   - P5: when the writer neither scheduled an activity nor ended one by id, a run that ends with
//     a result ran its code exactly once, and one that ends "approval unused" never started it.
//
// The budgets (FAULTS, WACTS, RESETS) are: two faults; one fault and one writer action, a reset
// among them; two writer actions, with or without a reset. A writer action is one of: schedule
// SandboxRun with the run's genuine input or a forged one (answering a workflow task), complete
// or fail an activity by id (also typed as a failure from before the start), send a claim
// signal, replay a release it saw, send a decision with a wrong digest, reset the run.
//
// TestModelFindsRemovedChecks builds the model with one check of the code removed at a time
// (-DNO_HISTORY_READ, -DNO_SECRET, -DNO_STARTED_RULE, -DNO_CLAIM_WAIT, -DNO_VERIFY,
// -DNO_DIGEST_CHECK, and for P4 -DNO_HEARTBEAT_TIMEOUT, the timeout (*runCode).run sets) and
// requires spin to find the counterexample each allows; -DSHOW_RAN and
// -DSHOW_UNUSED show that runs do end with a result and with the approval unused.
//
// # Model steps and the code that implements them
//
//	model (approval.pml)                        code
//	Workflow: dec[r]?v, accept if v             workflows: (*runCode).onSignal, validateDecide, decide → refusal (decision.go: the first accepted decision wins; Decision.Problem, approval.Verify bind digest, run id, task queue)
//	Workflow: schedule(r, a, v)                 workflows: (*runCode).run: workflow.ExecuteActivity(acts.SandboxRun) with MaximumAttempts 1
//	Workflow: K_NOTSTARTED → schedule again     workflows: (*runCode).run: guard.Retryable, attempt < StartAttempts
//	Workflow: K_S2S → W_UNUSED                  workflows: (*runCode).notPickedUp
//	Workflow: other ends → W_RAN / W_FAILED     workflows: (*runCode).run's switch (outcome unknown, the approval was used)
//	Host: poll (A_QUEUED → A_STARTED)           the Temporal worker; activities: (*Activities).SandboxRun
//	Host: !act_valid → K_FAILED                 activities: (*Activities).verify (verify.go), before any claim
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
//     are left out; so are the events of the workflow that no host reads.
//   - Activity ids are the model's slot numbers; a commitment is a fresh number, and its secret
//     is known to the host that made it and to whoever reads a release of it.
package model
