package guard

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/pysource"
)

// Session policy defaults (issue 28): a session lives at most an hour, ends after ten minutes
// with no cell submitted, waiting or running, and runs at most 100 cells.
const (
	DefaultMaxSessionLifetime = time.Hour
	DefaultMaxSessionIdle     = 10 * time.Minute
	DefaultMaxSessionCells    = 100
)

// SessionRequest is what an orchestrator opens a session with: a run's settings (without code)
// plus the session's lifetime, idle timeout and maximum cell count. Zero values take the policy's
// caps; a request can narrow the policy, never widen it.
type SessionRequest struct {
	// Languages the cells may use: "python" and/or "sh". Optional: defaults to every language the
	// policy offers.
	Languages []string `json:"languages,omitempty"`
	// Settings hold for every cell: the files are written into /work when the sandbox is
	// created, before any cell; the env is every cell's; the limits bound each cell.
	Settings
	// Lifetime ends the session this long after it opened. Optional: the policy's cap.
	Lifetime time.Duration `json:"lifetime,omitempty"`
	// IdleTimeout ends the session when no cell was submitted, waited or ran for this long.
	// Optional: the policy's cap.
	IdleTimeout time.Duration `json:"idle_timeout,omitempty"`
	// MaxCells ends the session after this many cells (denied ones count). Optional: the policy's cap.
	MaxCells int `json:"max_cells,omitempty"`
	// Conversation names the orchestrator's conversation this session belongs to, as a run's
	// (Request.Conversation): reviewers see what changed in the settings since the
	// conversation's previous run or session. Optional; not part of the digest.
	Conversation string `json:"conversation,omitempty"`
}

// CheckedSession is a session request that passed the policy, with its effective limits and
// caps and its settings digest. Backends receive one to create the session's sandbox.
type CheckedSession struct {
	Languages []string `json:"languages"` // sorted, each one the policy offers
	// CheckedSettings hold for every cell; their limits bound each cell.
	CheckedSettings
	SensitiveEnv []string      `json:"sensitive_env,omitempty"`
	Lifetime     time.Duration `json:"lifetime"`
	IdleTimeout  time.Duration `json:"idle_timeout"`
	MaxCells     int           `json:"max_cells"`
	Conversation string        `json:"conversation,omitempty"` // as requested (checked); not part of the digest
	// Digest is the settings digest, "sha256:<hex>" over SessionCanonicalEncoding.
	Digest string `json:"digest"`
	// Owner is filled in by the activity that creates the sandbox.
	Owner Owner `json:"owner"`
}

// Cell is one checked cell of a session: its index (from 1, denied cells included), language
// and code, the packages it brings (approved with it), and the digest of its code and packages
// (CellCodeDigest).
type Cell struct {
	Index      int    `json:"index"`
	Language   string `json:"language"`
	Code       string `json:"code"`
	CodeDigest string `json:"code_digest"`
	// Packages are the packages the cell adds to its session's set (ParseLock of the cell's
	// lock), sorted by name; none for most cells. A cell never changes one the session has
	// (AddCellPackages).
	Packages []Package `json:"packages,omitempty"`
}

// Equal says c and o are the same cell: index, language, code, code digest and packages.
func (c Cell) Equal(o Cell) bool {
	return c.Index == o.Index && c.Language == o.Language && c.Code == o.Code && c.CodeDigest == o.CodeDigest &&
		slices.EqualFunc(c.Packages, o.Packages, func(a, b Package) bool {
			return a.Name == b.Name && a.Version == b.Version && slices.Equal(a.Extras, b.Extras) && slices.Equal(a.Hashes, b.Hashes)
		})
}

