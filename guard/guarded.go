package guard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// Backend runs one checked request and returns its result, or an error when the backend itself
// failed (an IntegrationError, or a ConfigError for a setting it cannot honour). A timeout is a
// result with TimedOut set. Implementations must stop the code when ctx is done.
type Backend interface {
	// Name identifies the backend; it is part of the digest.
	Name() string
	Run(ctx context.Context, c Checked) (Result, error)
}

// An ImageNamer is a Backend that runs code in an image it can name: ImageID is the ID
// ("sha256:...") of the image it would run a request in now. The check records it in
// Checked.Image (part of the digest), and Guarded refuses a request whose Image is not it.
type ImageNamer interface {
	ImageID(ctx context.Context) (string, error)
}

// An Acquirer is a Backend that can take the sandbox for a request before the request may run,
// so that the sandbox activity takes it while it claims the approval and sends the request the
// moment the claim is confirmed. Backend.Run stays the whole of a run.
type Acquirer interface {
	Backend
	// Acquire takes a sandbox for c (a started one from a warm pool, or one created now) and
	// runs nothing in it; it never waits for a sandbox to be free (ErrAcquireLater). Errors are
	// typed like Run's; the code never started.
	Acquire(ctx context.Context, c Checked) (Acquired, error)
}

// ErrAcquireLater is what an Acquirer's Acquire returns when it could take a sandbox only by
// waiting (all of its sandboxes in use): the request then takes one when it runs, as Backend.Run
// does, so that the wait is heartbeated as the run is.
var ErrAcquireLater = errors.New("no sandbox free now: take one when the request runs")

// Acquired is a sandbox an Acquirer took for one request. Exactly one of Run or Discard is
// called, once.
type Acquired interface {
	// Run sends the request to the sandbox and returns what Backend.Run would, under ctx.
	Run(ctx context.Context) (Result, error)
	// Discard removes the sandbox with nothing run in it: it is never handed to another run.
	Discard()
}

// An Adopter is a Backend whose sandboxes outlive the worker that started them, with what their
// code reported: a worker that starts on the same host collects the result of a run its
// predecessor sent but did not collect (it was SIGKILLed, or stopped), so that the run's host can
// deliver it late (activities' spool). It runs nothing.
type Adopter interface {
	Backend
	// Adopt waits for the code sent to the sandbox named sandbox (an Identified's SandboxID, or
	// "" for the one the backend labelled with c.Owner) to end, and returns its result as Run
	// would have; the sandbox is removed. An error means the result cannot be known (the sandbox
	// is gone, or kept no report): the code may have run.
	Adopt(ctx context.Context, sandbox string, c Checked) (Result, error)
}

// Identified is an Acquired that names its sandbox (for an Adopter to find it again).
type Identified interface {
	SandboxID() string
}

// Check is one line of a backend's doctor report (`worker doctor`): what was checked, whether it
// passed, and what was found.
type Check struct {
	Name   string
	OK     bool
	Detail string
}

// Probe returns the checked request a backend's doctor runs: Python code, owned by the workflow
// "doctor", with a 20 s timeout, 4 KiB of stdout and of stderr, up to files produced files of
// fileBytes each, and its digest.
func Probe(backend, code string, files int, fileBytes int64) Checked {
	c := Checked{Language: Python, Code: code, Owner: Owner{WorkflowID: "doctor"}, CheckedSettings: CheckedSettings{
		Backend: backend,
		Limits: Limits{Timeout: 20 * time.Second, MaxStdoutBytes: 4096, MaxStderrBytes: 4096,
			MaxFiles: files, MaxFileBytes: fileBytes, MaxTotalFileBytes: int64(files) * fileBytes},
	}}
	c.Digest = Digest(&c)
	return c
}

// Guarded wraps a backend it does not trust: before a run it re-checks the request against the
// policy and its digest; during the run it enforces a backstop of timeout + grace; after the run it
// re-applies every output and file limit and re-checks produced file names (fail closed).
type Guarded struct {
	backend Backend
	policy  Policy
}

// New returns b guarded by p.
func New(b Backend, p Policy) *Guarded {
	return &Guarded{backend: b, policy: p.WithDefaults()}
}

// Name is the backend's name.
func (g *Guarded) Name() string { return g.backend.Name() }

// BackstopNote is appended to stderr when the backstop, not the backend, ended a run.
const BackstopNote = "\nsandboxflow: the backend did not return within timeout + grace; it was cancelled and the run reported as timed out\n"

type backendOutcome struct {
	res Result
	err error
}

