package guard

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Policy defaults. Zero fields of a Policy take these values in WithDefaults.
const (
	DefaultMaxCodeBytes = 64 << 10
	DefaultTimeout      = 30 * time.Second
	DefaultMaxTimeout   = 300 * time.Second
	// MaxTimeoutCap is the longest max timeout a policy may set: a run may take hours (a
	// training loop, a crawl, a test suite); a lost sandbox host is noticed within the sandbox
	// activity's heartbeat timeout whatever the run's timeout.
	MaxTimeoutCap              = 24 * time.Hour
	DefaultGrace               = 5 * time.Second
	DefaultMaxStdoutBytes      = 64_000
	DefaultMaxStderrBytes      = 64_000
	DefaultMaxFiles            = 32
	DefaultMaxFileBytes        = 256 << 10
	DefaultMaxTotalFileBytes   = 512 << 10
	DefaultMaxOutputs          = 16
	DefaultMaxOutputBytes      = 384 << 10
	DefaultMaxTotalOutputBytes = 512 << 10
	DefaultMaxInputFiles       = 32
	DefaultMaxInputBytes       = 512 << 10
	DefaultMaxEnvVars          = 64
	DefaultMaxEnvBytes         = 32 << 10
	DefaultApprovalTimeout     = 24 * time.Hour
	DefaultEgressMaxBytes      = 64 << 20
	DefaultEgressMaxConns      = 64
	DefaultMaxFileNameBytes    = 255
	DefaultMaxFileNameDepth    = 8
	temporalPayloadLimitBytes  = 2 << 20
)

// Payload budgets. Temporal refuses a payload over 2 MiB. A policy whose caps could make one result
// (or one request) larger than these is refused by Validate: the raw bytes the caps let through must
// stay within about 1.5 MiB, and their worst-case JSON encoding (base64, escaped names, field names)
// within MaxEncodedPayloadBytes, which leaves room for the rest of the payload and for encryption.
const (
	MaxRawPayloadBytes     = 1536 << 10
	MaxEncodedPayloadBytes = 1_800_000
)

// DefaultDeniedEnv are env names a request may never set: they change how the loader, the
// interpreter or the shell start, before the code's first line, or make a program the code starts
// on purpose load code from a file they name (an input file the reviewer was shown as data or
// not at all):
//   - OPENSSL_CONF, OPENSSL_MODULES, OPENSSL_ENGINES and OPENSSL_CONF_INCLUDE: OpenSSL's
//     configuration loads providers and engines by path on `import hashlib` or `ssl`;
//     GCONV_PATH: glibc's iconv modules. Both native code.
//   - PERL5OPT, PERL5LIB, PERLLIB, PERL5DB, RUBYOPT, RUBYLIB, NODE_OPTIONS and NODE_PATH: the
//     options and module paths of other interpreters (PERL5OPT=-MStartup PERL5LIB=. makes a
//     one-line perl run Startup.pm first); TCL_LIBRARY, TK_LIBRARY and TCLLIBPATH: tkinter's Tcl
//     runs init.tcl from there.
//   - LOCPATH and GLIBC_TUNABLES: glibc's locale files (parsed data that sets the codeset Python
//     decodes with) and the loader's tunables, like LD_*.
//   - CDPATH: where the shell's `cd dir` goes; PS1, PS2 and PROMPT_COMMAND: what an interactive
//     shell the code starts (sh -i) runs at each prompt (dash expands $(...) in PS1).
//   - BROWSER: the command Python's webbrowser runs.
var DefaultDeniedEnv = []string{
	"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "LD_BIND_NOW", "LD_DEBUG", "LD_PROFILE",
	"PYTHONSTARTUP", "PYTHONPATH", "PYTHONHOME", "PYTHONINSPECT", "PYTHONUSERBASE",
	"PYTHONSAFEPATH", "PYTHONNOUSERSITE", "PYTHONEXECUTABLE", "PYTHONPLATLIBDIR",
	"PYTHONUNBUFFERED", "PYTHONBREAKPOINT", "PYTHONWARNINGS", "PYTHONDEVMODE",
	"BASH_ENV", "ENV", "IFS", "PS4", "SHELLOPTS", "BASHOPTS", "PATH", "HOME", "TMPDIR",
	"OPENSSL_CONF", "OPENSSL_MODULES", "OPENSSL_ENGINES", "OPENSSL_CONF_INCLUDE", "GCONV_PATH",
	"PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH",
	"TCL_LIBRARY", "TK_LIBRARY", "TCLLIBPATH",
	"LOCPATH", "GLIBC_TUNABLES",
	"CDPATH", "PS1", "PS2", "PROMPT_COMMAND", "BROWSER",
}