// SessionSummary is what a reviewer reads of a session's settings (no file contents, no env
// values).
type SessionSummary struct {
	Languages    []string      `json:"languages"`
	Files        []FileSummary `json:"files,omitempty"`
	EnvNames     []string      `json:"env_names,omitempty"`
	SensitiveEnv []string      `json:"sensitive_env,omitempty"`
	Limits       Limits        `json:"limits"`
	Network      bool          `json:"network"`
	Egress       []string      `json:"egress,omitempty"`
	Secrets      []string      `json:"secrets,omitempty"`
	Packages     []Package     `json:"packages,omitempty"`
	Backend      string        `json:"backend"`
	// Image is the checked session's Image: the ID of the image its cells run in, when the
	// backend runs one.
	Image       string        `json:"image,omitempty"`
	Lifetime    time.Duration `json:"lifetime"`
	IdleTimeout time.Duration `json:"idle_timeout"`
	MaxCells    int           `json:"max_cells"`
	Digest      string        `json:"digest"`
	Metadata    Metadata      `json:"metadata"`
	// Conversation is the session's conversation: a label the orchestrator chose, never a
	// reviewer's proof of anything.
	Conversation string `json:"conversation,omitempty"`
	// Warnings lists the input files the interpreter may run without a cell calling them.
	Warnings []pysource.StartupWarning `json:"warnings,omitempty"`
}

// SessionBackend is a backend that can keep one sandbox for a session: cells run in it one after
// another and state survives between them (see Sandbox).
type SessionBackend interface {
	Backend
	// OpenSession creates and starts the session's sandbox with s's input files, env, network and
	// limits. No cell code runs. Errors are typed like Run's: an IntegrationError with
	// CodeMayHaveStarted false may be retried.
	OpenSession(ctx context.Context, s CheckedSession) (Sandbox, error)
}

// A SessionAdopter is a SessionBackend whose session sandboxes outlive the worker process that
// opened them (issue 44): a worker that starts on the same host takes over the sandbox of a
// session whose worker died (SIGKILLed, or stopped), so that the session goes on in it.
type SessionAdopter interface {
	SessionBackend
	// AdoptSession takes over the session sandbox id, which a worker of this deployment opened
	// for s and lost. s carries no file contents or env values (the sandbox has them); its
	// Digest must be the one the sandbox was opened with. When pending is not nil, that worker
	// had sent, or was about to send, the cell pending.Cell: AdoptSession waits, at most until
	// pending.Deadline, for that cell's end in what the sandbox reported, and returns its result
	// (limits applied; Digest left to the caller); a nil result says the cell's end never came
	// by then (it was never sent, or its outcome is unknown), and the Sandbox it returns then
	// refuses every cell with a SandboxLost (its state is unknown). Otherwise that Sandbox runs
	// the session's further cells. Errors: a SandboxLost when the sandbox is gone or is not one this
	// backend can take over (another deployment's, another digest's). A session with egress
	// is taken over: the pending cell's result says its egress report was lost with the dead
	// worker's proxy (EgressReport.Lost).
	AdoptSession(ctx context.Context, id string, s CheckedSession, pending *PendingCell) (Sandbox, *Result, error)
}

// PendingCell is the cell a lost worker had sent to a session's sandbox and not collected.
type PendingCell struct {
	// Cell is the cell as its host checked it; Code may be empty (spools keep no code).
	Cell     Cell
	Limits   Limits
	Deadline time.Time
}

// Sandbox is a session's live sandbox. Its methods are never called concurrently for one sandbox.
type Sandbox interface {
	// ID names the sandbox (a container id) in logs, labels and the reaper.
	ID() string
	// RunCell runs one cell and returns its result: python cells in one interpreter that lives
	// across cells (a fresh one, with StateReset set, after a cell killed or wedged it), sh cells
	// in a fresh shell each, /work kept for both; Files are the files this cell created or
	// changed. A timeout is a result. An error means the cell's outcome is unknown or the
	// sandbox is gone: a SandboxLost when it is.
	RunCell(ctx context.Context, cell Cell, limits Limits) (Result, error)
	// Done is closed when the sandbox ended by itself (its container exited or was removed).
	Done() <-chan struct{}
	// Close removes the sandbox; it is safe to call more than once.
	Close(ctx context.Context) error
}

