package rules

import (
	"fmt"
	"reflect"
	"slices"
	"sort"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/ext"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Subjects a rule can tell apart (the variable subject).
const (
	SubjectRun     = "run"
	SubjectSession = "session"
	SubjectCell    = "cell"
)

// CostLimit bounds one rule's evaluation (CEL's cost units): a rule that would cost more
// refuses the request instead (rules fail closed).
const CostLimit = 1_000_000

// Request is what a rule reads as the variable request: the checked request (or a session's
// settings, with its cell's code and language).
type Request struct {
	Language  string        `cel:"language"`
	Code      string        `cel:"code"`
	CodeBytes int           `cel:"code_bytes"`
	Network   bool          `cel:"network"`
	Egress    []string      `cel:"egress"`
	Secrets   []string      `cel:"secrets"`
	Packages  []string      `cel:"packages"`
	Files     []string      `cel:"files"`
	Env       []string      `cel:"env"`
	Backend   string        `cel:"backend"`
	Limits    RequestLimits `cel:"limits"`
}

// RequestLimits is request.limits: the checked request's effective limits.
type RequestLimits struct {
	TimeoutSeconds int64 `cel:"timeout_seconds"`
	MaxStdoutBytes int64 `cel:"max_stdout_bytes"`
	MaxStderrBytes int64 `cel:"max_stderr_bytes"`
	MaxFiles       int   `cel:"max_files"`
	MaxFileBytes   int64 `cel:"max_file_bytes"`
}

// Metadata is what a rule reads as the variable metadata: who says they asked (the
// orchestrator's word, never a proof).
type Metadata struct {
	Agent        string `cel:"agent"`
	Session      string `cel:"session"`
	ToolCallID   string `cel:"tool_call_id"`
	RequestedBy  string `cel:"requested_by"`
	Conversation string `cel:"conversation"`
}

// Input is one evaluation's variables.
type Input struct {
	Subject  string
	Cell     int
	Request  Request
	Metadata Metadata
}

// ForRun is the input of a run's checked request.
func ForRun(c *guard.Checked) Input {
	in := Input{Subject: SubjectRun, Request: fromSettings(&c.CheckedSettings), Metadata: fromMetadata(c.Metadata, c.Conversation)}
	in.Request.Language, in.Request.Code, in.Request.CodeBytes = c.Language, c.Code, len(c.Code)
	return in
}

// ForSession is the input of a session's checked settings, with no code.
func ForSession(s *guard.CheckedSession) Input {
	return Input{Subject: SubjectSession, Request: fromSettings(&s.CheckedSettings), Metadata: fromMetadata(s.Metadata, "")}
}

// ForCell is the input of cell n of a session: its settings, with the cell's code.
func ForCell(s *guard.CheckedSession, n int, language, code string) Input {
	in := ForSession(s)
	in.Subject, in.Cell = SubjectCell, n
	in.Request.Language, in.Request.Code, in.Request.CodeBytes = language, code, len(code)
	return in
}

func fromSettings(c *guard.CheckedSettings) Request {
	r := Request{Network: c.Network, Egress: nonNil(c.Egress), Secrets: nonNil(c.Secrets), Backend: c.Backend,
		Packages: []string{}, Files: []string{}, Env: []string{},
		Limits: RequestLimits{TimeoutSeconds: int64(c.Limits.Timeout.Seconds()), MaxStdoutBytes: c.Limits.MaxStdoutBytes,
			MaxStderrBytes: c.Limits.MaxStderrBytes, MaxFiles: c.Limits.MaxFiles, MaxFileBytes: c.Limits.MaxFileBytes}}
	for _, p := range c.Packages {
		r.Packages = append(r.Packages, p.Name)
	}
	for _, f := range c.Files {
		r.Files = append(r.Files, f.Name)
	}
	for _, e := range c.Env {
		r.Env = append(r.Env, e.Name)
	}
	return r
}

func fromMetadata(m guard.Metadata, conversation string) Metadata {
	return Metadata{Agent: m.Agent, Session: m.Session, ToolCallID: m.ToolCallID, RequestedBy: m.RequestedBy, Conversation: conversation}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// newEnv is the CEL environment every rule compiles in.
func newEnv() (*cel.Env, error) {
	return cel.NewEnv(
		ext.NativeTypes(reflect.TypeFor[Request](), reflect.TypeFor[RequestLimits](), reflect.TypeFor[Metadata](), ext.ParseStructTags(true)),
		ext.Strings(),
		cel.Variable("request", cel.ObjectType("rules.Request")),
		cel.Variable("metadata", cel.ObjectType("rules.Metadata")),
		cel.Variable("subject", cel.StringType),
		cel.Variable("cell", cel.IntType),
	)
}

// compiled is one rule, ready to evaluate.
type compiled struct {
	rule Rule
	prg  cel.Program
}

// Set is a loaded policy: its file, compiled, and its hash. It is read-only, safe for
// concurrent use.
type Set struct {
	env   *cel.Env
	file  File
	hash  string
	rules []compiled
}

func (s *Set) compile() error {
	env, err := newEnv()
	if err != nil {
		return fmt.Errorf("the rules' environment: %w", err)
	}
	s.env = env
	for i, r := range s.file.Rules {
		ast, iss := env.Compile(r.When)
		if iss.Err() != nil {
			return fmt.Errorf("rule %d (%s): when: %w", i+1, r.Name, iss.Err())
		}
		if ast.OutputType() != cel.BoolType {
			return fmt.Errorf("rule %d (%s): when is of type %s, want bool", i+1, r.Name, ast.OutputType())
		}
		// A rule whose worst case, over any request a payload can hold, is within CostLimit
		// needs no tracking at run time; any other is tracked and stopped at the limit.
		var opts []cel.ProgramOption
		if est, err := env.EstimateCost(ast, payloadSizes{}); err != nil || est.Max > CostLimit {
			opts = append(opts, cel.CostLimit(CostLimit))
		}
		prg, err := env.Program(ast, opts...)
		if err != nil {
			return fmt.Errorf("rule %d (%s): %w", i+1, r.Name, err)
		}
		s.rules = append(s.rules, compiled{rule: r, prg: prg})
	}
	return nil
}

// payloadSizes bounds, for CEL's cost estimate, every string and list a rule reads: none can
// hold more than a request's payload (guard.MaxRawPayloadBytes).
type payloadSizes struct{}

func (payloadSizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if p := n.Path(); len(p) > 0 && (p[0] == "request" || p[0] == "metadata") {
		return &checker.SizeEstimate{Min: 0, Max: guard.MaxRawPayloadBytes}
	}
	return nil
}

func (payloadSizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// Hash is "sha256:<hex>" of the policy file's bytes.
func (s *Set) Hash() string { return s.hash }

// Summary is one line saying what the policy holds: its hash, rules, groups and caps.
func (s *Set) Summary() string {
	l := s.file.Limits
	return fmt.Sprintf("%s, %d rules, %d groups, caps waiting %d per agent and %d in all, running %d per agent and %d in all (0: none)",
		s.hash, len(s.rules), len(s.file.Groups), l.Waiting.PerAgent, l.Waiting.Total, l.Running.PerAgent, l.Running.Total)
}

// Limits are the policy's caps.
func (s *Set) Limits() Limits { return s.file.Limits }

// Decide evaluates every rule over in. A rule that refuses, or one that cannot be evaluated
// (an error, or over CostLimit: rules fail closed), makes it return a *guard.PolicyRefused;
// otherwise the decision holds the policy's hash and what the matching rules ask and warn of.
// A nil Set decides nothing.
func (s *Set) Decide(in Input) (guard.RuleDecision, error) {
	if s == nil {
		return guard.RuleDecision{}, nil
	}
	d := guard.RuleDecision{PolicyHash: s.hash}
	adapt := s.env.CELTypeAdapter()
	vars := map[string]any{"request": adapt.NativeToValue(in.Request), "metadata": adapt.NativeToValue(in.Metadata),
		"subject": in.Subject, "cell": int64(in.Cell)}
	needs := map[string]*guard.GroupNeed{}
	for _, c := range s.rules {
		out, _, err := c.prg.Eval(vars)
		if err != nil {
			return guard.RuleDecision{}, &guard.PolicyRefused{Rule: c.rule.Name, Reason: "the rule could not be evaluated, so it refuses: " + err.Error()}
		}
		if hit, ok := out.Value().(bool); !ok || !hit {
			continue
		}
		r := c.rule
		if r.Refuse != "" {
			return guard.RuleDecision{}, &guard.PolicyRefused{Rule: r.Name, Reason: r.Refuse}
		}
		d.Quorum = max(d.Quorum, r.Quorum)
		if r.Warn != "" {
			d.Warnings = append(d.Warnings, r.Name+": "+r.Warn)
		}
		if q := r.Require; q != nil {
			n := needs[q.Group]
			if n == nil {
				n = &guard.GroupNeed{Group: q.Group, Principals: slices.Sorted(slices.Values(s.file.Groups[q.Group]))}
				needs[q.Group] = n
			}
			n.Approvals = max(n.Approvals, q.Approvals, 1)
			n.Rules = append(n.Rules, r.Name)
		}
	}
	for _, n := range needs {
		d.Groups = append(d.Groups, *n)
	}
	sort.Slice(d.Groups, func(i, j int) bool { return d.Groups[i].Group < d.Groups[j].Group })
	return d, nil
}