// Policy is the operator's: it is configured on the worker and never taken from a request. A zero
// field takes its default (see WithDefaults); call Validate once at start-up.
type Policy struct {
	// Languages offered. Optional: defaults to ["python"]. The backends offer "python" and "sh".
	Languages []string `json:"languages"`
	// MaxCodeBytes caps the code. Optional: defaults to 64 KiB.
	MaxCodeBytes int `json:"max_code_bytes"`
	// DefaultTimeout is used when a request sets none. Optional: defaults to 30 s.
	DefaultTimeout time.Duration `json:"default_timeout"`
	// MaxTimeout is the longest timeout a request may ask for, at most MaxTimeoutCap (24 h).
	// Optional: defaults to 300 s.
	MaxTimeout time.Duration `json:"max_timeout"`
	// Grace is added to the timeout for the backstop that cancels a backend that has not returned.
	// Optional: defaults to 5 s.
	Grace time.Duration `json:"grace"`
	// MaxStdoutBytes and MaxStderrBytes cap each stream. Optional: default to 64,000 each.
	MaxStdoutBytes int64 `json:"max_stdout_bytes"`
	MaxStderrBytes int64 `json:"max_stderr_bytes"`
	// MaxFiles, MaxFileBytes and MaxTotalFileBytes cap produced files. Optional: default to 32,
	// 256 KiB and 512 KiB.
	MaxFiles          int   `json:"max_files"`
	MaxFileBytes      int64 `json:"max_file_bytes"`
	MaxTotalFileBytes int64 `json:"max_total_file_bytes"`
	// MaxOutputs, MaxOutputBytes and MaxTotalOutputBytes cap what the code shows (figures,
	// displayed values): how many, one, and all together. Optional: default to 16, 384 KiB and
	// 512 KiB, or less when the other caps leave less of a result's payload budget (outputRoom).
	MaxOutputs          int   `json:"max_outputs"`
	MaxOutputBytes      int64 `json:"max_output_bytes"`
	MaxTotalOutputBytes int64 `json:"max_total_output_bytes"`
	// MaxInputFiles and MaxInputBytes cap input files (count, and all bytes together). Optional:
	// default to 32 and 512 KiB.
	MaxInputFiles int   `json:"max_input_files"`
	MaxInputBytes int64 `json:"max_input_bytes"`
	// MaxEnvVars and MaxEnvBytes cap the env (count, and names plus values together). Optional:
	// default to 64 and 32 KiB.
	MaxEnvVars  int `json:"max_env_vars"`
	MaxEnvBytes int `json:"max_env_bytes"`
	// AllowOpenNetwork lets a request ask for an open network (network=true: open egress, the
	// host's services and cloud metadata included). Optional: defaults to false; prefer Egress.
	AllowOpenNetwork bool `json:"allow_open_network"`
	// EgressAllow lists the egress patterns a request may ask for (guard.ParseEgressPattern).
	// Optional: empty means no egress is offered.
	EgressAllow []string `json:"egress_allow,omitempty"`
	// EgressPrivateOK lists CIDRs that egress may reach although they are private, loopback or
	// link-local. Optional: empty.
	EgressPrivateOK []string `json:"egress_private_ok,omitempty"`
	// EgressMaxBytes caps a run's egress bytes (in and out). Optional: defaults to 64 MiB.
	EgressMaxBytes int64 `json:"egress_max_bytes"`
	// EgressMaxConns caps a run's egress connection attempts. Optional: defaults to 64.
	EgressMaxConns int `json:"egress_max_conns"`
	// Packages says the workers install packages a request's lock names (worker
	// --package-index). Optional: defaults to false, refusing every request with packages.
	Packages bool `json:"packages,omitempty"`
	// SecretNames lists the names of the worker's secrets a request may name. Optional: empty.
	SecretNames []string `json:"secret_names,omitempty"`
	// AllowedEnv, when not empty, lists the only env names a request may set. Optional: empty means
	// any plain name that DeniedEnv does not list.
	AllowedEnv []string `json:"allowed_env,omitempty"`
	// DeniedEnv lists env names a request may never set. Optional: defaults to DefaultDeniedEnv.
	// Names starting with LD_, DYLD_, SANDBOXFLOW_ or PYTHON are always denied.
	DeniedEnv []string `json:"denied_env,omitempty"`
	// AllowMixedIndentation lets Python code and Python input files mix tabs and spaces in their
	// indentation (pysource.CheckIndentation). Optional: defaults to false, refusing them:
	// Python's tab stops are 8 columns apart and a reader's may not be, so such a line can run
	// outside the block it is drawn in.
	AllowMixedIndentation bool `json:"allow_mixed_indentation,omitempty"`
	// SensitiveEnv lists env names whose values the views show as "sensitive, N bytes" rather
	// than as text (a reviewer still sees that the value is there, and how long). Names match
	// ignoring case. Optional: empty, every value is shown.
	SensitiveEnv []string `json:"sensitive_env,omitempty"`
	// ApprovalTimeout is how long a run, or a session's cell, waits for a decision. Optional:
	// defaults to 24 h.
	ApprovalTimeout time.Duration `json:"approval_timeout"`
	// MaxSessionLifetime, MaxSessionIdle and MaxSessionCells cap a session (SessionRequest):
	// how long it lives, how long it may sit with no cell submitted, waiting or running, and
	// how many cells it runs. A request's zero value takes the cap. Optional: default to 1 h,
	// 10 min and 100.
	MaxSessionLifetime time.Duration `json:"max_session_lifetime"`
	MaxSessionIdle     time.Duration `json:"max_session_idle"`
	MaxSessionCells    int           `json:"max_session_cells"`
	// Quorum is how many distinct reviewers (distinct principals and distinct keys) must
	// approve every run; RiskyQuorum how many must approve a run that asks for an open network,
	// egress or secrets (QuorumFor takes the larger that applies). Optional: zero means 1.
	// At most MaxQuorum.
	Quorum      int `json:"quorum,omitempty"`
	RiskyQuorum int `json:"risky_quorum,omitempty"`
}

