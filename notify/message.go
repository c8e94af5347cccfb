package notify

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// Message is one notification, as every channel renders it. Its fields hold the request's
// strings as they are; each channel escapes them for its own format.
type Message struct {
	// ID is the webhook-id: the same for every attempt of one wait (of one run, or one cell).
	ID string `json:"-"`
	// Type is the event (contract.EventRunAwaiting or contract.EventCellAwaiting).
	Type string `json:"type"`
	// Timestamp is when the wait started.
	Timestamp time.Time `json:"timestamp"`
	Data      Data      `json:"data"`
}

// Data is what a notification says about the waiting run.
type Data struct {
	WorkflowID string              `json:"workflow_id"`
	RunID      string              `json:"run_id"`
	Cell       int                 `json:"cell,omitempty"`
	Digest     string              `json:"digest"`
	Language   string              `json:"language"`
	CodeBytes  int                 `json:"code_bytes"`
	Files      []guard.FileSummary `json:"files,omitempty"`
	Network    bool                `json:"network,omitempty"`
	Egress     []string            `json:"egress,omitempty"`
	Secrets    []string            `json:"secrets,omitempty"`
	// Packages are the run's packages (a cell's: those it brings), each with its version and
	// hashes; text channels write the hashes only with the code (Config.IncludeCode).
	Packages     []guard.Package `json:"packages,omitempty"`
	Image        string          `json:"image,omitempty"`
	RequestedBy  string          `json:"requested_by,omitempty"`
	Agent        string          `json:"agent,omitempty"`
	Conversation string          `json:"conversation,omitempty"`
	Deadline     time.Time       `json:"deadline"`
	InboxURL     string          `json:"inbox_url,omitempty"`
	// PolicyWarnings are what the operators' policy rules warn reviewers of, and the group
	// approvals they need.
	PolicyWarnings []string `json:"policy_warnings,omitempty"`
	// Code is the code, only when the operator asked for it (Config.IncludeCode).
	Code string `json:"code,omitempty"`
	// Changes is what changed since the previous run of the conversation, when it names one.
	Changes *Changes `json:"changes,omitempty"`
}

// Changes is what a notification says of a conversation's previous run: which it was, how it
// was decided, what changed (names and line counts) and, only with Config.IncludeCode, the
// unified diff (it holds code).
type Changes struct {
	PreviousWorkflowID string `json:"previous_workflow_id,omitempty"`
	PreviousOutcome    string `json:"previous_outcome,omitempty"`
	// PreviousSession says the previous one is a session: its settings and input files were
	// compared, not code (a session's code is its cells).
	PreviousSession bool     `json:"previous_session,omitempty"`
	ChangedFiles    []string `json:"changed_files,omitempty"`
	// Packages are the package changes, one line each ("added beta==2.0").
	Packages []string `json:"packages,omitempty"`
	Added    int      `json:"added"`
	Removed  int      `json:"removed"`
	Diff     string   `json:"diff,omitempty"`
	// First says the conversation has no earlier run (that visibility lists).
	First bool `json:"first,omitempty"`
	// Error says why the previous run could not be read.
	Error string `json:"error,omitempty"`
	// Notice is client.ConversationNotice.
	Notice string `json:"notice,omitempty"`
}

// fields are the lines a text channel writes of ch.
func (ch *Changes) fields() []field {
	prev, same := field{"Previous run", shownID(ch.PreviousWorkflowID) + ", " + ch.PreviousOutcome}, "none: the same code, files and settings"
	if ch.PreviousSession {
		prev.Label, same = "Previous session", "none: the same files and settings"
	}
	switch {
	case ch.Error != "":
		return []field{{"Changes", "the previous run could not be read: " + ch.Error}}
	case ch.First:
		return []field{{"Changes", "the conversation's first run"}}
	case len(ch.ChangedFiles) == 0:
		return []field{prev, {"Changes", same}}
	}
	out := []field{prev, {"Changes", fmt.Sprintf("%s (+%d -%d lines; a reading aid, not what is signed)", strings.Join(ch.ChangedFiles, ", "), ch.Added, ch.Removed)}}
	if len(ch.Packages) > 0 {
		out = append(out, field{"Package changes", strings.Join(ch.Packages, "; ")})
	}
	return out
}

