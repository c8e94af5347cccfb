package approval

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Statement versions. Version 2 (issue 27) adds the reviewer's principal, so that nobody who
// relays a decision can name another principal the key may sign for; version 1 binds no
// principal and is verified only for runs recorded before version 2 (whose check recorded no
// statement version).
const (
	StatementVersion1 = 1
	StatementVersion2 = 2
	// StatementVersion is the version new runs require.
	StatementVersion = StatementVersion2
)

// StatementHeader is the first line of a version 1 statement; StatementHeaderV2 of version 2.
const (
	StatementHeader   = "sandboxflow-approval-statement v1"
	StatementHeaderV2 = "sandboxflow-approval-statement v2"
)

// Decision words in a statement.
const (
	DecisionApprove = "approve"
	DecisionDeny    = "deny"
)

// Statement field names, in the order they appear; a StatementMismatch names one of them.
const (
	FieldWorkflowID       = "workflow_id"
	FieldRunID            = "run_id"
	FieldDigest           = "digest"
	FieldDecision         = "decision"
	FieldApprovalID       = "approval_id"
	FieldSandboxTaskQueue = "sandbox_task_queue"
	FieldReviewer         = "reviewer"
	FieldExpires          = "expires"
	// FieldVersion names the statement's version (its first line) in a StatementMismatch.
	FieldVersion = "version"
)

var (
	statementFields = []string{FieldWorkflowID, FieldRunID, FieldDigest, FieldDecision,
		FieldApprovalID, FieldSandboxTaskQueue, FieldExpires}
	statementFieldsV2 = []string{FieldWorkflowID, FieldRunID, FieldDigest, FieldDecision,
		FieldApprovalID, FieldSandboxTaskQueue, FieldReviewer, FieldExpires}
)

// expiresLayout is RFC 3339 in UTC with whole seconds.
const expiresLayout = "2006-01-02T15:04:05Z"

// maxFieldBytes bounds each statement value.
const maxFieldBytes = 1024

// Fields is what a statement binds: which run, which code, which decision, where the code runs
// and until when the signature may be used.
type Fields struct {
	// Version is the statement's version: StatementVersion1 (also for zero) or
	// StatementVersion2.
	Version int
	// WorkflowID and RunID name the one run the decision is for. Required.
	WorkflowID string
	RunID      string
	// Digest is the request's digest, "sha256:" and 64 lower-case hex digits. Required.
	Digest string
	// Approve is true for an approval, false for a denial.
	Approve bool
	// ApprovalID is the decision's UUID (8-4-4-4-12 hex digits). Required.
	ApprovalID string
	// SandboxTaskQueue is the task queue the sandbox activity runs on. Required.
	SandboxTaskQueue string
	// Reviewer is the principal the reviewer signs as, one the key's reviewers-file line
	// allows. Required in version 2 (a plain name, no pattern); version 1 has no such line and
	// ignores it.
	Reviewer string
	// Expires is when the signature stops counting. Required; written in UTC with whole
	// seconds (any fraction is dropped).
	Expires time.Time
}

// version returns f's version, StatementVersion1 for zero.
func (f Fields) version() int {
	if f.Version == 0 {
		return StatementVersion1
	}
	return f.Version
}

// names returns the field names of f's version, in order.
func (f Fields) names() []string {
	if f.version() == StatementVersion2 {
		return statementFieldsV2
	}
	return statementFields
}

func (f Fields) header() string {
	if f.version() == StatementVersion2 {
		return StatementHeaderV2
	}
	return StatementHeader
}

// Decision returns DecisionApprove or DecisionDeny.
func (f Fields) Decision() string {
	if f.Approve {
		return DecisionApprove
	}
	return DecisionDeny
}

func (f Fields) values() []string {
	exp := ""
	if !f.Expires.IsZero() {
		exp = f.Expires.UTC().Format(expiresLayout)
	}
	if f.version() == StatementVersion2 {
		return []string{f.WorkflowID, f.RunID, f.Digest, f.Decision(), f.ApprovalID, f.SandboxTaskQueue, f.Reviewer, exp}
	}
	return []string{f.WorkflowID, f.RunID, f.Digest, f.Decision(), f.ApprovalID, f.SandboxTaskQueue, exp}
}