// WithDefaults returns p with every zero field set to its default.
func (p Policy) WithDefaults() Policy {
	if len(p.Languages) == 0 {
		p.Languages = []string{Python}
	}
	p.MaxCodeBytes = cmp.Or(p.MaxCodeBytes, DefaultMaxCodeBytes)
	p.DefaultTimeout = cmp.Or(p.DefaultTimeout, DefaultTimeout)
	p.MaxTimeout = cmp.Or(p.MaxTimeout, DefaultMaxTimeout)
	p.Grace = cmp.Or(p.Grace, DefaultGrace)
	p.MaxStdoutBytes = cmp.Or(p.MaxStdoutBytes, DefaultMaxStdoutBytes)
	p.MaxStderrBytes = cmp.Or(p.MaxStderrBytes, DefaultMaxStderrBytes)
	p.MaxFiles = cmp.Or(p.MaxFiles, DefaultMaxFiles)
	p.MaxFileBytes = cmp.Or(p.MaxFileBytes, DefaultMaxFileBytes)
	p.MaxTotalFileBytes = cmp.Or(p.MaxTotalFileBytes, DefaultMaxTotalFileBytes)
	p.MaxOutputs = cmp.Or(p.MaxOutputs, DefaultMaxOutputs)
	if p.MaxTotalOutputBytes == 0 {
		p.MaxTotalOutputBytes = p.outputRoom()
	}
	p.MaxOutputBytes = cmp.Or(p.MaxOutputBytes, min(DefaultMaxOutputBytes, p.MaxTotalOutputBytes))
	p.MaxInputFiles = cmp.Or(p.MaxInputFiles, DefaultMaxInputFiles)
	p.MaxInputBytes = cmp.Or(p.MaxInputBytes, DefaultMaxInputBytes)
	p.MaxEnvVars = cmp.Or(p.MaxEnvVars, DefaultMaxEnvVars)
	p.MaxEnvBytes = cmp.Or(p.MaxEnvBytes, DefaultMaxEnvBytes)
	p.ApprovalTimeout = cmp.Or(p.ApprovalTimeout, DefaultApprovalTimeout)
	p.EgressMaxBytes = cmp.Or(p.EgressMaxBytes, DefaultEgressMaxBytes)
	p.EgressMaxConns = cmp.Or(p.EgressMaxConns, DefaultEgressMaxConns)
	p.MaxSessionLifetime = cmp.Or(p.MaxSessionLifetime, DefaultMaxSessionLifetime)
	p.MaxSessionIdle = cmp.Or(p.MaxSessionIdle, DefaultMaxSessionIdle)
	p.MaxSessionCells = cmp.Or(p.MaxSessionCells, DefaultMaxSessionCells)
	if p.DeniedEnv == nil {
		p.DeniedEnv = slices.Clone(DefaultDeniedEnv)
	}
	return p
}