// changesOf is what a notification says of ch; the diff only with includeDiff.
func changesOf(ch *client.Changes, includeDiff bool) *Changes {
	if ch == nil {
		return nil
	}
	out := &Changes{Notice: ch.Notice}
	if ch.Previous == nil {
		out.First = true
		return out
	}
	out.PreviousWorkflowID, out.PreviousOutcome, out.PreviousSession = ch.Previous.WorkflowID, ch.Previous.Outcome(), ch.Previous.Session
	out.ChangedFiles, out.Added, out.Removed = ch.ChangedFiles, ch.Added, ch.Removed
	for _, c := range ch.Packages {
		out.Packages = append(out.Packages, c.String())
	}
	if includeDiff {
		out.Diff = ch.Diff
	}
	return out
}

// newMessage builds the message for in. The code is kept only with includeCode.
func newMessage(in contract.NotifyInput, inbox string, includeCode bool, since time.Time) Message {
	m := Message{
		ID: MessageID(in), Type: in.Event, Timestamp: since.UTC(),
		Data: Data{
			WorkflowID: in.WorkflowID, RunID: in.RunID, Cell: in.Cell, Digest: in.Digest,
			Language: in.Language, CodeBytes: len(in.Code), Files: in.Files, Network: in.Network,
			Egress: in.Egress, Secrets: in.Secrets, Image: in.Image, Packages: in.Packages, RequestedBy: in.Metadata.RequestedBy, Agent: in.Metadata.Agent,
			Conversation: in.Conversation, Deadline: in.Deadline.UTC(), InboxURL: inboxLink(inbox, in),
			PolicyWarnings: in.PolicyWarnings,
		},
	}
	if includeCode {
		m.Data.Code = in.Code
	}
	return m
}

// MessageID is the webhook-id of in's notification: "msg_" and a hash of the workflow id, run id,
// event and cell, so every attempt (after a crash too) carries the same one.
func MessageID(in contract.NotifyInput) string {
	h := sha256.New()
	for _, s := range []string{"sandboxflow/notify/v1", in.WorkflowID, in.RunID, in.Event, strconv.Itoa(in.Cell)} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	sum := h.Sum(nil)
	return "msg_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:20]))
}

// inboxLink is the run's (or session's) page in the inbox at base, or "" without a base.
func inboxLink(base string, in contract.NotifyInput) string {
	if base == "" {
		return ""
	}
	kind := "run"
	if in.Event == contract.EventCellAwaiting {
		kind = "session"
	}
	return strings.TrimSuffix(base, "/") + "/" + kind + "/" + url.PathEscape(in.WorkflowID)
}

// title is the message's one-line summary: the subject of an email and the header of a Slack
// message. It holds no id the orchestrator chose (those are data, in fields), only the start of
// the digest the check computed, so that two waits read apart.
func (m Message) title() string {
	digest := strings.TrimPrefix(m.Data.Digest, "sha256:")
	digest = "sha256:" + truncate(digest, 12)
	if m.Type == contract.EventCellAwaiting {
		return fmt.Sprintf("sandboxflow: cell %d of a session waits for approval (%s)", m.Data.Cell, digest)
	}
	return "sandboxflow: a run waits for approval (" + digest + ")"
}

// shownID is a workflow id as a notification shows it: as it is when it is within
// guard.CheckWorkflowID's character set (the doors hold every id they start to it), else only
// its length, so that no id a namespace writer chose reads as a sentence or a link.
func shownID(id string) string {
	if guard.CheckWorkflowID(id) != nil {
		return fmt.Sprintf("(an id outside the documented character set, %d bytes: read it in the inbox)", len(id))
	}
	return id
}

// field is one labelled line of a text rendering.
type field struct{ Label, Value string }