// TypeSandboxLost is the Temporal type name of a SandboxLost error.
const TypeSandboxLost = "SandboxLost"

// SandboxLost reports that a session's sandbox is gone (its host was lost, its container died or
// was removed): the state of the session is gone with it, and no cell is run again elsewhere.
// It is never retried.
type SandboxLost struct {
	Msg string
}

func (e *SandboxLost) Error() string {
	if e.Msg == "" {
		return "sandbox lost: the sandbox was lost; its state is gone"
	}
	return "sandbox lost: the sandbox was lost; its state is gone: " + e.Msg
}

// CheckSession applies the policy to a session request for the named backend: the same checks as
// a run's settings (files, env, limits, network, egress, secrets), languages the policy offers,
// and lifetime, idle timeout and cell count within the session caps. It returns the checked
// session with its digest, or a ToolUsageError or ConfigError.
func (p Policy) CheckSession(req SessionRequest, backend string) (CheckedSession, error) {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return CheckedSession{}, err
	}
	langs := slices.Clone(req.Languages)
	if len(langs) == 0 {
		langs = slices.Clone(p.Languages)
	}
	slices.Sort(langs)
	langs = slices.Compact(langs)
	if err := CheckConversation(req.Conversation); err != nil {
		return CheckedSession{}, err
	}
	settings, sensitive, err := p.checkSettings(req.Settings, backend)
	if err != nil {
		return CheckedSession{}, err
	}
	s := CheckedSession{
		Languages: langs, CheckedSettings: settings, SensitiveEnv: sensitive,
		Lifetime:     cmp.Or(req.Lifetime, p.MaxSessionLifetime),
		IdleTimeout:  cmp.Or(req.IdleTimeout, p.MaxSessionIdle),
		MaxCells:     cmp.Or(req.MaxCells, p.MaxSessionCells),
		Conversation: req.Conversation,
	}
	if err := p.checkSession(&s); err != nil {
		return CheckedSession{}, err
	}
	s.Digest = SessionDigest(&s)
	return s, nil
}

// RecheckSession applies the policy again to a checked session (perhaps checked by another
// worker) and verifies its digest. The sandbox host calls it before creating the sandbox.
func (p Policy) RecheckSession(s CheckedSession) error {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return err
	}
	if !slices.IsSorted(s.Languages) {
		return toolUsagef("languages must be sorted")
	}
	if err := p.checkRecorded(s.Files, s.Env, s.Limits); err != nil {
		return err
	}
	if err := p.checkSession(&s); err != nil {
		return err
	}
	if got := SessionDigest(&s); got != s.Digest {
		return configf("session digest mismatch: the settings encode to %s but carry %s", got, s.Digest)
	}
	return nil
}

// checkSession applies every check of a run's settings to s, with each of its languages, and the
// session caps.
func (p Policy) checkSession(s *CheckedSession) error {
	if len(s.Languages) == 0 {
		return toolUsagef("a session needs at least one language")
	}
	for i, l := range s.Languages {
		if i > 0 && l == s.Languages[i-1] {
			return toolUsagef("language %q is given twice", l)
		}
		// A placeholder cell carries every setting through the run checks (network, files and
		// their sources, env) for each language; the cells' code is checked as it comes.
		c := s.cellChecked(Cell{Language: l, Code: "pass"})
		if err := p.checkContent(&c); err != nil {
			return err
		}
		s.Egress = c.Egress // canonical form
	}
	switch {
	case s.Lifetime <= 0 || s.Lifetime > p.MaxSessionLifetime:
		return configf("session lifetime %s is not within (0, %s], the policy's cap", s.Lifetime, p.MaxSessionLifetime)
	case s.IdleTimeout <= 0 || s.IdleTimeout > p.MaxSessionIdle:
		return configf("session idle timeout %s is not within (0, %s], the policy's cap", s.IdleTimeout, p.MaxSessionIdle)
	case s.MaxCells <= 0 || s.MaxCells > p.MaxSessionCells:
		return configf("session max cells %d is not within [1, %d], the policy's cap", s.MaxCells, p.MaxSessionCells)
	}
	return nil
}

