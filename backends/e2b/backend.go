package e2b

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// Paths inside the sandbox. The code is written outside the working folder, so it is never
// returned as a produced file.
const (
	codeDir = "/tmp/.sandboxflow"
	// homeDir is the code's HOME (empty); pycacheDir its pycache prefix (never made).
	homeDir    = codeDir + "/home"
	pycacheDir = codeDir + "/pycache"
	// maxListDepth matches the Docker backend's walk of /work.
	maxListDepth = 8
	// processSlack is how long past the timeout the backend waits for envd's end event before it
	// reports a timeout itself (envd kills the process at the timeout).
	processSlack = 2 * time.Second
	// allTrafficCIDR denies all egress (E2B's own value for allow_internet_access false).
	allTrafficCIDR = "0.0.0.0/0"
)

// TimeoutNote is appended to stderr when the run timed out.
const TimeoutNote = "\nsandboxflow: the code did not finish within its timeout; the E2B sandbox was killed\n"

// Backend runs each request in a fresh E2B sandbox that it kills afterwards. Create it with New.
type Backend struct {
	cfg Config
	api api
	log *slog.Logger
}

// New validates cfg and returns the backend. It makes no call to E2B (Doctor does).
func New(cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	return &Backend{cfg: cfg, api: api{cfg: cfg}, log: cfg.Logger}, nil
}

// Name returns "e2b".
func (b *Backend) Name() string { return Name }

// Run creates a sandbox (internet access off unless c.Network), writes the code and the input
// files, runs the code with c.Limits.Timeout through envd, reads its output, exit code and
// produced files, and kills the sandbox whatever happened. Errors before the code could start
// are retryable IntegrationErrors (a refused key is a ConfigError); after that they are
// IntegrationErrors whose outcome is unknown. A timeout is a result.
func (b *Backend) Run(ctx context.Context, c guard.Checked) (guard.Result, error) {
	pc, err := b.command(c)
	if err != nil {
		return guard.Result{}, err
	}
	s, err := b.api.create(ctx, b.newSandbox(c))
	if err != nil {
		return guard.Result{}, err
	}
	b.log.Info("e2b sandbox created", "sandbox_id", s.SandboxID, "template", b.cfg.Template,
		"workflow_id", c.Owner.WorkflowID, "run_id", c.Owner.RunID, "activity_id", c.Owner.ActivityID, "digest", c.Digest)
	if b.cfg.Created != nil {
		b.cfg.Created(ctx, s.SandboxID)
	}
	defer b.kill(ctx, s.SandboxID)
	return b.runIn(ctx, newEnvd(b.cfg, s), c, pc)
}

// kill kills the sandbox with a context of its own, so a cancelled run still kills it. A failed
// kill is logged: the sandbox's time to live and the reaper end it.
func (b *Backend) kill(ctx context.Context, id string) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.KillTimeout)
	defer cancel()
	if err := b.api.kill(kctx, id); err != nil {
		b.log.Warn("e2b: kill sandbox failed; its time to live and the reaper will end it", "sandbox_id", id, "error", err)
		return
	}
	b.log.Info("e2b sandbox killed", "sandbox_id", id)
}

// newSandbox is the create request for c.
func (b *Backend) newSandbox(c guard.Checked) newSandbox {
	meta := map[string]string{MetaManaged: "true", MetaDigest: c.Digest}
	for k, v := range map[string]string{MetaWorkflowID: c.Owner.WorkflowID, MetaRunID: c.Owner.RunID, MetaActivityID: c.Owner.ActivityID} {
		if v != "" {
			meta[k] = v
		}
	}
	for k, v := range b.cfg.Labels {
		meta[k] = v
	}
	ttl := int(math.Ceil((c.Limits.Timeout + b.cfg.TTLSlack).Seconds()))
	return newSandbox{
		TemplateID:          b.cfg.Template,
		Timeout:             ttl,
		Secure:              true,
		AllowInternetAccess: c.Network,
		Network:             networkFor(c.Network),
		Metadata:            meta,
		EnvVars:             map[string]string{},
	}
}