// fields are the message's labelled values, in order, as they are (not escaped).
func (m Message) fields() []field {
	d := m.Data
	what := "Run"
	if m.Type == contract.EventCellAwaiting {
		what = "Session"
	}
	out := []field{{what, shownID(d.WorkflowID)}}
	if d.Cell != 0 {
		out = append(out, field{"Cell", strconv.Itoa(d.Cell)})
	}
	asked := d.RequestedBy
	if d.Agent != "" {
		asked = strings.TrimSpace(asked + " (agent " + d.Agent + ")")
	}
	if asked == "" {
		asked = "(not recorded)"
	}
	out = append(out, field{"Requested by", asked},
		field{"Language", d.Language},
		field{"Code", fmt.Sprintf("%d bytes", d.CodeBytes)})
	if d.Conversation != "" {
		out = append(out, field{"Conversation", d.Conversation})
	}
	if ch := d.Changes; ch != nil {
		out = append(out, ch.fields()...)
	}
	if len(d.Files) > 0 {
		var fs []string
		for _, f := range d.Files {
			fs = append(fs, fmt.Sprintf("%s (%d bytes)", f.Name, f.Size))
		}
		out = append(out, field{"Input files", strings.Join(fs, ", ")})
	}
	egress := "none"
	switch {
	case d.Network:
		egress = "OPEN NETWORK"
	case len(d.Egress) > 0:
		egress = strings.Join(d.Egress, ", ")
	}
	out = append(out, field{"Egress", egress})
	if len(d.Secrets) > 0 {
		out = append(out, field{"Secrets", strings.Join(d.Secrets, ", ")})
	}
	if d.Image != "" {
		out = append(out, field{"Image", d.Image})
	}
	for _, w := range d.PolicyWarnings {
		out = append(out, field{"Policy", w})
	}
	out = append(out, packageFields(d.Packages, d.Code != "")...)
	out = append(out, field{"Digest", d.Digest}, field{"Deadline", d.Deadline.Format(time.RFC3339)})
	if d.InboxURL != "" {
		out = append(out, field{"Inbox", d.InboxURL})
	}
	return out
}

// packageFields are the lines of a notification's packages: their requirements on one line,
// or, with the code, one line each with every hash.
func packageFields(pkgs []guard.Package, withHashes bool) []field {
	if len(pkgs) == 0 {
		return nil
	}
	if withHashes {
		var out []field
		for _, p := range pkgs {
			out = append(out, field{"Package", p.Requirement() + " --hash=" + strings.Join(p.Hashes, " --hash=")})
		}
		return out
	}
	var reqs []string
	for _, p := range pkgs {
		reqs = append(reqs, p.Requirement())
	}
	return []field{{"Packages", strings.Join(reqs, ", ") + " (hashes in the inbox)"}}
}

// oneLine returns s as one line of visible text: suspicious characters escaped
// (pysource.VisibleText) and tab, line feed and carriage return written as \t, \n and \r.
func oneLine(s string) string {
	s = pysource.VisibleText(s)
	return strings.NewReplacer("\t", `\t`, "\n", `\n`, "\r", `\r`).Replace(s)
}

// codeLines returns the code as visible text, each line prefixed with prefix, cut after max
// bytes (and saying so).
func codeLines(code, prefix string, maxBytes int) string {
	text := pysource.VisibleText(code)
	text = strings.ReplaceAll(text, "\r", `\r`)
	cut := ""
	if len(text) > maxBytes {
		text, cut = truncate(text, maxBytes), fmt.Sprintf("%s[... %d more bytes: read the rest in the inbox]\n", prefix, len(code)-maxBytes)
	}
	var b strings.Builder
	for _, l := range strings.SplitAfter(strings.TrimSuffix(text, "\n"), "\n") {
		b.WriteString(prefix)
		b.WriteString(strings.TrimSuffix(l, "\n"))
		b.WriteString("\n")
	}
	b.WriteString(cut)
	return b.String()
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