// Run checks c again, runs it on the backend under the backstop and returns the result with every
// limit re-applied. Errors are typed: ToolUsageError or ConfigError before anything ran,
// IntegrationError when the backend failed. When ctx is cancelled while the code may be running,
// Run waits up to the policy's grace for the backend to stop its sandbox and returns a result
// whose Outcome is cancelled, with the output the backend reported before (see OutputFunc; a
// backend that reports none gives none); when the backend reports that the code had not started
// (a Retryable error), that error, wrapped.
func (g *Guarded) Run(ctx context.Context, c Checked) (Result, error) {
	if c.Backend != g.backend.Name() {
		return Result{}, configf("request was checked for backend %q but this worker runs %q", c.Backend, g.backend.Name())
	}
	if err := g.policy.Recheck(c); err != nil {
		return Result{}, err
	}
	if err := g.checkImage(ctx, c.Image); err != nil {
		return Result{}, err
	}
	c.Limits = g.policy.withOutputCaps(c.Limits)
	return g.run(ctx, c, func(ctx context.Context) (Result, error) { return g.backend.Run(ctx, c) })
}

// checkImage refuses a request or session whose recorded image (Checked.Image, which its digest
// binds and its reviewers were shown) is not the one the backend would run it in now: an ApprovalRefused
// (RefusedImage), before anything runs. A backend that names its image checks it again where
// it creates the sandbox.
func (g *Guarded) checkImage(ctx context.Context, image string) error {
	if image == "" {
		return nil
	}
	n, ok := g.backend.(ImageNamer)
	if !ok {
		return &ApprovalRefused{Reason: RefusedImage, Msg: fmt.Sprintf("the request was approved to run in image %s, but this host's backend %s runs no image it can name", image, g.backend.Name())}
	}
	id, err := n.ImageID(ctx)
	if err != nil {
		return typedBeforeStart(g.backend.Name(), err)
	}
	if id != image {
		return ImageRefusal(image, id)
	}
	return nil
}

// ImageRefusal is the refusal of a request approved to run in image approved on a host whose
// backend would run image has.
func ImageRefusal(approved, has string) *ApprovalRefused {
	return &ApprovalRefused{Reason: RefusedImage, Msg: fmt.Sprintf("the request was approved to run in image %s, but this host's backend would run image %s "+
		"(its image was changed or retagged since the check, or the checking worker names another image); start the run again to have the image reviewed", approved, has)}
}

// run is Run's part from the backend's run on, which run makes.
func (g *Guarded) run(ctx context.Context, c Checked, run func(context.Context) (Result, error)) (Result, error) {
	backstop := c.Limits.Timeout + g.policy.Grace
	runCtx, cancel := context.WithTimeout(ctx, backstop)
	defer cancel()
	kept := keepOutput(c.Limits, OutputOf(ctx))
	runCtx = WithOutput(runCtx, kept.write)

	start := time.Now()
	done := make(chan backendOutcome, 1)
	go func() {
		res, err := run(runCtx)
		done <- backendOutcome{res, err}
	}()

	var out backendOutcome
	select {
	case out = <-done:
	case <-runCtx.Done():
		if ctx.Err() != nil {
			return g.cancelled(c, kept, g.awaitStop(done), start)
		}
		// Give a backend that is stopping because of the context a moment to report, but never
		// wait on one that ignores it.
		select {
		case out = <-done:
		case <-time.After(250 * time.Millisecond):
			out = backendOutcome{res: Result{TimedOut: true, ExitCode: -1, Stderr: []byte(BackstopNote)}}
		}
	}
	elapsed := time.Since(start)

	if out.err != nil {
		if ctx.Err() != nil {
			return g.cancelled(c, kept, &out, start)
		}
		if errors.Is(runCtx.Err(), context.DeadlineExceeded) && TypeOf(out.err) == "" {
			out = backendOutcome{res: Result{TimedOut: true, ExitCode: -1, Stderr: []byte(BackstopNote)}}
		} else {
			return Result{}, typed(g.backend.Name(), out.err)
		}
	}
	res := Enforce(out.res, c.Limits)
	res.Duration = elapsed
	res.Digest = c.Digest
	res.Backend = g.backend.Name()
	return res, nil
}

// Prepared is a request Acquire checked again and took a sandbox for; nothing of it ran yet.
// Call Run or Discard.
type Prepared struct {
	g        *Guarded
	c        Checked
	acquired Acquired // nil when the backend is no Acquirer: Run then calls its Run
	used     atomic.Bool
}