// networkFor is the network config of a run: all egress denied unless network was asked for.
func networkFor(network bool) *NetworkConfig {
	if network {
		return nil
	}
	return &NetworkConfig{DenyOut: []string{allTrafficCIDR}}
}

var hostPatternRE = regexp.MustCompile(`^(\*\.)?([A-Za-z0-9-]{1,63}\.)*[A-Za-z0-9-]{1,63}$`)

// EgressNetwork maps an egress allowlist to E2B's network config: all egress denied except the
// listed destinations (E2B lets allowOut take precedence over denyOut). A pattern is a CIDR
// block, an IP address, a host name or "*." and a domain; E2B's rules have no ports, so a
// pattern with one is a guard.ConfigError. Send it with allow_internet_access false.
func EgressNetwork(patterns []string) (*NetworkConfig, error) {
	nc := &NetworkConfig{DenyOut: []string{allTrafficCIDR}}
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		_, _, cidrErr := net.ParseCIDR(p)
		_, ipErr := netip.ParseAddr(p)
		if cidrErr != nil && ipErr != nil && !hostPatternRE.MatchString(p) {
			return nil, &guard.ConfigError{Msg: fmt.Sprintf("e2b backend: egress pattern %q: want a CIDR block, an IP address, a host or *.domain (E2B rules have no ports)", p)}
		}
		nc.AllowOut = append(nc.AllowOut, strings.ToLower(p))
	}
	return nc, nil
}

// command is how envd runs c: the interpreter, the code file as its argument, the env. Python
// starts as in every backend (pysource.Flags), and HOME is a folder of its own beside the
// code, never the working folder where input files land, so nothing among them runs first.
func (b *Backend) command(c guard.Checked) (processConfig, error) {
	envs := c.EnvMap()
	envs["HOME"] = homeDir
	envs["PYTHONNOUSERSITE"] = "1"
	envs["PYTHONDONTWRITEBYTECODE"] = "1"
	if pysource.BytecodeAmongInputs(guard.InputNames(c.Files)) {
		envs["PYTHONPYCACHEPREFIX"] = pycacheDir
	}
	var pc processConfig
	switch c.Language {
	case guard.Python, "":
		pc = processConfig{Cmd: "python3", Args: append(pysource.Flags(guard.InputNames(c.Files), pycacheDir), codeDir+"/main.py")}
	case guard.Shell:
		pc = processConfig{Cmd: "/bin/sh", Args: []string{codeDir + "/main.sh"}}
	default:
		return pc, &guard.ConfigError{Msg: fmt.Sprintf("e2b backend: language %q is not offered (python, sh)", c.Language)}
	}
	pc.Envs, pc.Cwd = envs, b.cfg.WorkDir
	return pc, nil
}

// runIn writes the code and files into the sandbox, runs the code and reads the result.
func (b *Backend) runIn(ctx context.Context, e envd, c guard.Checked, pc processConfig) (guard.Result, error) {
	notStarted := func(op string, err error) (guard.Result, error) {
		return guard.Result{}, &guard.IntegrationError{Op: "e2b: " + op, Err: err}
	}
	for _, dir := range []string{b.cfg.WorkDir, homeDir} {
		if err := e.makeDir(ctx, dir); err != nil {
			return notStarted("make folder "+dir, err)
		}
	}
	if err := e.upload(ctx, pc.Args[len(pc.Args)-1], []byte(c.Code)); err != nil {
		return notStarted("write code", err)
	}
	for _, f := range c.Files {
		if err := e.upload(ctx, path.Join(b.cfg.WorkDir, f.Name), f.Content); err != nil {
			return notStarted("write input file "+f.Name, err)
		}
	}
	res, err := b.execute(ctx, e, pc, c.Limits)
	if err != nil || res.TimedOut {
		return res, err
	}
	unknown := func(err error) (guard.Result, error) {
		return guard.Result{}, &guard.IntegrationError{Op: "e2b: run (outcome unknown; the approval was used)", Err: err, CodeMayHaveStarted: true}
	}
	files, truncated, err := b.collect(ctx, e, c)
	if err != nil {
		return unknown(fmt.Errorf("read produced files: %w", err))
	}
	res.Files, res.FilesTruncated = files, truncated
	return res, nil
}