// outputRoom is MaxTotalOutputBytes's default: DefaultMaxTotalOutputBytes, or less when the
// policy's stream and file caps leave less room in a result's payload budgets, so that a policy
// written before outputs existed, with larger file caps, stays valid (its outputs get what is
// left, in whole KiB, at least 1 KiB).
func (p Policy) outputRoom() int64 {
	raw := MaxRawPayloadBytes - p.MaxStdoutBytes - p.MaxStderrBytes - p.MaxTotalFileBytes
	enc := MaxEncodedPayloadBytes - WorstResultEncodingBytes(Limits{MaxStdoutBytes: p.MaxStdoutBytes, MaxStderrBytes: p.MaxStderrBytes,
		MaxFiles: p.MaxFiles, MaxTotalFileBytes: p.MaxTotalFileBytes, MaxOutputs: p.MaxOutputs})
	room := min(int64(DefaultMaxTotalOutputBytes), raw, enc/4*3)
	return max(room&^1023, 1024)
}

// Validate reports a ConfigError for a policy that cannot be used: negative or inconsistent limits,
// an unknown language, or caps that could make a payload larger than Temporal accepts. It checks
// the policy after WithDefaults.
func (p Policy) Validate() error {
	p = p.WithDefaults()
	for _, l := range p.Languages {
		if l != Python && l != Shell {
			return configf("policy: language %q is not offered (offered: %s, %s)", l, Python, Shell)
		}
	}
	if err := p.validateLimits(); err != nil {
		return err
	}
	if err := p.validateNames(); err != nil {
		return err
	}
	if err := p.validateQuorum(); err != nil {
		return err
	}
	return p.validatePayloads()
}

// validateLimits checks that every limit is positive, and the timeouts and egress connections
// within their caps.
func (p Policy) validateLimits() error {
	type pos struct {
		name string
		v    int64
	}
	for _, f := range []pos{
		{"max code bytes", int64(p.MaxCodeBytes)},
		{"default timeout", int64(p.DefaultTimeout)},
		{"max timeout", int64(p.MaxTimeout)},
		{"grace", int64(p.Grace)},
		{"max stdout bytes", p.MaxStdoutBytes},
		{"max stderr bytes", p.MaxStderrBytes},
		{"max files", int64(p.MaxFiles)},
		{"max file bytes", p.MaxFileBytes},
		{"max total file bytes", p.MaxTotalFileBytes},
		{"max outputs", int64(p.MaxOutputs)},
		{"max output bytes", p.MaxOutputBytes},
		{"max total output bytes", p.MaxTotalOutputBytes},
		{"max input files", int64(p.MaxInputFiles)},
		{"max input bytes", p.MaxInputBytes},
		{"max env vars", int64(p.MaxEnvVars)},
		{"max env bytes", int64(p.MaxEnvBytes)},
		{"approval timeout", int64(p.ApprovalTimeout)},
		{"egress max bytes", p.EgressMaxBytes},
		{"egress max connections", int64(p.EgressMaxConns)},
		{"max session lifetime", int64(p.MaxSessionLifetime)},
		{"max session idle", int64(p.MaxSessionIdle)},
		{"max session cells", int64(p.MaxSessionCells)},
	} {
		if f.v <= 0 {
			return configf("policy: %s must be positive, got %d", f.name, f.v)
		}
	}
	if p.MaxTimeout > MaxTimeoutCap {
		return configf("policy: max timeout %s is over the cap of %s", p.MaxTimeout, MaxTimeoutCap)
	}
	if p.DefaultTimeout > p.MaxTimeout {
		return configf("policy: default timeout %s is over the max timeout %s", p.DefaultTimeout, p.MaxTimeout)
	}
	if p.EgressMaxConns > MaxEgressConns {
		return configf("policy: egress max connections %d is over %d (the audit of one run must fit in its result)", p.EgressMaxConns, MaxEgressConns)
	}
	return nil
}

// validateNames checks the egress patterns, the secret names and the env names the policy lists.
func (p Policy) validateNames() error {
	if _, err := ParseEgressPatterns(p.EgressAllow); err != nil {
		return configf("policy: --egress-allow: %v", err)
	}
	if _, err := ParsePrivateOK(p.EgressPrivateOK); err != nil {
		return err
	}
	if err := CheckSecretNames(p.SecretNames); err != nil {
		return configf("policy: secret names: %v", err)
	}
	for _, name := range p.AllowedEnv {
		if !envNameRE.MatchString(name) {
			return configf("policy: allowed env name %q is not a plain name", name)
		}
	}
	for _, name := range p.SensitiveEnv {
		if !envNameRE.MatchString(name) {
			return configf("policy: sensitive env name %q is not a plain name", name)
		}
	}
	return nil
}

