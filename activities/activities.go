package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/pysource"
	"github.com/sandboxflow/sandboxflow/rules"
)

// Defaults of Config.
const (
	DefaultHeartbeatTimeout = 15 * time.Second
	DefaultReportMargin     = 10 * time.Second
	DefaultStartAttempts    = 5
	DefaultStartBackoff     = 2 * time.Second
	DefaultMaxStartBackoff  = time.Minute
	// DefaultScheduleToStartTimeout bounds how long an approved run waits for a sandbox worker.
	DefaultScheduleToStartTimeout = 10 * time.Minute
)

// Config configures the activities of one worker.
type Config struct {
	// Policy is the operator's policy: Check applies it before the approval, and Run re-applies it
	// before anything runs. Optional: each zero field takes guard's default. It is validated by New.
	Policy guard.Policy
	// Backend runs approved code. Required on a worker that runs sandboxes (polls the sandbox
	// task queue); a worker that only runs workflows may leave it nil and set BackendName.
	Backend guard.Backend
	// BackendName names the backend that the sandbox workers run; Check puts it in the digest.
	// Optional: defaults to Backend.Name(); required when Backend is nil. When both are set they
	// must agree.
	BackendName string
	// Rules are the operators' policy rules (worker --policy): the checks apply them, recording
	// the policy's hash, and the sandbox host applies them again to what it received. Optional:
	// nil means none.
	Rules *rules.Set
	// Sink receives the sandbox.started, sandbox.finished, sandbox.refused and sandbox.late_result
	// events (and a session's). Optional: defaults to SlogSink{} (slog.Default()).
	Sink Sink
	// ReviewersFile is the reviewers' keys, an OpenSSH allowed_signers file. Required. Check
	// records its keys in the run's history (the workflow verifies decisions against that
	// record); Run reads it again before every run and verifies the decision itself, so a key
	// removed from the file stops every run that has not started.
	ReviewersFile string
	// PasskeyOrigin is the reviewers' inbox origin (scheme://host[:port]), the one page passkey
	// decisions may be made on: Check records it with the reviewer keys, so the workflow accepts
	// passkey assertions from it only, and Run checks them against it again. Optional: empty
	// refuses every passkey decision (SSH signatures are unaffected).
	PasskeyOrigin string
	// PasskeyCountersFile is where this sandbox host keeps the last signature counter it
	// accepted from each passkey (approval.Counters): an assertion whose counter did not grow is
	// refused. Required with PasskeyOrigin on a worker that runs sandboxes.
	PasskeyCountersFile string
	// ScheduleToStartTimeout bounds how long the approved sandbox activity may wait in its task
	// queue; past it the run ends with the approval unused. Optional: defaults to 10 min.
	ScheduleToStartTimeout time.Duration
	// SandboxTaskQueue is the task queue the workflow schedules the sandbox activity on, so that
	// sandbox hosts can scale apart from workflow workers. Optional: empty means the workflow's
	// own task queue. A workflow's contract.Input.SandboxTaskQueue, when set, wins over it.
	SandboxTaskQueue string
	// HeartbeatTimeout is the sandbox activity's heartbeat timeout: a worker lost while the code
	// runs is noticed after it. The activity heartbeats every third of it. Optional: defaults to
	// 15 s.
	HeartbeatTimeout time.Duration
	// ReportMargin is added to timeout + grace for the sandbox activity's StartToCloseTimeout, so
	// that the guard's backstop (timeout + grace) always reports a timed-out run before Temporal
	// times the activity out. Optional: defaults to 10 s.
	ReportMargin time.Duration
	// StartAttempts bounds how many times the workflow schedules the sandbox activity when the
	// backend failed before the code could start (guard.Retryable). Optional: defaults to 5.
	StartAttempts int
	// StartBackoff is the workflow's wait before the second attempt; it doubles for each further
	// attempt up to MaxStartBackoff. Optional: default to 2 s and 1 min.
	StartBackoff    time.Duration
	MaxStartBackoff time.Duration
	// History is where the sandbox activity claims the run's approval and checks that nothing
	// earlier in the run may have used it (once.go). Optional: defaults to the worker's own
	// Temporal client (activity.GetClient).
	History RunLog
	// HostTaskQueue is the task queue only this sandbox host polls (RegisterHost's worker), for
	// the holds and cells of the sessions whose sandboxes it keeps; every cell's statement binds
	// it. Optional: empty means this worker opens no session sandboxes.
	HostTaskQueue string
	// NoSessions says the backend BackendName names keeps no sandbox between runs, so
	// SessionCheck refuses sessions with a ConfigError. Optional: when Backend is set, it is
	// derived from it (a guard.SessionBackend offers sessions).
	NoSessions bool
	// MaxSessions caps how many session sandboxes this host keeps at once; SessionOpen past it
	// fails before anything started (the workflow tries again with backoff). Optional: zero
	// means no cap.
	MaxSessions int
	// HostKeyFile is this sandbox host's own signing key (an OpenSSH ed25519 private key): it
	// signs a receipt (package receipt) for every run and cell. Optional: without it results
	// carry no receipt, and a workflow whose check recorded hosts refuses them.
	HostKeyFile string
	// HostName is the host's name in its receipts, a principal of its line in the hosts file.
	// Optional: defaults to os.Hostname().
	HostName string
	// HostsFile lists the sandbox hosts' public keys (allowed_signers format, host names as
	// principals): Check records them, and the workflow refuses a result whose receipt does not
	// verify against them. Optional: without it the check records none and results are accepted
	// without receipts, as before receipts existed.
	HostsFile string
	// Notify, when set, has Check record it, so that the workflow schedules the notify activity
	// (contract.NotifyActivityName, registered by notify.Activities) when the run or a cell
	// starts waiting. Optional: nil notifies nobody.
	Notify *contract.NotifyOptions
	// DataConverter decodes the run's start input, which a sandbox host reads to check an edit
	// of its code (the edit changes only the code, and its original digest is the started
	// request's). Optional: Temporal's default; give the worker's own (with its payload codec)
	// when payloads are encrypted.
	DataConverter converter.DataConverter
	// LateResultWait is how long a run waits for a late result (contract.LateResult) after its
	// sandbox activity timed out while the code may have run on: Check records it in
	// contract.RunOptions.LateResultWait, as zero when the worker has no HostsFile (without
	// receipts no late result can be verified). Optional: defaults to 2 min.
	LateResultWait time.Duration
	// LateResultDelivery bounds how long a sandbox host tries to deliver a late result while the
	// server cannot be reached. Optional: defaults to LateResultWait.
	LateResultDelivery time.Duration
	// SpoolDir is where this sandbox host spools each run it sends (spool.go), so that a worker
	// started on the same host after this one died delivers the result of code that outlived it
	// (Adopt). Workers of one host share it. Optional: empty spools nothing; it is used only with
	// a HostKeyFile and a backend that is a guard.Adopter.
	SpoolDir string
}

