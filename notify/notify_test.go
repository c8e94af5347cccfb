package notify

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// hostile is what a model's code and its orchestrator can choose: the workflow id, the metadata,
// file names, egress hosts and secret names end up in a notification.
func hostile() contract.NotifyInput {
	return contract.NotifyInput{
		Event:      contract.EventRunAwaiting,
		WorkflowID: "run-1 <!channel> <https://evil.example|click> *approved*\r\nBcc: attacker@evil.example",
		RunID:      "r1", Digest: "sha256:ab", Language: "python",
		Code:     "import os\r\nprint('\u202eevil')\nSubject: forged\n",
		Files:    []guard.FileSummary{{Name: "<b>x.py", Size: 3}},
		Egress:   []string{"api.example.com:443"},
		Secrets:  []string{"GITHUB_TOKEN"},
		Metadata: guard.Metadata{RequestedBy: "agent\nApproved-By: alice", Agent: "&lt;"},
		Deadline: time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC),
	}
}

func TestSignKnownVector(t *testing.T) {
	// The Standard Webhooks libraries' own test vector.
	key, err := base64.StdEncoding.DecodeString("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("Sign = %s; want %s", got, want)
	}
}

func TestMessageIDStablePerWait(t *testing.T) {
	in := hostile()
	a, b := MessageID(in), MessageID(in)
	if a != b || !strings.HasPrefix(a, "msg_") {
		t.Fatalf("MessageID = %q, %q; want one stable msg_ id", a, b)
	}
	cell := in
	cell.Event, cell.Cell = contract.EventCellAwaiting, 2
	other := in
	other.RunID = "r2"
	for _, o := range []contract.NotifyInput{cell, other} {
		if MessageID(o) == a {
			t.Errorf("MessageID(%+v) = %s, the same as another wait's", o, a)
		}
	}
}

func TestSlackBodyEscapesModelStrings(t *testing.T) {
	for _, includeCode := range []bool{false, true} {
		m := newMessage(hostile(), "https://inbox.example/", includeCode, time.Now())
		b := slackBody(m)
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if b.Text != "sandboxflow: a run waits for approval (sha256:ab)" {
			t.Errorf("fallback text %q: want no orchestrator-chosen id in it", b.Text)
		}
		if raw := string(raw); strings.Contains(raw, "evil.example|click") || !strings.Contains(raw, "Run: (an id outside the documented character set") {
			t.Errorf("a hostile workflow id is shown as text, not as data:\n%s", raw)
		}
		for _, blk := range b.Blocks {
			texts := blk.Fields
			if blk.Text != nil {
				texts = append(texts, *blk.Text)
			}
			for _, tx := range texts {
				if tx.Type == "mrkdwn" && tx.Text != "<https://inbox.example/run/run-1%20%3C%21channel%3E%20%3Chttps:%2F%2Fevil.example%7Cclick%3E%20%2Aapproved%2A%0D%0ABcc:%20attacker@evil.example|Open in the inbox to review and decide>" {
					t.Errorf("a mrkdwn text holds %q; only the inbox link may be mrkdwn", tx.Text)
				}
				if strings.ContainsAny(tx.Text, "\r\u202e") {
					t.Errorf("block text %q holds a raw CR or bidi control", tx.Text)
				}
			}
		}
		if got := bytes.Contains(raw, []byte("import os")); got != includeCode {
			t.Errorf("includeCode=%t: the body holds the code: %t", includeCode, got)
		}
		if includeCode && !bytes.Contains(raw, []byte(`| print('\\u202eevil')`)) {
			t.Errorf("the code is not escaped and prefixed in %s", raw)
		}
	}
}

func TestEmailHeadersHoldNoInjection(t *testing.T) {
	e, err := NewEmail(EmailConfig{Addr: "127.0.0.1:25", From: "sandboxflow@example.com", To: []string{"reviewers@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, includeCode := range []bool{false, true} {
		m := newMessage(hostile(), "", includeCode, time.Now())
		msg, err := mail.ReadMessage(bytes.NewReader(e.render(m)))
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range []string{"Bcc", "Approved-By"} {
			if v := msg.Header.Get(h); v != "" {
				t.Errorf("header %s: %q was injected", h, v)
			}
		}
		subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
		if err != nil {
			t.Fatal(err)
		}
		if subject != "sandboxflow: a run waits for approval (sha256:ab)" {
			t.Errorf("Subject %q: want no orchestrator-chosen id in it", subject)
		}
		if got := msg.Header["To"]; len(got) != 1 || got[0] != "reviewers@example.com" {
			t.Errorf("To = %v", got)
		}
		body, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(body), "\r\n", "\n")
		if !strings.Contains(text, "Run:          (an id outside the documented character set") || strings.Contains(text, "evil.example") {
			t.Errorf("a hostile workflow id is shown as text, not as data:\n%s", text)
		}
		if strings.Contains(text, "\nApproved-By") || strings.Contains(text, "\nSubject: forged") {
			t.Errorf("a model's string starts a line of its own in the body:\n%s", text)
		}
		if got := strings.Contains(text, "import os"); got != includeCode {
			t.Errorf("includeCode=%t: the body holds the code: %t\n%s", includeCode, got, text)
		}
		if includeCode && (!strings.Contains(text, "| import os\\r\n") || !strings.Contains(text, `| print('\u202eevil')`)) {
			t.Errorf("the code is not escaped and prefixed:\n%s", text)
		}
	}
}

func TestLoadSecret(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		content string
		ok      bool
	}{
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n", true},
		{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", false},
		{"whsec_c2hvcnQ=", false},
		{"whsec_!!!", false},
	} {
		p := filepath.Join(dir, "s")
		if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadSecret(p)
		if (err == nil) != tc.ok {
			t.Errorf("LoadSecret(%q) error = %v; want ok=%t", tc.content, err, tc.ok)
		}
	}
}

// A conversation's diff holds code: text channels carry it prefixed, line by line, like the
// code; the fields name the previous run and what changed.
func TestChangesInTextChannels(t *testing.T) {
	in := hostile()
	in.Conversation = "task-1"
	m := newMessage(in, "", true, time.Now())
	m.Data.Changes = &Changes{PreviousWorkflowID: "run-0", PreviousOutcome: "denied by bob: no", ChangedFiles: []string{"code"}, Added: 1, Removed: 1,
		Diff: "--- previous/code\n+++ this/code\n@@ -1 +1 @@\n-x = 1\n+Subject: forged\n"}
	text := emailText(m)
	for _, want := range []string{"Previous run: run-0, denied by bob: no\n", "Changes:      code (+1 -1 lines; a reading aid, not what is signed)\n", "| +Subject: forged\n", "| @@ -1 +1 @@\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("the email lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "\n+Subject") {
		t.Errorf("a diff line starts a line of its own:\n%s", text)
	}
	raw, err := json.Marshal(slackBody(m))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(`| +Subject: forged`)) {
		t.Errorf("the Slack body lacks the prefixed diff: %s", raw)
	}
}