// Check reports the first field that is missing or not allowed in a statement.
func (f Fields) Check() error {
	if v := f.version(); v != StatementVersion1 && v != StatementVersion2 {
		return fmt.Errorf("approval: statement: version %d; want %d or %d", v, StatementVersion1, StatementVersion2)
	}
	vals := f.values()
	for i, name := range f.names() {
		v := vals[i]
		if v == "" {
			return fmt.Errorf("approval: statement: %s is missing", name)
		}
		if err := checkText(v); err != nil {
			return fmt.Errorf("approval: statement: %s: %w", name, err)
		}
	}
	if !isDigest(f.Digest) {
		return fmt.Errorf("approval: statement: digest %q: want sha256: and 64 lower-case hex digits", printable(f.Digest))
	}
	if !isUUID(f.ApprovalID) {
		return fmt.Errorf("approval: statement: approval_id %q: want a UUID", printable(f.ApprovalID))
	}
	if f.version() == StatementVersion2 {
		if err := checkPrincipal(f.Reviewer); err != nil || isPattern(f.Reviewer) || strings.Contains(f.Reviewer, ",") {
			return fmt.Errorf("approval: statement: reviewer %q: want a plain principal name (no pattern, no comma)", printable(f.Reviewer))
		}
	}
	return nil
}

// Statement returns the canonical bytes a reviewer signs; version 2:
//
//	sandboxflow-approval-statement v2
//	workflow_id: <id>
//	run_id: <id>
//	digest: sha256:<hex>
//	decision: approve|deny
//	approval_id: <uuid>
//	sandbox_task_queue: <queue>
//	reviewer: <principal>
//	expires: <RFC 3339, UTC, seconds>
//
// with a newline after each line (version 1 has "v1" in its first line and no reviewer line). Values must be non-empty valid UTF-8 without control
// characters, line or paragraph separators, or leading or trailing spaces, so that no value can
// make another line.
func (f Fields) Statement() ([]byte, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(f.header())
	b.WriteByte('\n')
	names := f.names()
	for i, v := range f.values() {
		b.WriteString(names[i])
		b.WriteString(": ")
		b.WriteString(v)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// ParseStatement parses the bytes Statement writes. It is strict: the header, every field in
// order, nothing else; the result, written again, is the same bytes.
func ParseStatement(b []byte) (Fields, error) {
	var f Fields
	if len(b) > (len(statementFieldsV2)+1)*(maxFieldBytes+64) {
		return f, errors.New("approval: statement: too long")
	}
	if !utf8.Valid(b) {
		return f, errors.New("approval: statement: not valid UTF-8")
	}
	s := string(b)
	if !strings.HasSuffix(s, "\n") {
		return f, errors.New("approval: statement: does not end with a newline")
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	switch lines[0] {
	case StatementHeader:
		f.Version = StatementVersion1
	case StatementHeaderV2:
		f.Version = StatementVersion2
	default:
		return f, fmt.Errorf("approval: statement: first line %q; want %q or %q", printable(lines[0]), StatementHeaderV2, StatementHeader)
	}
	names := f.names()
	if len(lines) != len(names)+1 {
		return f, fmt.Errorf("approval: statement: %d lines; want %d", len(lines), len(names)+1)
	}
	vals := make([]string, len(names))
	for i, name := range names {
		v, ok := strings.CutPrefix(lines[i+1], name+": ")
		if !ok {
			return f, fmt.Errorf("approval: statement: line %d: want %q", i+2, name+": ")
		}
		vals[i] = v
	}
	if f.Version == StatementVersion2 {
		f.Reviewer = vals[6]
		vals = append(vals[:6], vals[7])
	}
	f.WorkflowID, f.RunID, f.Digest, f.ApprovalID, f.SandboxTaskQueue = vals[0], vals[1], vals[2], vals[4], vals[5]
	switch vals[3] {
	case DecisionApprove:
		f.Approve = true
	case DecisionDeny:
	default:
		return f, fmt.Errorf("approval: statement: decision %q; want %s or %s", printable(vals[3]), DecisionApprove, DecisionDeny)
	}
	t, err := time.Parse(expiresLayout, vals[6])
	if err != nil {
		return f, fmt.Errorf("approval: statement: expires %q: want UTC RFC 3339 such as 2026-01-02T15:04:05Z", printable(vals[6]))
	}
	f.Expires = t
	again, err := f.Statement()
	if err != nil {
		return Fields{}, err
	}
	if !bytes.Equal(again, b) {
		return Fields{}, errors.New("approval: statement: not in canonical form")
	}
	return f, nil
}

// checkText refuses values that could break a line-based format or mislead a reader.
func checkText(v string) error {
	if len(v) > maxFieldBytes {
		return fmt.Errorf("longer than %d bytes", maxFieldBytes)
	}
	if !utf8.ValidString(v) {
		return errors.New("not valid UTF-8")
	}
	if strings.TrimSpace(v) != v {
		return errors.New("leading or trailing space")
	}
	for _, r := range v {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || r == '\u0085' || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("control or format character %U", r)
		}
	}
	return nil
}

func isDigest(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// printable shortens s for an error message (which quotes it with %q).
func printable(s string) string {
	const max = 80
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