// Activities are the two activities of the RunCode workflow: Check (a local activity on the
// workflow worker) and Run (the sandbox activity). Create them with New and register them with
// Register.
type Activities struct {
	policy      guard.Policy
	rules       *rules.Set
	reviewers   string
	origin      string
	counters    *approval.Counters
	backendName string
	guarded     *guard.Guarded
	// images names the image the backend runs code in, when it is a guard.ImageNamer: the
	// check records it (Checked.Image).
	images      guard.ImageNamer
	sink        Sink
	run         contract.RunOptions
	history     RunLog
	hostQueue   string
	noSessions  bool
	maxSessions int
	notify      *contract.NotifyOptions
	sessions    *sessions
	dc          converter.DataConverter
	// holdStart and lifetimeExtra are holdStartTimeout and the margin past a session's lifetime
	// after which this host removes a sandbox by itself (tests shorten them).
	holdStart     time.Duration
	lifetimeExtra time.Duration
	// hostKey signs receipts (nil: none); hostsFile is recorded by the checks (receipt.go).
	hostKey   *hostKey
	hostsFile string
	// lateDelivery is Config.LateResultDelivery.
	lateDelivery time.Duration
	// spool is this worker's part of Config.SpoolDir (nil: none).
	spool *spool
}

// New validates cfg and returns the activities, or a guard.ConfigError.
func New(cfg Config) (*Activities, error) {
	if err := cfg.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("activities: %w", err)
	}
	a := &Activities{
		policy:      cfg.Policy.WithDefaults(),
		rules:       cfg.Rules,
		reviewers:   cfg.ReviewersFile,
		backendName: cfg.BackendName,
		sink:        cfg.Sink,
		history:     cfg.History,
		hostQueue:   cfg.HostTaskQueue,
		noSessions:  cfg.NoSessions,
		maxSessions: cfg.MaxSessions,
		notify:      notifyOptions(cfg.Notify),
		sessions:    &sessions{},
		dc:          cfg.DataConverter,
		holdStart:   holdStartTimeout,
		run: contract.RunOptions{
			TaskQueue:              cfg.SandboxTaskQueue,
			ScheduleToStartTimeout: cfg.ScheduleToStartTimeout,
			HeartbeatTimeout:       cfg.HeartbeatTimeout,
			ReportMargin:           cfg.ReportMargin,
			StartAttempts:          cfg.StartAttempts,
			StartBackoff:           cfg.StartBackoff,
			MaxStartBackoff:        cfg.MaxStartBackoff,
			LateResultWait:         cfg.LateResultWait,
		},
		lateDelivery: cfg.LateResultDelivery,
	}
	if a.reviewers == "" {
		return nil, &guard.ConfigError{Msg: "activities: no reviewers file: every decision must be signed by a key listed in one (OpenSSH allowed_signers format)"}
	}
	if err := a.setUpPasskeys(cfg); err != nil {
		return nil, err
	}
	if err := a.setUpReceipts(cfg); err != nil {
		return nil, err
	}
	a.run.Grace = a.policy.Grace
	a.lifetimeExtra = a.policy.MaxTimeout + a.policy.Grace + lifetimeMargin
	if err := a.setUpBackend(cfg); err != nil {
		return nil, err
	}
	if a.sink == nil {
		a.sink = SlogSink{}
	}
	if a.dc == nil {
		a.dc = converter.GetDefaultDataConverter()
	}
	if err := a.setUpRunOptions(cfg); err != nil {
		return nil, err
	}
	if cfg.SpoolDir != "" && a.hostKey != nil && a.guarded != nil && a.guarded.Adopter() != nil {
		spool, err := openSpool(cfg.SpoolDir)
		if err != nil {
			return nil, err
		}
		a.spool = spool
	}
	return a, nil
}