// A run whose conversation's previous one is a session names it as a session, and an empty
// diff says the files and settings are the same (a session has no code of its own to compare).
func TestChangesAfterASession(t *testing.T) {
	ch := changesOf(&client.Changes{Previous: &client.PreviousRun{WorkflowID: "session-0", Session: true, State: contract.SessionClosed}}, false)
	got := ch.fields()
	want := []field{{"Previous session", "session-0, session closed, unverified (a session's state is its workflow's word)"}, {"Changes", "none: the same files and settings"}}
	if !slices.Equal(got, want) || !ch.PreviousSession {
		t.Errorf("fields %q (previous session %t); want %q", got, ch.PreviousSession, want)
	}
}

// TestNotificationNamesTheImage: a notification names the image the reviewer approves, when the
// check recorded one, in every text channel's fields and in the webhook's JSON.
func TestNotificationNamesTheImage(t *testing.T) {
	in := hostile()
	in.Image = "sha256:c0ffee"
	m := newMessage(in, "", false, time.Now())
	if text := emailText(m); !strings.Contains(text, "Image:") || !strings.Contains(text, "sha256:c0ffee") {
		t.Errorf("the email does not name the image:\n%s", text)
	}
	raw, err := json.Marshal(m)
	if err != nil || !bytes.Contains(raw, []byte(`"image":"sha256:c0ffee"`)) {
		t.Errorf("the webhook body %s, %v; want the image", raw, err)
	}
	if text := emailText(newMessage(hostile(), "", false, time.Now())); strings.Contains(text, "Image:") {
		t.Errorf("a run without an image names one:\n%s", text)
	}
}

// A notification carries the policy rules' warnings and groups as the workflow gave them, in
// its JSON and in its text renderings.
func TestMessageCarriesPolicyWarnings(t *testing.T) {
	in := hostile()
	in.PolicyWarnings = []string{"corp: reaches corp", "needs 1 approval(s) from security"}
	m := newMessage(in, "", false, time.Now())
	if len(m.Data.PolicyWarnings) != 2 || m.Data.PolicyWarnings[1] != "needs 1 approval(s) from security" {
		t.Errorf("policy warnings %q", m.Data.PolicyWarnings)
	}
	n := 0
	for _, f := range m.fields() {
		if f.Label == "Policy" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("the text renderings (Slack, email) show %d policy lines; want 2", n)
	}
}

// A notification names the packages: with the code, each with every hash; without, their
// requirements only. A conversation's package changes are a line of their own.
func TestPackagesInTextChannels(t *testing.T) {
	hash := "sha256:" + strings.Repeat("a", 64)
	in := hostile()
	in.Packages = []guard.Package{{Name: "alpha", Version: "1.0", Hashes: []string{hash}}}
	withCode := emailText(newMessage(in, "", true, time.Now()))
	if !strings.Contains(withCode, "alpha==1.0 --hash="+hash) {
		t.Errorf("the email with code lacks the package and its hash:\n%s", withCode)
	}
	m := newMessage(in, "", false, time.Now())
	m.Data.Changes = changesOf(&client.Changes{Previous: &client.PreviousRun{WorkflowID: "run-0"}, ChangedFiles: []string{"packages"},
		Packages: guard.DiffPackages(nil, in.Packages)}, false)
	without := emailText(m)
	for _, want := range []string{"alpha==1.0 (hashes in the inbox)", "Package changes: added alpha==1.0"} {
		if !strings.Contains(without, want) {
			t.Errorf("the email without code lacks %q:\n%s", want, without)
		}
	}
	if strings.Contains(without, hash) {
		t.Errorf("the email without code carries a hash:\n%s", without)
	}
	raw, err := json.Marshal(m)
	if err != nil || !bytes.Contains(raw, []byte(`"packages":[{"name":"alpha","version":"1.0","hashes":["`+hash+`"]}]`)) {
		t.Errorf("the webhook body lacks the packages: %s", raw)
	}
}