// validatePayloads checks that no result or request the caps let through can be larger than
// Temporal accepts.
func (p Policy) validatePayloads() error {
	raw := p.MaxStdoutBytes + p.MaxStderrBytes + p.MaxTotalFileBytes + p.MaxTotalOutputBytes
	if raw > MaxRawPayloadBytes {
		return configf("policy: stdout, stderr, file and output caps allow %d bytes in one result, over the %d-byte budget under Temporal's %d-byte payload limit; lower them",
			raw, MaxRawPayloadBytes, temporalPayloadLimitBytes)
	}
	if enc := p.worstResultEncoding(); enc > MaxEncodedPayloadBytes {
		return configf("policy: one result could encode to %d bytes, over the %d-byte budget under Temporal's %d-byte payload limit; lower the output or file caps",
			enc, MaxEncodedPayloadBytes, temporalPayloadLimitBytes)
	}
	if enc := p.worstRequestEncoding(); enc > MaxEncodedPayloadBytes {
		return configf("policy: one request could encode to %d bytes, over the %d-byte budget under Temporal's %d-byte payload limit; lower the code, input or env caps",
			enc, MaxEncodedPayloadBytes, temporalPayloadLimitBytes)
	}
	return nil
}

func base64Len(n int64) int64 { return (n + 2) / 3 * 4 }

// worstResultEncoding bounds the JSON size of a Result the caps let through: bytes are base64,
// names may be escaped six bytes per byte, and each file and the result carry field names.
func (p Policy) worstResultEncoding() int64 {
	return WorstResultEncodingBytes(Limits{MaxStdoutBytes: p.MaxStdoutBytes, MaxStderrBytes: p.MaxStderrBytes,
		MaxFiles: p.MaxFiles, MaxTotalFileBytes: p.MaxTotalFileBytes, MaxOutputs: p.MaxOutputs, MaxTotalOutputBytes: p.MaxTotalOutputBytes})
}

// WorstResultEncodingBytes bounds, as Validate does for the policy's caps, the JSON size of a
// Result that limits l let through: a session adds it to what its status already holds before it
// takes another cell.
func WorstResultEncodingBytes(l Limits) int64 {
	const resultOverhead, fileOverhead, outputOverhead = 1024, 96, 128
	files, outputs := int64(l.MaxFiles), int64(l.MaxOutputs)
	perBase64Slack := int64(4)
	return resultOverhead +
		base64Len(l.MaxStdoutBytes) + base64Len(l.MaxStderrBytes) +
		base64Len(l.MaxTotalFileBytes) + files*perBase64Slack +
		files*(fileOverhead+6*DefaultMaxFileNameBytes) +
		base64Len(l.MaxTotalOutputBytes) + outputs*(perBase64Slack+outputOverhead)
}

func (p Policy) worstRequestEncoding() int64 {
	const requestOverhead, fileOverhead = 4096, 64
	return requestOverhead +
		6*int64(p.MaxCodeBytes) +
		base64Len(p.MaxInputBytes) + int64(p.MaxInputFiles)*(4+fileOverhead+6*DefaultMaxFileNameBytes) +
		6*int64(p.MaxEnvBytes) + int64(p.MaxEnvVars)*32
}

// Offers reports whether the policy offers a language.
func (p Policy) Offers(language string) bool {
	return slices.Contains(p.WithDefaults().Languages, language)
}

func (p Policy) String() string {
	p = p.WithDefaults()
	return fmt.Sprintf("languages=%v timeout=%s/%s grace=%s stdout=%d stderr=%d files=%d/%d/%d network=%t approval=%s mixed_indentation=%t sensitive_env=%v quorum=%d/%d",
		p.Languages, p.DefaultTimeout, p.MaxTimeout, p.Grace, p.MaxStdoutBytes, p.MaxStderrBytes,
		p.MaxFiles, p.MaxFileBytes, p.MaxTotalFileBytes, p.AllowOpenNetwork, p.ApprovalTimeout, p.AllowMixedIndentation, p.SensitiveEnv, max(p.Quorum, 1), max(p.Quorum, p.RiskyQuorum, 1))
}
