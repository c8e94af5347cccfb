package guard

import (
	"sort"
	"time"

	"github.com/sandboxflow/sandboxflow/pysource"
)

// Languages the backends offer.
const (
	Python = "python"
	Shell  = "sh"
)

// Request is what an orchestrator asks to run. Zero limits mean "the policy's default"; a request
// can narrow the policy, never widen it.
type Request struct {
	// Code is the program text. Required.
	Code string `json:"code"`
	// Language is "python" or "sh". Optional: defaults to "python".
	Language string `json:"language,omitempty"`
	Settings
	// Conversation names the orchestrator's conversation (task, thread) this run belongs to, so
	// that reviewers see what changed since its previous run (CheckConversation says what it may
	// be). Optional. It is a reading aid, not part of the digest: it changes nothing that runs,
	// and any orchestrator may name any conversation.
	Conversation string `json:"conversation,omitempty"`
}

// Settings are what a run and a session ask for alike, besides their code: the inputs, the
// limits, the network and who asked. In a SessionRequest they hold for every cell. Request and
// SessionRequest embed them, so their fields stand in each request's JSON as its own.
type Settings struct {
	// Files are input files written into the working folder before the code runs, name → bytes.
	Files map[string][]byte `json:"files,omitempty"`
	// Env are environment variables the code sees, name → value.
	Env map[string]string `json:"env,omitempty"`
	// Limits are the requested limits; each zero field takes the policy's default. A session's
	// bound each cell (its timeout, output and file caps); the sandbox's memory, CPUs and pids
	// are the backend's, for the whole session.
	Limits Limits `json:"limits"`
	// Network asks for an open network (the Docker backend's configured network, with open
	// egress); a worker without --allow-open-network refuses it with a ConfigError. Prefer Egress.
	Network bool `json:"network,omitempty"`
	// Egress lists the hosts the code may reach through the worker's filtering proxy: each
	// "host[:port]", "*.domain[:port]", an IP or a CIDR (ports default to 80 and 443). It must stay
	// within the worker's --egress-allow. Optional: empty means no network at all.
	Egress []string `json:"egress,omitempty"`
	// Secrets names worker secrets (never their values) that the proxy adds as headers to
	// requests for their hosts. Optional.
	Secrets []string `json:"secrets,omitempty"`
	// Packages is a Python lock in pip's hash-checking format (ParseLock): the wheels the
	// sandbox host installs, from the operator's index, before the code runs. Optional.
	Packages string `json:"packages,omitempty"`
	// CaptureContent lets events carry code, output, env values and file contents.
	CaptureContent bool     `json:"capture_content,omitempty"`
	Metadata       Metadata `json:"metadata"` // who asked: recorded in history and events, changes nothing that runs
}

// Metadata says who asked for a run. It is recorded in history and events and is not part of the
// digest.
type Metadata struct {
	Agent       string `json:"agent,omitempty"`
	Session     string `json:"session,omitempty"`
	ToolCallID  string `json:"tool_call_id,omitempty"`
	RequestedBy string `json:"requested_by,omitempty"`
}

// Limits bound one run. In a Request a zero field means the policy's default; in a Checked request
// every field is set.
type Limits struct {
	// Timeout is how long the code may run.
	Timeout time.Duration `json:"timeout"`
	// MaxStdoutBytes and MaxStderrBytes cap each stream kept; the rest is read and dropped.
	MaxStdoutBytes int64 `json:"max_stdout_bytes"`
	MaxStderrBytes int64 `json:"max_stderr_bytes"`
	// MaxFiles caps how many produced files are returned.
	MaxFiles int `json:"max_files"`
	// MaxFileBytes caps one produced file; a larger one is dropped.
	MaxFileBytes int64 `json:"max_file_bytes"`
	// MaxTotalFileBytes caps all produced files together.
	MaxTotalFileBytes int64 `json:"max_total_file_bytes"`
	// MaxOutputs, MaxOutputBytes and MaxTotalOutputBytes cap what the code shows (Result.Outputs):
	// the policy's, set by the check whatever a request says; not part of the digest.
	MaxOutputs          int   `json:"max_outputs,omitempty"`
	MaxOutputBytes      int64 `json:"max_output_bytes,omitempty"`
	MaxTotalOutputBytes int64 `json:"max_total_output_bytes,omitempty"`
}

// InputFile is one input file of a checked request.
type InputFile struct {
	Name    string `json:"name"`
	Content []byte `json:"content"`
}