// execute runs one process through envd with the limits' timeout and output caps and returns
// its exit code and output (no files). Errors before the process could start are retryable
// IntegrationErrors; after that, IntegrationErrors whose outcome is unknown. A timeout is a result.
func (b *Backend) execute(ctx context.Context, e envd, pc processConfig, l guard.Limits) (guard.Result, error) {
	notStarted := func(op string, err error) (guard.Result, error) {
		return guard.Result{}, &guard.IntegrationError{Op: "e2b: " + op, Err: err}
	}
	timeout := l.Timeout
	pctx, cancel := context.WithTimeout(ctx, timeout+processSlack)
	defer cancel()
	start := time.Now()
	pr, err := e.start(pctx, pc, timeout, l)
	elapsed := time.Since(start)
	res := guard.Result{
		ExitCode: pr.exitCode, Stdout: pr.stdout.buf, Stderr: pr.stderr.buf,
		StdoutTruncated: pr.stdout.truncated, StderrTruncated: pr.stderr.truncated,
		Measured: &guard.Measured{Stdout: pr.stdout.measure(), Stderr: pr.stderr.measure()},
	}
	timedOut := func() (guard.Result, error) {
		res.TimedOut, res.ExitCode = true, -1
		res.Stderr = append(res.Stderr, TimeoutNote...)
		return res, nil
	}
	unknown := func(err error) (guard.Result, error) {
		return guard.Result{}, &guard.IntegrationError{Op: "e2b: run (outcome unknown; the approval was used)", Err: err, CodeMayHaveStarted: true}
	}
	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return timedOut()
	case ctx.Err() != nil:
		return unknown(fmt.Errorf("run cancelled: %w", ctx.Err()))
	case err != nil && errors.Is(err, errNotSent):
		return notStarted("start process", err)
	case pctx.Err() != nil:
		return timedOut()
	case err != nil:
		return unknown(fmt.Errorf("process stream: %w", err))
	case pr.streamErr != nil && pr.streamErr.Code == "deadline_exceeded":
		return timedOut()
	case pr.streamErr != nil:
		return unknown(fmt.Errorf("process stream: %w", pr.streamErr))
	case !pr.ended:
		return unknown(errors.New("process stream: it ended without an end event"))
	case !pr.exited && elapsed >= timeout:
		return timedOut()
	}
	if !pr.exited && res.ExitCode == 0 {
		res.ExitCode = -1
	}
	return res, nil
}

// collect lists the working folder and downloads the regular files the code produced, within the
// limits: input files whose bytes did not change are left out, and anything over a limit sets
// truncated.
func (b *Backend) collect(ctx context.Context, e envd, c guard.Checked) ([]guard.File, bool, error) {
	entries, err := e.listDir(ctx, b.cfg.WorkDir, maxListDepth)
	if err != nil {
		return nil, false, err
	}
	inputs := make(map[string][]byte, len(c.Files))
	for _, f := range c.Files {
		inputs[f.Name] = f.Content
	}
	l := c.Limits
	var (
		files     []guard.File
		total     int64
		truncated bool
	)
	prefix := strings.TrimRight(b.cfg.WorkDir, "/") + "/"
	for _, en := range entries {
		name, under := strings.CutPrefix(en.Path, prefix)
		if !under || !en.isFile() {
			continue
		}
		size := int64(en.Size)
		if in, ok := inputs[name]; ok && int64(len(in)) != size {
			delete(inputs, name) // changed: it is a produced file
		}
		if size > l.MaxFileBytes || total+size > l.MaxTotalFileBytes || len(files) >= l.MaxFiles {
			truncated = true
			continue
		}
		data, err := e.download(ctx, en.Path, l.MaxFileBytes)
		if err != nil {
			return nil, false, err
		}
		if in, ok := inputs[name]; ok && string(in) == string(data) {
			continue
		}
		if int64(len(data)) > l.MaxFileBytes || total+int64(len(data)) > l.MaxTotalFileBytes {
			truncated = true
			continue
		}
		total += int64(len(data))
		files = append(files, guard.File{Name: name, Size: int64(len(data)), Content: data})
	}
	return files, truncated, nil
}
