package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// Review is everything a reviewer reads about a run before deciding: its status (with the request
// summary), the characters of the code a person could not see, and a warning when there are any.
type Review struct {
	WorkflowID string `json:"workflow_id"`
	contract.Status
	// SuspiciousCharacters lists invisible or direction-changing characters of the code (see
	// pysource.SuspiciousCharacters). They are allowed in code but must be seen.
	SuspiciousCharacters []pysource.Suspicious `json:"suspicious_characters,omitempty"`
	// Warning says, in one line, that the code holds such characters. Empty when it holds none.
	Warning string `json:"warning,omitempty"`
	// ConfusableNames lists the words of the code, and of the input files Python may read as
	// source, that mix scripts or are not in NFKC (pysource.ConfusableNames,
	// pysource.FileConfusableNames): they can read as other names.
	ConfusableNames []pysource.ConfusableName `json:"confusable_names,omitempty"`
	// NamesWarning says, in one line, that the code holds such names. Empty when it holds none.
	NamesWarning string `json:"names_warning,omitempty"`
	Extras
}

// Extras is what a run's or a session's review reads from its start input beyond what its
// status shows: the env values and input files when asked for (ReviewOptions), and what changed
// since the conversation's previous run or session. Its fields are encoded as fields of the
// review that embeds it.
type Extras struct {
	// Env holds the env values, only when asked for, less those the policy marks sensitive.
	Env map[string]string `json:"env_values,omitempty"`
	// SensitiveEnvBytes holds, when env values are asked for, the length in bytes of each value
	// the policy marks sensitive (the summary's SensitiveEnv), in place of the value.
	SensitiveEnvBytes map[string]int `json:"sensitive_env_bytes,omitempty"`
	// InputFiles holds the input files' contents, name → bytes, only when asked for.
	InputFiles map[string][]byte `json:"input_files,omitempty"`
	// Changes is what changed since the previous run or session of the conversation the start
	// input names, when it names one (a reading aid: ConversationNotice); ChangesError says why
	// it could not be read. A session's are its settings' changes: each of its cells is diffed
	// only against the cell it retries (CellView.Retry).
	Changes      *Changes `json:"changes,omitempty"`
	ChangesError string   `json:"changes_error,omitempty"`
}

// ReviewOptions say what Review adds to what it always returns.
type ReviewOptions struct {
	// EnvValues adds the env values (the code's behaviour can depend on them); those the
	// worker's policy marks sensitive are given as their length only.
	EnvValues bool
	// InputFiles adds the input files' contents: they can be modules the code imports, as much
	// a part of what runs as the code.
	InputFiles bool
}

// Review returns what a reviewer reads about t, with what opts adds: a run's Review, or for a
// session's cell its session's SessionReview.
//
// Each refuses what it cannot check: a workflow of another type (*NotRunCodeError,
// *NotSessionError, before it queries), a status whose digest is not the digest of what it shows
// with the start (contract.ShownChecked, CheckSessionShown), and a session whose cells do not
// compute the chain and digests it shows (*CellMismatchError). Nothing a reviewer is warned of
// is taken from the workflow's word.
func (c *Client) Review(ctx context.Context, t Target, opts ReviewOptions) (TargetReview, error) {
	if t.IsCell() {
		r, err := c.reviewSession(ctx, t.ID, opts)
		if err != nil {
			return TargetReview{}, err
		}
		return TargetReview{Session: &r}, nil
	}
	r, err := c.reviewRun(ctx, t.ID, opts)
	if err != nil {
		return TargetReview{}, err
	}
	return TargetReview{Run: &r}, nil
}

// reviewRun is Review of the RunCode run workflowID.
func (c *Client) reviewRun(ctx context.Context, workflowID string, opts ReviewOptions) (Review, error) {
	if err := c.RequireRunCode(ctx, workflowID); err != nil {
		return Review{}, err
	}
	st, err := c.Status(ctx, workflowID)
	if err != nil {
		return Review{}, err
	}
	var in contract.Input
	if st.Request.Digest != "" || opts.EnvValues || opts.InputFiles {
		if in, err = c.startInput(ctx, workflowID, st, st.Request.Digest != ""); err != nil {
			return Review{}, err
		}
	}
	if st.Request.Digest != "" {
		// The start-up warnings are computed here, from the input files the digest just
		// checked binds, not taken from the status a workflow worker answered.
		st.Request.Warnings = pysource.StartupWarnings(slices.Sorted(maps.Keys(in.Request.Files)))
		// So is the conversation, which the diff below is read for.
		st.Request.Conversation = in.Request.Conversation
	}
	r := Review{WorkflowID: workflowID, Status: st, SuspiciousCharacters: pysource.SuspiciousCharacters(st.Request.Code)}
	r.Warning = SuspiciousWarning(r.SuspiciousCharacters)
	r.ConfusableNames = pysource.ConfusableNames(st.Request.Code)
	if st.Request.Digest != "" {
		for _, n := range slices.Sorted(maps.Keys(in.Request.Files)) {
			r.ConfusableNames = append(r.ConfusableNames, pysource.FileConfusableNames(n, in.Request.Files[n])...)
		}
	}
	r.NamesWarning = ConfusableWarning(r.ConfusableNames)
	// What opts adds comes from what was hashed into the digest just checked: the start input
	// of the status's run.
	r.Extras = opts.extras(in.Request.Env, in.Request.Files, st.Request.SensitiveEnv)
	r.Changes, r.ChangesError = c.reviewChanges(ctx, workflowID, st, in)
	return r, nil
}