// setUpPasskeys takes the passkey origin, which a worker that runs sandboxes may only have with a
// counters file, and the counters file.
func (a *Activities) setUpPasskeys(cfg Config) error {
	if cfg.PasskeyOrigin != "" {
		origin, err := approval.CanonicalOrigin(cfg.PasskeyOrigin)
		if err != nil {
			return &guard.ConfigError{Msg: fmt.Sprintf("activities: %v", err)}
		}
		a.origin = origin
		if cfg.Backend != nil && cfg.PasskeyCountersFile == "" {
			return &guard.ConfigError{Msg: "activities: a passkey origin needs a passkey counters file on a worker that runs sandboxes"}
		}
	}
	if cfg.PasskeyCountersFile != "" {
		a.counters = approval.NewCounters(cfg.PasskeyCountersFile)
	}
	return nil
}

// setUpBackend guards the backend, whose name must be the configured one, or takes the backend's
// name alone on a worker that runs no sandboxes.
func (a *Activities) setUpBackend(cfg Config) error {
	if cfg.Backend != nil {
		if a.backendName == "" {
			a.backendName = cfg.Backend.Name()
		}
		if a.backendName != cfg.Backend.Name() {
			return &guard.ConfigError{Msg: fmt.Sprintf("activities: backend name %q does not match the backend %q", a.backendName, cfg.Backend.Name())}
		}
		a.guarded = guard.New(cfg.Backend, cfg.Policy)
		a.noSessions = !guard.SessionsOffered(cfg.Backend)
		a.images, _ = cfg.Backend.(guard.ImageNamer)
	}
	if a.backendName == "" {
		return &guard.ConfigError{Msg: "activities: no backend: set Backend, or BackendName on a worker that runs no sandboxes"}
	}
	return nil
}