// Acquire checks c again as Run does and, when the backend is an Acquirer, takes its sandbox
// (bounded by the backstop, timeout + grace), so that Prepared.Run only sends the request; when
// none is free without waiting (ErrAcquireLater), Prepared.Run takes one. It runs nothing.
// Errors are typed like Run's.
func (g *Guarded) Acquire(ctx context.Context, c Checked) (*Prepared, error) {
	if c.Backend != g.backend.Name() {
		return nil, configf("request was checked for backend %q but this worker runs %q", c.Backend, g.backend.Name())
	}
	if err := g.policy.Recheck(c); err != nil {
		return nil, err
	}
	if err := g.checkImage(ctx, c.Image); err != nil {
		return nil, err
	}
	c.Limits = g.policy.withOutputCaps(c.Limits)
	p := &Prepared{g: g, c: c}
	a, ok := g.backend.(Acquirer)
	if !ok {
		return p, nil
	}
	actx, cancel := context.WithTimeout(ctx, c.Limits.Timeout+g.policy.Grace)
	defer cancel()
	acquired, err := a.Acquire(actx, c)
	if errors.Is(err, ErrAcquireLater) {
		return p, nil // Run takes one, as the backend's Run does
	}
	if err != nil {
		return nil, typedBeforeStart(g.backend.Name(), err)
	}
	if acquired == nil {
		return nil, &IntegrationError{Op: "backend " + g.backend.Name(), Err: errors.New("acquire returned no sandbox and no error")}
	}
	p.acquired = acquired
	return p, nil
}

// Run runs the prepared request as Guarded.Run does (the backstop counts from now). A second
// call, or a call after Discard, runs nothing and fails.
func (p *Prepared) Run(ctx context.Context) (Result, error) {
	if !p.used.CompareAndSwap(false, true) {
		return Result{}, &IntegrationError{Op: "guard: run a prepared request", Err: errors.New("it was run or discarded already")}
	}
	if p.acquired == nil {
		return p.g.run(ctx, p.c, func(ctx context.Context) (Result, error) { return p.g.backend.Run(ctx, p.c) })
	}
	return p.g.run(ctx, p.c, p.acquired.Run)
}

// SandboxID names the sandbox the request runs in when the backend took one ahead (Identified),
// or is "" (the backend finds the sandbox by the request's owner).
func (p *Prepared) SandboxID() string {
	if id, ok := p.acquired.(Identified); ok {
		return id.SandboxID()
	}
	return ""
}

// Adopter returns the backend as an Adopter, or nil when it is none.
func (g *Guarded) Adopter() Adopter {
	a, _ := g.backend.(Adopter)
	return a
}

// Adopt returns the result of the code a worker before this one sent for c (Adopter.Adopt),
// with every limit applied as Run applies them; started is when that worker sent it. It fails
// with a ConfigError when the backend is no Adopter; its other errors are typed as Run's, the
// code may have run.
func (g *Guarded) Adopt(ctx context.Context, sandbox string, c Checked, started time.Time) (Result, error) {
	a := g.Adopter()
	if a == nil {
		return Result{}, configf("backend %q keeps no sandbox for another worker to adopt", g.backend.Name())
	}
	res, err := a.Adopt(ctx, sandbox, c)
	if err != nil {
		return Result{}, typed(g.backend.Name(), err)
	}
	res = Enforce(res, g.policy.withOutputCaps(c.Limits))
	res.Duration = time.Since(started)
	res.Digest = c.Digest
	res.Backend = g.backend.Name()
	return res, nil
}

// Discard gives up the prepared request with nothing run: its sandbox is removed. It is a no-op
// after Run or a first Discard.
func (p *Prepared) Discard() {
	if p.used.CompareAndSwap(false, true) && p.acquired != nil {
		p.acquired.Discard()
	}
}

// awaitStop waits up to the grace for a cancelled backend to return (it kills and removes its
// sandbox before it does), and returns its outcome, or nil when it did not return in time.
func (g *Guarded) awaitStop(done <-chan backendOutcome) *backendOutcome {
	select {
	case out := <-done:
		return &out
	case <-time.After(g.policy.Grace):
		return nil
	}
}

// cancelled is Run's answer once its context was cancelled, given the backend's outcome (nil
// when it did not return within the grace): the code's output until then, or, when the backend
// says the code had not started, its error.
func (g *Guarded) cancelled(c Checked, kept *keptOutput, out *backendOutcome, start time.Time) (Result, error) {
	if out != nil && Retryable(out.err) {
		return Result{}, fmt.Errorf("guard: run cancelled before the code started: %w", out.err)
	}
	res := Enforce(kept.result(), c.Limits)
	res.markCancelled()
	res.Duration = time.Since(start)
	res.Digest = c.Digest
	res.Backend = g.backend.Name()
	return res, nil
}