// cellChecked is the run-shaped request of one cell of s: s's settings with the cell's language
// and code (Owner and Digest unset).
func (s *CheckedSession) cellChecked(cell Cell) Checked {
	return Checked{
		Language: cell.Language, Code: cell.Code, CheckedSettings: s.CheckedSettings,
		SensitiveEnv: s.SensitiveEnv, Owner: s.Owner,
	}
}

// CellChecked is the run-shaped request of one cell of s, with its digest: what a backend's
// checks (Recheck, the Python flags, the refused input names) read. Session backends run the
// cell in the session's sandbox, not as a run.
func (s *CheckedSession) CellChecked(cell Cell) Checked {
	c := s.cellChecked(cell)
	c.Digest = Digest(&c)
	return c
}

// CheckCell applies the policy to a cell of session s: a language the session offers (the
// session's only one when language is empty, python when it offers both), code that passes
// every check a run's code passes, and packages (pkgs, sorted by name, optional) that a policy
// offering packages takes and that only add to the session's set (AddCellPackages). It returns
// the cell with its index and code digest.
func (p Policy) CheckCell(s CheckedSession, index int, language, code string, pkgs ...Package) (Cell, error) {
	p = p.WithDefaults()
	if language == "" {
		language = s.Languages[0]
		if slices.Contains(s.Languages, Python) {
			language = Python
		}
	}
	if !slices.Contains(s.Languages, language) {
		return Cell{}, toolUsagef("language %q is not offered in this session (offered: %s)", language, strings.Join(s.Languages, ", "))
	}
	if index < 1 {
		return Cell{}, toolUsagef("cell index %d: cells are numbered from 1", index)
	}
	if len(pkgs) > 0 {
		if err := p.checkPackages(pkgs); err != nil {
			return Cell{}, err
		}
		if _, err := AddCellPackages(s.Packages, pkgs); err != nil {
			return Cell{}, err
		}
	}
	cell := Cell{Index: index, Language: language, Code: code, CodeDigest: CellCodeDigest(language, code, pkgs...)}
	if len(pkgs) > 0 {
		cell.Packages = pkgs
	}
	c := s.cellChecked(cell)
	if err := p.checkContent(&c); err != nil {
		return Cell{}, err
	}
	return cell, nil
}

// Summary returns what a reviewer reads of the session's settings.
func (s *CheckedSession) Summary() SessionSummary {
	sum := SessionSummary{
		Languages: s.Languages, Limits: s.Limits, Network: s.Network, Egress: s.Egress, Secrets: s.Secrets,
		Packages: s.Packages,
		Backend:  s.Backend, Image: s.Image, Lifetime: s.Lifetime, IdleTimeout: s.IdleTimeout, MaxCells: s.MaxCells,
		Digest: s.Digest, Metadata: s.Metadata, SensitiveEnv: s.SensitiveEnv, Conversation: s.Conversation,
	}
	sum.Files, sum.EnvNames, sum.Warnings = s.inputsShown()
	return sum
}

// Digest domain strings: each is the first thing hashed, so no session, cell, chain or result
// digest can equal another kind's, or a run's (DigestVersion).
const (
	SessionDigestVersion = "sandboxflow/session/v1"
	CellCodeDigestDomain = "sandboxflow/cell-code/v1"
	CellDigestDomain     = "sandboxflow/cell/v1"
	ChainDomain          = "sandboxflow/chain/v1"
	ResultDigestDomain   = "sandboxflow/result/v1"
)