// setUpRunOptions gives the sandbox activity's timeouts, backoffs and start attempts their
// defaults, and refuses negative or inconsistent ones.
func (a *Activities) setUpRunOptions(cfg Config) error {
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"heartbeat timeout", &a.run.HeartbeatTimeout, DefaultHeartbeatTimeout},
		{"report margin", &a.run.ReportMargin, DefaultReportMargin},
		{"start backoff", &a.run.StartBackoff, DefaultStartBackoff},
		{"max start backoff", &a.run.MaxStartBackoff, DefaultMaxStartBackoff},
		{"schedule-to-start timeout", &a.run.ScheduleToStartTimeout, DefaultScheduleToStartTimeout},
		{"late result wait", &a.run.LateResultWait, DefaultLateResultWait},
		{"late result delivery", &a.lateDelivery, 0}, // zero: the late result wait, below
	} {
		if *d.v < 0 {
			return &guard.ConfigError{Msg: fmt.Sprintf("activities: %s must not be negative, got %s", d.name, *d.v)}
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if a.lateDelivery == 0 {
		a.lateDelivery = a.run.LateResultWait
	}
	if a.hostsFile == "" {
		a.run.LateResultWait = 0 // no receipts: no late result can be verified
	}
	if a.run.HeartbeatTimeout < time.Second {
		return &guard.ConfigError{Msg: fmt.Sprintf("activities: heartbeat timeout %s is under 1 s", a.run.HeartbeatTimeout)}
	}
	if a.run.MaxStartBackoff < a.run.StartBackoff {
		return &guard.ConfigError{Msg: fmt.Sprintf("activities: max start backoff %s is under the start backoff %s", a.run.MaxStartBackoff, a.run.StartBackoff)}
	}
	switch {
	case cfg.StartAttempts < 0:
		return &guard.ConfigError{Msg: fmt.Sprintf("activities: start attempts must not be negative, got %d", cfg.StartAttempts)}
	case cfg.StartAttempts == 0:
		a.run.StartAttempts = DefaultStartAttempts
	}
	return nil
}

// Register registers Check as contract.CheckActivityName and, when the worker has a backend, Run as
// contract.RunActivityName. Register them on every worker that runs RunCode workflows (Check is a local
// activity: it runs where the workflow runs) and on every worker that polls the sandbox task
// queue.
func (a *Activities) Register(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(a.SandboxCheck, activity.RegisterOptions{Name: contract.CheckActivityName})
	r.RegisterActivityWithOptions(a.SessionCheck, activity.RegisterOptions{Name: contract.SessionCheckActivityName})
	r.RegisterActivityWithOptions(a.SessionCellCheck, activity.RegisterOptions{Name: contract.SessionCellCheckActivityName})
	if a.guarded != nil {
		r.RegisterActivityWithOptions(a.SandboxRun, activity.RegisterOptions{Name: contract.RunActivityName})
		r.RegisterActivityWithOptions(a.SessionOpen, activity.RegisterOptions{Name: contract.SessionOpenActivityName})
	}
}

// RegisterHost registers SessionHold and SessionCell, on the worker that polls HostTaskQueue
// only: a session's hold and cells must reach the host that keeps its sandbox.
func (a *Activities) RegisterHost(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(a.SessionHold, activity.RegisterOptions{Name: contract.SessionHoldActivityName})
	r.RegisterActivityWithOptions(a.SessionCell, activity.RegisterOptions{Name: contract.SessionCellActivityName})
}

// SandboxCheck applies the worker's policy to the request: it returns the normalized request with its
// effective limits and digest, or a ToolUsageError or ConfigError as a non-retryable application
// error. It is meant to run as a local activity, so that its result is recorded in history.
func (a *Activities) SandboxCheck(ctx context.Context, in contract.CheckInput) (contract.CheckResult, error) {
	if err := checkWorkflowID(ctx); err != nil {
		return contract.CheckResult{}, err
	}
	span := checkSpan(ctx, in.Request)
	c, err := a.policy.Check(in.Request, a.backendName)
	if err == nil {
		err = a.recordImage(ctx, &c)
	}
	endSpan(span, err)
	if err != nil {
		return contract.CheckResult{}, contract.ToFailure(err)
	}
	dec, err := a.rules.Decide(rules.ForRun(&c))
	if err == nil {
		err = a.underCaps(ctx, c.Metadata.Agent, false)
	}
	if err != nil {
		a.policyRefused(ctx, contract.CheckActivityName, c.Metadata.Agent, err)
		return contract.CheckResult{}, contract.ToFailure(err)
	}
	res, err := a.checkRecord(c.Summary().Warnings, max(a.policy.QuorumFor(&c), dec.Quorum))
	if err != nil {
		return contract.CheckResult{}, err
	}
	res.Checked = c
	res.Rules = ruleRecord(dec)
	return res, nil
}

// recordImage records in c the ID of the image this worker's backend would run it in now, when
// the backend names one (guard.ImageNamer), and c's digest with it: reviewers are shown the image
// and approve it, and a sandbox host whose backend would run another refuses the run. A worker
// that runs no sandboxes, or a backend that runs no image, records none. An image that cannot
// be resolved (missing, unfit) fails the check with the backend's typed error.
func (a *Activities) recordImage(ctx context.Context, c *guard.Checked) error {
	if a.images == nil {
		return nil
	}
	id, err := a.images.ImageID(ctx)
	if err != nil {
		return err
	}
	c.Image = id
	c.Digest = guard.Digest(c)
	return nil
}

// checkWorkflowID refuses, in a check activity, a workflow id outside guard.CheckWorkflowID's
// character set: the client refuses to start one, but anyone who can write to the namespace can
// start RunCode or Session under any id, and reviewers read it in every view and notification.
// It ends the run or session as a bad request does (a ToolUsageError, before anything waits).
func checkWorkflowID(ctx context.Context) error {
	if !activity.IsActivity(ctx) {
		return nil // a direct call (tests): no workflow
	}
	if err := guard.CheckWorkflowID(activity.GetInfo(ctx).WorkflowExecution.ID); err != nil {
		return contract.ToFailure(err)
	}
	return nil
}

// checkRecord is what both check activities record with what they checked (SandboxCheck a
// run's request, SessionCheck a session, which moves it into its own result): the worker's
// approval timeout, run options, statement version and notify options; the keys the workflow
// carries, the reviewers' (its decisions must be signed with them) and the sandbox hosts' (its
// receipts must be); and the checked thing's start-up warnings and quorum. A key file that
// cannot be read is a ConfigError, as a failure.
func (a *Activities) checkRecord(warnings []pysource.StartupWarning, quorum int) (contract.CheckResult, error) {
	reviewers, err := a.loadReviewers()
	if err != nil {
		return contract.CheckResult{}, contract.ToFailure(err)
	}
	hosts, err := a.loadHosts()
	if err != nil {
		return contract.CheckResult{}, contract.ToFailure(err)
	}
	return contract.CheckResult{
		CheckedBy: contract.CheckedBy{ApprovalTimeout: a.policy.ApprovalTimeout, Run: a.run, Reviewers: reviewers,
			Warnings: warnings, StatementVersion: approval.StatementVersion},
		Hosts: hosts, Notify: a.notify, Quorum: quorum}, nil
}

// notifyOptions is o with its defaults, or nil.
func notifyOptions(o *contract.NotifyOptions) *contract.NotifyOptions {
	if o == nil {
		return nil
	}
	d := o.WithDefaults()
	return &d
}

// minHeartbeatInterval bounds how often Run heartbeats.
const minHeartbeatInterval = 100 * time.Millisecond

// MaxHeartbeatInterval is the longest wait between a sandbox activity's heartbeats, whatever its
// heartbeat timeout: a cancel reaches a running sandbox in the server's answer to a heartbeat.
// Set the sandbox worker's worker.Options.MaxHeartbeatThrottleInterval to it too, or the SDK
// sends only one heartbeat in 0.8 heartbeat timeouts and a cancel takes that long to arrive.
const MaxHeartbeatInterval = time.Second

// SandboxRun runs an approved request on the worker's guarded backend and returns the result, with the
// approval's id and reviewer. It heartbeats while the code runs and emits sandbox.started and
// sandbox.finished, or sandbox.refused when it refuses the approval (an ApprovalRefused). Errors
// are application errors typed as in ApplicationError.
//
// Run never runs a second attempt of itself: Temporal retries of the sandbox activity could run
// approved code twice, so an attempt after the first is refused as an IntegrationError whose code
// may have started. The workflow retries a failure from before the code could start by scheduling
// a fresh activity. Nor does it run an approval twice for anyone else (once.go): before anything
// starts it claims the approval in the run's history, where every earlier claim must have been
// released and every earlier sandbox activity must have failed before its code could start.
func (a *Activities) SandboxRun(ctx context.Context, in contract.RunInput) (guard.Result, error) {
	if a.guarded == nil {
		return guard.Result{}, contract.ToFailure(&guard.ConfigError{Msg: "this worker has no sandbox backend"})
	}
	info := activity.GetInfo(ctx)
	c := in.Checked
	c.Owner = guard.Owner{WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID, ActivityID: info.ActivityID}
	// Heartbeated from the start, while this host is alive: the claim's signal and history read
	// on a loaded server (a clean-clone CI run saw them outlast a 2 s heartbeat timeout, which
	// left the run "outcome unknown" with its approval used), or a slow container create after
	// them, must not let the server time the activity out.
	// They go on, as the code does, when the server may have lost the attempt (late.go).
	code, stopCode := codeContext(ctx)
	defer stopCode(nil)
	runCtx, stopBeat, live := a.runHeartbeat(ctx, code, stopCode, info, 0)
	stop := sync.OnceFunc(stopBeat)
	defer stop()
	// The signatures are verified before a sandbox is taken, so that an activity a namespace
	// writer schedules with approvals that do not verify makes no Docker call at all.
	ad := a.runAdmission(info, c, in)
	verified, err := a.verifyAdmission(ad)
	if err != nil {
		return guard.Result{}, a.notAdmitted(ctx, c, in, err)
	}
	approvals := approvalsOf(ad.decisions, verified)
	// Spooled from before the claim on (adopt.go): a worker that adopts the run after this one
	// died delivers its result, or releases the claim of code that never went.
	spooled := a.newRunSpool(activity.GetLogger(ctx), info, c, in, approvals)
	defer spooled.done()
	ad.beforeClaim = spooled.claimed
	acquiring, stopAcquire := a.acquireAhead(ctx, c)
	defer stopAcquire()
	claim, err := a.admit(ctx, ad, verified)
	if err != nil {
		stopAcquire()
		if got := <-acquiring; got.err == nil {
			got.prepared.Discard()
		}
		return guard.Result{}, a.notAdmitted(ctx, c, in, err)
	}
	in.Decision.Reviewer = verified[0].Principal // as this host verified it
	history := a.historyOf(ctx)

	started := startedEvent(c, in, info.Attempt)
	started.Time = time.Now()
	a.sink.Emit(ctx, started)

	got := <-acquiring
	if got.err == nil {
		spooled.sending(got.prepared.SandboxID())
	}
	start := time.Now()
	runCtx, span := runSpan(runCtx, c)
	res, err := got.run(runCtx)
	elapsed := time.Since(start)
	endRunSpan(span, res, err)
	stop()
	if guard.Retryable(err) {
		err = claim.release(ctx, history, err) // the code did not start: the workflow's fresh activity may use it
	}

	// The one place a result's approval fields are set (the guard sets its digest and backend).
	res.ApprovalID = in.Decision.ApprovalID
	res.Reviewer = in.Decision.Reviewer
	res.Approvals, res.Edit = approvals, in.Edit
	res, err = a.signRun(ctx, runReceipt{info: info, digest: c.Digest, backend: c.Backend, secrets: c.Secrets,
		approvals: receiptApprovals(res.Approvals), claim: claim.msg.Commitment, policyHash: ad.policyHash, started: start, ended: start.Add(elapsed)}, res, err)
	finished := finishedEvent(c, in, res, err, elapsed)
	finished.Time = time.Now()
	a.sink.Emit(context.WithoutCancel(ctx), finished)
	if err == nil {
		a.answerLate(ctx, code, a.activityRoute(ctx, info), c, res, live)
	}
	return runAnswer(ctx, code, res, err)
}

// runAnswer is what the sandbox activity returns for a run that ended with res and err: the
// context's error when it was cancelled, so that Temporal records a cancellation; an
// application error; or the result. A cancelled result counts when the workflow asked for the
// cancel, as the code's context (code, from codeContext) records.
func runAnswer(ctx, code context.Context, res guard.Result, err error) (guard.Result, error) {
	if err != nil {
		if ctx.Err() != nil {
			// Cancelled (the workflow was cancelled, or the worker is stopping): report the
			// context's error so Temporal records a cancellation.
			return guard.Result{}, fmt.Errorf("sandbox activity: %w", ctx.Err())
		}
		return guard.Result{}, contract.ToFailure(err)
	}
	if res.Outcome == guard.OutcomeCancelled && !cancelRequested(code) {
		// Stopped because this worker is stopping (or the activity was paused or reset), not
		// because the workflow asked: the run's outcome is unknown to the workflow.
		return guard.Result{}, fmt.Errorf("sandbox activity: stopped without a cancel request: %w", context.Cause(ctx))
	}
	return res, nil
}

// acquireAhead takes the sandbox for c while the approval is claimed, so that the request goes
// the moment the claim is confirmed; nothing runs in it before, and the caller discards it if
// the claim is not. stop ends a take still under way.
func (a *Activities) acquireAhead(ctx context.Context, c guard.Checked) (got <-chan acquiredSandbox, stop func()) {
	ctx, stop = context.WithCancel(ctx)
	acquiring := make(chan acquiredSandbox, 1)
	go func() {
		p, err := a.guarded.Acquire(ctx, c)
		acquiring <- acquiredSandbox{p, err}
	}()
	return acquiring, stop
}

// acquiredSandbox is the outcome of the guard's Acquire for a run.
type acquiredSandbox struct {
	prepared *guard.Prepared
	err      error
}

// run runs the prepared request, or returns the error that kept the sandbox from being taken
// (nothing started).
func (s acquiredSandbox) run(ctx context.Context) (guard.Result, error) {
	if s.err != nil {
		return guard.Result{}, s.err
	}
	return s.prepared.Run(ctx)
}

// cancelRequested reports whether ctx, an activity's, was cancelled because the workflow asked
// (the server's answer to a heartbeat), not because the worker is stopping.
func cancelRequested(ctx context.Context) bool {
	return ctx.Err() != nil && temporal.IsCanceledError(context.Cause(ctx))
}

// historyOf is the run log the sandbox host claims approvals in: the activity's own client
// unless the configuration gave one.
func (a *Activities) historyOf(ctx context.Context) RunLog {
	if a.history != nil {
		return a.history
	}
	return activity.GetClient(ctx)
}

// notAdmitted is SandboxRun's answer when the run was not admitted with err (nothing ran): the
// context's error when the workflow cancelled the activity meanwhile (a cancel during the claim's
// history read, whose claim was released: the workflow then ends the run Cancelled, not with the
// read's failure; an attempt the server lost, as after a reset, keeps err, which the workflow
// retries), else err as a failure, with its sandbox.refused event.
func (a *Activities) notAdmitted(ctx context.Context, c guard.Checked, in contract.RunInput, err error) error {
	a.refused(ctx, c, in, err)
	if ctx.Err() != nil && !attemptLost(ctx) && guard.Retryable(err) {
		return fmt.Errorf("sandbox activity: %w", ctx.Err())
	}
	return contract.ToFailure(err)
}

// refused emits sandbox.refused when err is the host's refusal of the approval: nothing ran.
func (a *Activities) refused(ctx context.Context, c guard.Checked, in contract.RunInput, err error) {
	var ar *guard.ApprovalRefused
	if !errors.As(err, &ar) {
		return
	}
	e := refusedEvent(c, in, ar)
	e.Time = time.Now()
	a.sink.Emit(context.WithoutCancel(ctx), e)
}