// InputNames returns the names of files, in their order (pysource.Flags reads them).
func InputNames(files []InputFile) []string {
	names := make([]string, 0, len(files))
	for _, f := range files {
		names = append(names, f.Name)
	}
	return names
}

// EnvVar is one environment variable of a checked request.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Owner names the Temporal run a sandbox belongs to. Backends put it on what they create (container
// labels) so that orphans can be found. It is not part of the digest.
type Owner struct {
	WorkflowID string `json:"workflow_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	ActivityID string `json:"activity_id,omitempty"`
}

// Checked is a request that passed every check of a policy, with its effective limits and its
// digest. Backends receive a Checked request; Recheck checks one again before it runs.
type Checked struct {
	Language string `json:"language"` // always set (python when the request named none)
	Code     string `json:"code"`     // valid UTF-8, within the policy's MaxCodeBytes
	CheckedSettings
	Conversation string `json:"conversation,omitempty"` // as requested (checked); not part of the digest
	// SensitiveEnv names the env vars, of Env, whose values the policy marks sensitive
	// (Policy.SensitiveEnv): views show them as "sensitive, N bytes". Sorted; not part of the
	// digest (it changes what is shown, not what runs).
	SensitiveEnv []string `json:"sensitive_env,omitempty"`
	// Digest is "sha256:<hex>" over the canonical encoding of what decides what runs.
	Digest string `json:"digest"`
	// Owner is filled in by the activity that runs the request.
	Owner Owner `json:"owner"`
}

// CheckedSettings are Settings that passed the policy, with the backend they were checked for:
// what a checked run and a checked session hold alike. Checked and CheckedSession embed them, so
// their fields stand in each one's JSON as its own.
type CheckedSettings struct {
	Files    []InputFile `json:"files,omitempty"`    // sorted by name
	Env      []EnvVar    `json:"env,omitempty"`      // sorted by name, each name one the policy allows
	Limits   Limits      `json:"limits"`             // every field set: the request's, or the policy's default
	Network  bool        `json:"network"`            // an open network, which the policy allowed
	Egress   []string    `json:"egress,omitempty"`   // canonical patterns, sorted, within the policy's EgressAllow
	Secrets  []string    `json:"secrets,omitempty"`  // worker secret names (never values), sorted
	Packages []Package   `json:"packages,omitempty"` // the lock, sorted by name (ParseLock)
	Backend  string      `json:"backend"`            // the backend that runs it
	// Image is the ID ("sha256:...") of the image the backend would run the code in, as the
	// checking worker's backend resolved it at the check (an ImageNamer's); part of the digest
	// when set, and a sandbox host whose backend would run another image refuses the run
	// (RefusedImage). Empty for backends that run no image, and for runs checked before it.
	Image          string   `json:"image,omitempty"`
	CaptureContent bool     `json:"capture_content,omitempty"` // as requested; not part of the digest
	Metadata       Metadata `json:"metadata"`                  // as requested; not part of the digest
}

// EnvMap returns the env as a map.
func (c *Checked) EnvMap() map[string]string {
	m := make(map[string]string, len(c.Env))
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

// Summary is what a reviewer needs to decide, without file contents or env values (a reviewer's
// tool reads those from the run's start input, which the digest binds).
type Summary struct {
	Language  string        `json:"language"`
	Code      string        `json:"code"`
	CodeBytes int           `json:"code_bytes"`          // the code's length in bytes
	Files     []FileSummary `json:"files,omitempty"`     // names and sizes only
	EnvNames  []string      `json:"env_names,omitempty"` // names only: the values are in the start input
	// SensitiveEnv names the env vars whose values views show as "sensitive, N bytes".
	SensitiveEnv []string `json:"sensitive_env,omitempty"`
	Limits       Limits   `json:"limits"`
	Network      bool     `json:"network"`
	Egress       []string `json:"egress,omitempty"`  // the hosts the code may reach
	Secrets      []string `json:"secrets,omitempty"` // secret names the proxy adds for their hosts
	// Packages are the lock's packages, with their versions and hashes: what installs.
	Packages []Package `json:"packages,omitempty"`
	Backend  string    `json:"backend"`
	// Image is the checked request's Image: the ID of the image the code runs in, when the
	// backend runs one.
	Image    string   `json:"image,omitempty"`
	Digest   string   `json:"digest"` // what an approval must name
	Metadata Metadata `json:"metadata"`
	// Conversation is the request's conversation: a label the orchestrator chose, never a
	// reviewer's proof of anything.
	Conversation string `json:"conversation,omitempty"`
	// SuspiciousCharacters lists invisible and direction-changing characters in the code, which
	// can make code read differently from how it runs; every view of the code shows them.
	SuspiciousCharacters []pysource.Suspicious `json:"suspicious_characters,omitempty"`
	// Warnings lists the input files the interpreter may run without the code calling them
	// (pysource.StartupWarnings); every view shows them.
	Warnings []pysource.StartupWarning `json:"warnings,omitempty"`
}

// FileSummary is an input file's name and size.
type FileSummary struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// Summary returns what a reviewer reads before deciding.
func (c *Checked) Summary() Summary {
	s := Summary{
		Language:  c.Language,
		Code:      c.Code,
		CodeBytes: len(c.Code),
		Limits:    c.Limits,
		Network:   c.Network,
		Egress:    c.Egress,
		Secrets:   c.Secrets,
		Packages:  c.Packages,
		Backend:   c.Backend,
		Image:     c.Image,
		Digest:    c.Digest,
		Metadata:  c.Metadata,

		Conversation:         c.Conversation,
		SuspiciousCharacters: pysource.SuspiciousCharacters(c.Code),
		SensitiveEnv:         c.SensitiveEnv,
	}
	s.Files, s.EnvNames, s.Warnings = c.inputsShown()
	return s
}

// inputsShown is what a run's or a session's summary shows of its input files and env: the
// files' names and sizes, the env's names, and the start-up warnings the file names raise.
func (c *CheckedSettings) inputsShown() ([]FileSummary, []string, []pysource.StartupWarning) {
	var (
		files    []FileSummary
		envNames []string
	)
	names := make([]string, 0, len(c.Files))
	for _, f := range c.Files {
		files = append(files, FileSummary{Name: f.Name, Size: int64(len(f.Content))})
		names = append(names, f.Name)
	}
	for _, e := range c.Env {
		envNames = append(envNames, e.Name)
	}
	return files, envNames, pysource.StartupWarnings(names)
}

// File is one file the code produced in its working folder.
type File struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	Content []byte `json:"content,omitempty"`
}

// Result is the outcome of a run. A timeout is a result (TimedOut true, ExitCode -1), not an error.
// Outcome says how it ended; OK and TimedOut are derived from it by the guard wrapper.
type Result struct {
	Outcome         Outcome `json:"outcome"`          // how the run ended, settled by the guard wrapper
	OK              bool    `json:"ok"`               // Outcome is succeeded
	ExitCode        int     `json:"exit_code"`        // the code's exit status; -1 when it was stopped at its timeout
	TimedOut        bool    `json:"timed_out"`        // Outcome is timed_out
	Stdout          []byte  `json:"stdout"`           // at most Limits.MaxStdoutBytes
	Stderr          []byte  `json:"stderr"`           // at most Limits.MaxStderrBytes
	StdoutTruncated bool    `json:"stdout_truncated"` // the code wrote more; the rest was read and dropped
	StderrTruncated bool    `json:"stderr_truncated"` // likewise for stderr
	// StdoutBinary and StderrBinary say that the stream was not valid UTF-8: in JSON, where the
	// streams are text, the invalid bytes were replaced by U+FFFD.
	StdoutBinary   bool   `json:"stdout_binary,omitempty"`
	StderrBinary   bool   `json:"stderr_binary,omitempty"`
	Files          []File `json:"files,omitempty"` // produced files, within the limits on files
	FilesTruncated bool   `json:"files_truncated"` // a produced file was left out by those limits
	// Outputs are what the code showed (figures, displayed values, a cell's last expression), in
	// order, within the output limits; OutputsTruncated says one was dropped or left out.
	Outputs          []Output      `json:"outputs,omitempty"`
	OutputsTruncated bool          `json:"outputs_truncated,omitempty"`
	Duration         time.Duration `json:"duration"` // how long the run took, measured by the guard wrapper
	// Signal is the signal that ended the code's process, if one did (ExitCode is then
	// 128+Signal), as the backend measured it.
	Signal int `json:"signal,omitempty"`
	// ImageID is the ID ("sha256:...") of the image the code ran in, for backends that run
	// images.
	ImageID    string `json:"image_id,omitempty"`
	ApprovalID string `json:"approval_id,omitempty"` // the approval this run used, once
	Reviewer   string `json:"reviewer,omitempty"`    // who gave that approval
	Digest     string `json:"digest,omitempty"`      // the digest of the request that ran
	Backend    string `json:"backend,omitempty"`     // the backend that ran it
	// Egress is the audit of every connection attempt through the egress proxy, when the request
	// asked for egress.
	Egress *EgressReport `json:"egress,omitempty"`
	// Packages is what the sandbox host installed for the request's lock, when it has one.
	Packages *PackagesReport `json:"packages,omitempty"`
	// StateReset says, for a session's cell, that the cell ran in a fresh interpreter because an
	// earlier cell killed or wedged the last one: variables and imports are gone, /work is kept.
	StateReset bool `json:"state_reset,omitempty"`
	// ThreadsAlive says, for a session's Python interpreter, how many threads besides its
	// driver's the sandbox's supervisor counted in it when the cell ended (the Docker backend
	// measures it from outside the interpreter; 0 when none, or not measured): threads an
	// earlier cell or this one started run on into the next cells, where they can print, change
	// state, and end a cell before its code did.
	ThreadsAlive int `json:"threads_alive,omitempty"`
	// ExitReportedBy says who gave ExitCode and the end of the code: "" when the sandbox host
	// measured them (a process's exit or signal, a timeout, a cancel), ReportedByInterpreter
	// when a session's Python interpreter reported its cell's end and status, which every thread
	// in that interpreter can do too (a thread left by an earlier cell can end a cell early, as
	// succeeded). The receipt signs which.
	ExitReportedBy string `json:"exit_reported_by,omitempty"`
	// Receipt is the sandbox host's signed account of the run (package receipt): what ran,
	// where, and the hashes of what it produced. Absent from results of hosts without a key.
	Receipt *Receipt `json:"receipt,omitempty"`
	// Measured is what the backend measured for the receipt; it stays on the host (no JSON).
	Measured *Measured `json:"-"`
	// Cancelled says who cancelled the run and why, on a run whose Outcome is cancelled: the
	// workflow sets it from the cancel request it accepted (the sandbox host only stopped the
	// code). Nil on a run cancelled through Temporal's own cancellation, which names no one.
	Cancelled *Cancellation `json:"cancelled,omitempty"`
	// Approvals lists every approval the run used, as the sandbox host verified them: more
	// than one when the policy asks for a quorum. The first is ApprovalID and Reviewer.
	Approvals []Approval `json:"approvals,omitempty"`
	// Edit, when set, says the code that ran is a reviewer's edit of the code the run was
	// started with: who edited it and both digests.
	Edit *Edit `json:"edit,omitempty"`
	// Recovered, when set, says the result reached its run late: the server had timed out the
	// sandbox activity (a cut connection, a late heartbeat) while its host still ran the code,
	// and the host delivered the result afterwards (contract.SignalLateResult). The workflow
	// took it only because its receipt verified against the hosts the check recorded, for this
	// run, its held claim and the approvals it accepted. Nil for a result that came in time.
	Recovered *Recovered `json:"recovered,omitempty"`
	// Usage is what the run or cell cost (CPU time, peak memory, wall time, files, egress
	// bytes), measured by the sandbox host; nil when its backend measured nothing. The receipt
	// signs it.
	Usage *Usage `json:"usage,omitempty"`
}

// ReportedByInterpreter is Result.ExitReportedBy of a cell whose end and exit status its
// session's interpreter reported.
const ReportedByInterpreter = "interpreter"

// Recovered is how a late result reached its run.
type Recovered struct {
	// At is the workflow's time when it took the result.
	At time.Time `json:"at"`
	// How is RecoveredLateResult.
	How string `json:"how"`
	// ActivityID is the sandbox activity the server timed out, whose result this is; Timeout is
	// the kind of timeout that ended it ("heartbeat", "start_to_close").
	ActivityID string `json:"activity_id"`
	Timeout    string `json:"timeout"`
}

// RecoveredLateResult is Recovered.How of a result its host delivered after the server timed out
// its activity.
const RecoveredLateResult = "late_result"

// Cancellation is who cancelled a run, as the cancel request named them, why, and when the
// workflow accepted it.
type Cancellation struct {
	By     string    `json:"by"`
	Reason string    `json:"reason,omitempty"`
	Time   time.Time `json:"time"`
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