// SessionCanonicalEncoding encodes everything that decides how a session's cells run: the
// version, the languages, then a run's canonical encoding of the settings (CanonicalEncoding with
// no code), then lifetime, idle timeout and max cells.
func SessionCanonicalEncoding(s *CheckedSession) []byte {
	c := s.cellChecked(Cell{Language: strings.Join(s.Languages, ",")})
	b := appendString(nil, SessionDigestVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(len(s.Languages)))
	for _, l := range s.Languages {
		b = appendString(b, l)
	}
	b = append(b, CanonicalEncoding(&c)...)
	for _, v := range []int64{int64(s.Lifetime), int64(s.IdleTimeout), int64(s.MaxCells)} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// SessionDigest is "sha256:<hex>" over SessionCanonicalEncoding(s): the settings digest.
func SessionDigest(s *CheckedSession) string { return sum(SessionCanonicalEncoding(s)) }

// CellCodeDigest is "sha256:<hex>" over a cell's language and code, then the packages it
// brings when it brings any (appended as a run's are, so the digest of a cell without packages
// is what it always was).
func CellCodeDigest(language, code string, pkgs ...Package) string {
	return sum(appendPackagesDigest(appendString(appendString(appendString(nil, CellCodeDigestDomain), language), code), pkgs))
}

// ChainStart is the chain before a session's first cell: it binds the settings digest.
func ChainStart(settingsDigest string) string {
	return sum(appendString(appendString(nil, ChainDomain), settingsDigest))
}

// ChainNext is the chain after a cell that ran: the chain before it, the cell's digest (which
// binds its index and code) and the digest of its result (what it printed, its exit, its files).
// A cell that did not run (denied, expired, refused) leaves the chain as it was.
func ChainNext(chain, cellDigest, resultDigest string) string {
	b := appendString(nil, ChainDomain)
	for _, s := range []string{chain, cellDigest, resultDigest} {
		b = appendString(b, s)
	}
	return sum(b)
}

// CellDigest is the digest a reviewer approves for a cell: it binds the session's settings
// digest, the cell's index and code digest, and the chain over every earlier cell that ran.
// It is the digest field of the cell's statement.
func CellDigest(settingsDigest string, index int, codeDigest, chain string) string {
	b := appendString(nil, CellDigestDomain)
	b = appendString(b, settingsDigest)
	b = appendString(b, strconv.Itoa(index))
	b = appendString(b, codeDigest)
	b = appendString(b, chain)
	return sum(b)
}

// ResultDigest is "sha256:<hex>" over what a cell's result says it did: outcome, exit code,
// signal, stdout and stderr (as the result's JSON carries them: text, invalid bytes replaced,
// binary and truncation flags), produced files (names, sizes, bytes), whether
// files were left out, and whether the interpreter was started afresh. Duration, egress, image,
// approval and backend fields are not part of it. It is the same for a result read back from
// JSON.
func ResultDigest(r Result) string {
	b := appendString(nil, ResultDigestDomain)
	b = appendString(b, r.Outcome.String())
	b = binary.BigEndian.AppendUint64(b, uint64(int64(r.ExitCode)))
	b = binary.BigEndian.AppendUint64(b, uint64(int64(r.Signal)))
	// As the result's JSON carries them (and so the workflow's history): text, invalid bytes
	// replaced, with the binary flags set.
	stdout, stdoutBinary := textOf(r.Stdout, r.StdoutBinary)
	stderr, stderrBinary := textOf(r.Stderr, r.StderrBinary)
	b = appendString(b, stdout)
	b = appendString(b, stderr)
	flags := []bool{stdoutBinary, stderrBinary, r.TimedOut, r.StdoutTruncated, r.StderrTruncated, r.FilesTruncated, r.StateReset}
	for _, f := range flags {
		if f {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	b = binary.BigEndian.AppendUint64(b, uint64(len(r.Files)))
	for _, f := range r.Files {
		b = appendString(b, f.Name)
		b = binary.BigEndian.AppendUint64(b, uint64(f.Size))
		b = appendBytes(b, f.Content)
	}
	return sum(b)
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return DigestPrefix + hex.EncodeToString(h[:])
}

// String names the cell in messages.
func (c Cell) String() string {
	return fmt.Sprintf("cell %d (%s, %s)", c.Index, c.Language, c.CodeDigest)
}
