package inbox

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	tclient "go.temporal.io/sdk/client"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// The inbox accepts passkey assertions, at sign-in and for decisions, only when made on its own
// origin (scheme, host and port), and only when the passkey's signature counter grew since the
// last assertion it accepted: one made on plain http beside the https inbox, or on another port
// of its host, is refused, and so is one whose counter did not grow (a cloned authenticator).
func TestPasskeyAssertionsAreBoundToTheInboxOrigin(t *testing.T) {
	const origin = "https://inbox.example.com"
	alice := reviewertest.NewPasskey(t, "alice", "inbox.example.com")
	dir := t.TempDir()
	reviewers := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(reviewers, []byte(alice.AllowedLine(t)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tc, err := tclient.NewLazyClient(tclient.Options{HostPort: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	s, err := New(Config{Temporal: tc, ReviewersPath: reviewers, Origin: origin + ":443", PasskeyCountersPath: filepath.Join(dir, "counters.json")})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", origin+"/signin", nil))
	cookie := w.Result().Cookies()[0]
	post := func(path string, body any) *httptest.ResponseRecorder {
		t.Helper()
		b, _ := json.Marshal(body)
		r := httptest.NewRequest("POST", origin+path, strings.NewReader(string(b)))
		r.AddCookie(cookie)
		r.Header.Set("Origin", origin)
		who := s.signIns.get(r)
		if who == nil {
			t.Fatalf("POST %s: no session for cookie %v", path, cookie)
		}
		r.Header.Set("X-CSRF-Token", who.csrf)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if c := w.Result().Cookies(); len(c) > 0 && c[0].Value != "" {
			cookie = c[0] // signed in: a new session
		}
		return w
	}
	signInFrom := func(pageOrigin string, counter uint32) *httptest.ResponseRecorder {
		t.Helper()
		w := post("/passkey/login/begin", map[string]string{})
		var begin struct{ Challenge string }
		if err := json.Unmarshal(w.Body.Bytes(), &begin); err != nil || w.Code != http.StatusOK {
			t.Fatalf("login begin: %d %s", w.Code, w.Body)
		}
		ch, _ := base64.RawURLEncoding.DecodeString(begin.Challenge)
		return post("/passkey/login/finish", alice.Assert(t, ch, pageOrigin, counter))
	}
	for _, tc := range []struct {
		name, origin string
		counter      uint32
		want         string // the refusal's reason, "" to sign in
	}{
		{"plain http beside the https inbox", "http://inbox.example.com", 3, string(approval.ReasonWrongOrigin)},
		{"another port", "https://inbox.example.com:8443", 3, string(approval.ReasonWrongOrigin)},
		{"the inbox's origin", origin, 3, ""},
		{"the same counter again", origin, 3, string(approval.ReasonCounterReplayed)},
		{"a grown counter", origin, 4, ""},
	} {
		w := signInFrom(tc.origin, tc.counter)
		switch {
		case tc.want == "" && w.Code != http.StatusOK:
			t.Errorf("sign-in, %s: %d %s; want it signed in", tc.name, w.Code, w.Body)
		case tc.want != "" && (w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "("+tc.want+")")):
			t.Errorf("sign-in, %s: %d %s; want 403 (%s)", tc.name, w.Code, w.Body, tc.want)
		}
	}

	// Decisions, verified by the inbox before it sends them to the workflow.
	var who *signIn
	for _, x := range s.signIns.byID {
		if x.principal == "alice" {
			who = x
		}
	}
	if who == nil {
		t.Fatal("no signed-in reviewer")
	}
	ri := &client.RunInfo{Running: true, Status: contract.Status{State: contract.StatusAwaitingApproval, WorkflowID: "sandbox-1", RunID: uuid.NewString(), StatementVersion: approval.StatementVersion,
		SandboxTaskQueue: "sandboxflow", Request: guard.Summary{Digest: "sha256:" + strings.Repeat("ab", 32)}}}
	decide := func(pageOrigin string, counter uint32) error {
		f := reviewertest.Fields(ri.Status.WorkflowID, ri.Status.RunID, ri.Status.Request.Digest, ri.Status.SandboxTaskQueue, true)
		d := alice.Decision(t, f, pageOrigin, counter)
		_, err := s.verifyDecision(ri, decideRequest{Approve: true, ApprovalID: f.ApprovalID, Expires: f.Expires.Format(time.RFC3339),
			Statement: d.Statement, WebAuthn: d.WebAuthn}, who)
		return err
	}
	for _, tc := range []struct {
		name, origin string
		counter      uint32
		want         approval.Reason
	}{
		{"plain http beside the https inbox", "http://inbox.example.com", 5, approval.ReasonWrongOrigin},
		{"another port", "https://inbox.example.com:444", 5, approval.ReasonWrongOrigin},
		{"a counter that did not grow since sign-in", origin, 4, approval.ReasonCounterReplayed},
		{"the inbox's origin", origin, 5, ""},
		{"a replayed counter", origin, 5, approval.ReasonCounterReplayed},
	} {
		err := decide(tc.origin, tc.counter)
		if tc.want == "" && err != nil || tc.want != "" && !errors.Is(err, tc.want) {
			t.Errorf("decision, %s: %v; want %q", tc.name, err, tc.want)
		}
	}
}