// keptOutput keeps, within the limits' caps, the output a backend reports as it runs (its
// OutputFunc), passing each byte on to next: what a cancelled run printed before it was stopped.
type keptOutput struct {
	stdout, stderr *CapBuffer
	next           OutputFunc
}

func keepOutput(l Limits, next OutputFunc) *keptOutput {
	return &keptOutput{stdout: NewCapBuffer(l.MaxStdoutBytes), stderr: NewCapBuffer(l.MaxStderrBytes), next: next}
}

func (k *keptOutput) write(s Stream, p []byte) {
	switch s {
	case StreamStdout:
		_, _ = k.stdout.Write(p)
	case StreamStderr:
		_, _ = k.stderr.Write(p)
	}
	if k.next != nil {
		k.next(s, p)
	}
}

// result is the kept output as a result. A stream whose cap the backend's report reached is
// flagged truncated: the backend reports only what it keeps, so the code may have written more.
func (k *keptOutput) result() Result {
	out, errb := k.stdout.Bytes(), k.stderr.Bytes()
	return Result{Stdout: out, Stderr: errb,
		StdoutTruncated: int64(len(out)) >= k.stdout.max && k.stdout.max > 0,
		StderrTruncated: int64(len(errb)) >= k.stderr.max && k.stderr.max > 0}
}

// typedBeforeStart types an error of Acquire, which runs nothing: the end of its context (a
// cancel while the container starts, the backstop) is an IntegrationError whose code did not
// start (retryable: the approval was not used); any other is typed as Run's errors are.
func typedBeforeStart(backend string, err error) error {
	if TypeOf(err) == "" && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return &IntegrationError{Op: "backend " + backend + ": take a sandbox", Err: err}
	}
	return typed(backend, err)
}

// typed makes sure a backend's error is one of ours: an untyped error is an IntegrationError whose
// outcome is unknown.
func typed(backend string, err error) error {
	if TypeOf(err) != "" {
		return err
	}
	return &IntegrationError{Op: "backend " + backend, Err: err, CodeMayHaveStarted: true}
}

// Enforce re-applies the limits to a result from an untrusted backend: each stream is cut to its
// cap, produced files with unsafe, colliding, oversized or excess entries are dropped (setting
// FilesTruncated), outputs past their caps are left out (enforceOutputs), sizes are recomputed from the content, and the outcome is settled (OK, TimedOut
// and a timeout's exit code -1 follow from it); the usage's egress figures are the egress report's.
func Enforce(res Result, l Limits) Result {
	if res.Measured == nil || res.Measured.Files == nil {
		// The files as the backend returned them, for the receipt's "before" (once: a result
		// enforced again keeps its first measure).
		m := Measured{}
		if res.Measured != nil {
			m = *res.Measured
		}
		m.Files = measureFiles(res.Files)
		res.Measured = &m
	}
	var cut bool
	res.Stdout, cut = Truncate(res.Stdout, l.MaxStdoutBytes)
	res.StdoutTruncated = res.StdoutTruncated || cut
	res.Stderr, cut = Truncate(res.Stderr, l.MaxStderrBytes)
	res.StderrTruncated = res.StderrTruncated || cut

	files := res.Files
	res.Files = nil
	seen := make(map[string]bool, len(files))
	var total int64
	for _, f := range files {
		key := strings.ToLower(f.Name)
		size := int64(len(f.Content))
		switch {
		case CheckFileName(f.Name) != nil, seen[key], size > l.MaxFileBytes,
			len(res.Files) >= l.MaxFiles, total+size > l.MaxTotalFileBytes:
			res.FilesTruncated = true
			seen[key] = true
			continue
		}
		seen[key] = true
		total += size
		res.Files = append(res.Files, File{Name: f.Name, Size: size, Content: f.Content})
	}
	// A name seen twice is dropped both times: which of the two is the real one is unknowable.
	if res.FilesTruncated {
		counts := make(map[string]int, len(files))
		for _, f := range files {
			counts[strings.ToLower(f.Name)]++
		}
		kept := res.Files[:0]
		for _, f := range res.Files {
			if counts[strings.ToLower(f.Name)] == 1 {
				kept = append(kept, f)
			}
		}
		res.Files = kept
	}
	res.Outputs, cut = enforceOutputs(res.Outputs, l)
	res.OutputsTruncated = res.OutputsTruncated || cut
	res.settle()
	return withEgressUsage(res)
}