// extras returns what o adds to a run's or a session's review from its start input's env and
// files: the env values less the sensitive ones, the sensitive ones' lengths in bytes, and the
// files; each nil when not asked for. The caller adds the changes.
func (o ReviewOptions) extras(env map[string]string, files map[string][]byte, sensitive []string) Extras {
	var x Extras
	if o.EnvValues {
		x.Env = map[string]string{}
		for n, v := range env {
			if slices.Contains(sensitive, n) {
				if x.SensitiveEnvBytes == nil {
					x.SensitiveEnvBytes = map[string]int{}
				}
				x.SensitiveEnvBytes[n] = len(v)
				continue
			}
			x.Env[n] = v
		}
	}
	if o.InputFiles {
		x.InputFiles = files
		if x.InputFiles == nil {
			x.InputFiles = map[string][]byte{}
		}
	}
	return x
}

// SuspiciousWarning returns a one-line warning about the listed characters, or "" for none.
func SuspiciousWarning(list []pysource.Suspicious) string {
	if len(list) == 0 {
		return ""
	}
	return fmt.Sprintf("WARNING: the code holds %d invisible or direction-changing character(s) that may make it read differently from how it runs: %s",
		len(list), firstFew(list, func(s pysource.Suspicious) string {
			return fmt.Sprintf("%s %s at line %d column %d", s.Rune, s.Name, s.Line, s.Column)
		}))
}

// ConfusableWarning returns a one-line warning about the listed names, or "" for none.
func ConfusableWarning(list []pysource.ConfusableName) string {
	if len(list) == 0 {
		return ""
	}
	return fmt.Sprintf("WARNING: the code or its source input files hold %d name(s) that can read as other names: %s", len(list),
		firstFew(list, func(n pysource.ConfusableName) string { return fmt.Sprintf("%q at %s %s", n.Name, n.Where(), n.Reason) }))
}

// firstFew describes the first five items of list, then says how many more there are.
func firstFew[T any](list []T, describe func(T) string) string {
	var parts []string
	for i, item := range list {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(list)-i))
			break
		}
		parts = append(parts, describe(item))
	}
	return strings.Join(parts, "; ")
}

// WriteJSON writes v as one line of JSON to w, with every invisible or direction-changing
// character (pysource.IsSuspicious) written as a \u escape: the JSON means the same, and a person
// reading it in a terminal sees each such character instead of its effect.
func WriteJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("client: encode JSON: %w", err)
	}
	b = append(visibleJSON(b), '\n')
	_, err = w.Write(b)
	return err
}

// visibleJSON escapes the suspicious characters of b, JSON text from encoding/json: it is valid
// UTF-8, and every character that is not ASCII is inside a string, where a \u escape means it.
func visibleJSON(b []byte) []byte {
	if !strings.ContainsFunc(string(b), func(r rune) bool { return r >= utf8.RuneSelf && pysource.IsSuspicious(r) }) {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r < utf8.RuneSelf || !pysource.IsSuspicious(r):
			out = append(out, b[i:i+size]...)
		case r > 0xFFFF:
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
	}
	return out
}

// startInput reads the input the status's run was started with and, with check, checks that the
// status's digest is the digest of what it shows with that input's file contents and env values
// (CheckShown).
func (c *Client) startInput(ctx context.Context, workflowID string, st contract.Status, check bool) (contract.Input, error) {
	in, err := c.StartInput(ctx, workflowID, st.RunID)
	if err != nil {
		return in, err
	}
	if check {
		if err := CheckShown(st, in); err != nil {
			return in, fmt.Errorf("client: %s: %w", workflowID, err)
		}
	}
	return in, nil
}

// StartInput reads the input run runID of workflowID was started with, from its start event:
// what the status shows of the request (file names and sizes, env names) with the file contents
// and env values that were hashed into its digest.
func (c *Client) StartInput(ctx context.Context, workflowID, runID string) (contract.Input, error) {
	in, _, err := c.startInputRun(ctx, workflowID, runID)
	return in, err
}

// runCodeStart reads the start of workflowID's current run as startInputRun does, refusing a
// workflow started as another type than RunCode (*NotRunCodeError, from the start event the
// server wrote).
func (c *Client) runCodeStart(ctx context.Context, workflowID string) (contract.Input, string, error) {
	var in contract.Input
	startRun, err := contract.ReadStart(ctx, c.tc, c.dc, c.namespace, workflowID, "", contract.WorkflowName, &in)
	var wt *contract.WorkflowTypeError
	if errors.As(err, &wt) {
		return in, "", &NotRunCodeError{WorkflowID: workflowID, Type: wt.Type}
	}
	if err != nil {
		return in, "", fmt.Errorf("client: %w", err)
	}
	return in, startRun, nil
}

// startInputRun is StartInput with the run id its start event was written for
// (contract.ReadInputRun).
func (c *Client) startInputRun(ctx context.Context, workflowID, runID string) (contract.Input, string, error) {
	in, startRun, err := contract.ReadInputRun(ctx, c.tc, c.dc, c.namespace, workflowID, runID)
	if err != nil {
		return in, "", fmt.Errorf("client: %w", err)
	}
	return in, startRun, nil
}

// CheckShown refuses a status whose digest is not the digest of what it shows with the file
// contents and env values of in, its run's start input (contract.ShownChecked): the status is
// answered by whatever worker polls the run's task queue, and only the start was written by the
// caller who started the run.
//
// A status that says its code was edited (Status.Edit) shows a reviewer's edit in place of the
// started code: the code is then the status's, every other byte the start's, and the digest
// must be theirs. (Which reviewer edited it is the workflow worker's word; the sandbox host
// verifies that the editor approved the edited digest, and counts every approval itself.)
func CheckShown(st contract.Status, in contract.Input) error {
	if st.Edit != nil {
		in.Request.Code = st.Request.Code
	}
	_, err := contract.ShownChecked(st.Request, in.Request)
	return err
}
