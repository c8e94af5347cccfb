package inbox

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	tclient "go.temporal.io/sdk/client"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/hosttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// The session page, its sign form and its decide endpoint, against session statuses built here
// by the rules every part follows (guard's settings, code, cell, result and chain digests), read
// through a door that answers what a Session workflow's worker would, or what a namespace
// writer's would when it lies.

const sessionTestOrigin = "http://localhost:8235"

// sessionToken is the value of an env var the policy marks sensitive.
const sessionToken = "tok-session-0123456789abcdef"

// sessionFixture is one session: its checked settings, its start input and the status its
// workflow answers, with cells appended by the chain rule.
type sessionFixture struct {
	t       *testing.T
	policy  guard.Policy
	checked guard.CheckedSession
	input   contract.SessionInput
	status  contract.SessionStatus
	start   time.Time
}

func newSessionFixture(t *testing.T, id string) *sessionFixture {
	t.Helper()
	policy := guard.Policy{Languages: []string{guard.Python, guard.Shell}, SensitiveEnv: []string{"TOKEN"}}
	req := guard.SessionRequest{
		Settings: guard.Settings{
			Files:    map[string][]byte{"data.csv": []byte("a,b\n1,2\n"), "helper.py": []byte("def f():\n\treturn 1\n")},
			Env:      map[string]string{"MODE": "dry run ", "TOKEN": sessionToken},
			Metadata: guard.Metadata{Agent: "notebook-agent", RequestedBy: "orchestrator@ci"},
		},
		MaxCells: 10,
	}
	cs, err := policy.CheckSession(req, "docker")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	f := &sessionFixture{t: t, policy: policy, checked: cs, input: contract.SessionInput{Request: req}, start: start}
	f.status = contract.SessionStatus{
		State: contract.SessionOpen, WorkflowID: id, RunID: uuid.NewString(), SandboxTaskQueue: "sandboxflow-host-a",
		SandboxID: "c0ffee", StatementVersion: approval.StatementVersion, Settings: cs.Summary(),
		Chain: guard.ChainStart(cs.Digest), Opened: start, Deadline: start.Add(cs.Lifetime), Cells: []contract.CellStatus{},
	}
	return f
}

// add appends a cell with code in state; a result (for a cell that ran) goes into the chain.
func (f *sessionFixture) add(code, state string, res *guard.Result) *contract.CellStatus {
	f.t.Helper()
	n := len(f.status.Cells) + 1
	cell, err := f.policy.CheckCell(f.checked, n, "", code)
	if err != nil {
		f.t.Fatal(err)
	}
	c := contract.CellStatus{Cell: n, Language: cell.Language, Code: code, CodeBytes: len(code), CodeDigest: cell.CodeDigest,
		Chain: f.status.Chain, Digest: guard.CellDigest(f.checked.Digest, n, cell.CodeDigest, f.status.Chain), State: state,
		Submitted: f.start.Add(time.Duration(n) * time.Minute)}
	if state == contract.StatusAwaitingApproval {
		c.ApprovalDeadline = c.Submitted.Add(time.Hour)
	}
	if res != nil {
		c.Result = res
		c.ResultDigest = guard.ResultDigest(*res)
		c.Decision = &contract.DecisionRecord{ApprovalID: uuid.NewString(), Approve: true, Reviewer: "alice", Via: "update", Time: c.Submitted}
		f.status.Chain = guard.ChainNext(f.status.Chain, c.Digest, c.ResultDigest)
	}
	f.status.Cells = append(f.status.Cells, c)
	return &f.status.Cells[n-1]
}

// threeCells is the usual session: cell 1 set x, cell 2 wrote a file after a state reset,
// cell 3 waits and changes one line of cell 2.
func (f *sessionFixture) threeCells() {
	f.add("x = 41\nprint('cell one says', x)\n", contract.StatusSucceeded, &guard.Result{Outcome: guard.OutcomeSucceeded, OK: true,
		Stdout: []byte("cell one says 41\n"), Duration: 40 * time.Millisecond})
	f.add("import json\nopen('out.json', 'w').write(json.dumps({'y': 2}))\nprint('wrote out.json')\n", contract.StatusSucceeded,
		&guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("wrote out.json\n"), StateReset: true,
			Files: []guard.File{{Name: "out.json", Size: 8, Content: []byte(`{"y": 2}`)}}, Duration: 30 * time.Millisecond})
	f.add("import json\nprint(json.load(open('out.json'))['y'] + 40)\nprint('wrote out.json')\n", contract.StatusAwaitingApproval, nil)
}

// sessionDoorFake answers for one session as a Session workflow's worker would, through the
// JSON a query carries, and records the decisions the inbox sends.
type sessionDoorFake struct {
	mu      sync.Mutex
	info    sessionInfo
	input   contract.SessionInput
	decided []contract.CellDecision
	runIDs  []string
	// changes and changesErr are what SessionChanges answers, as the client's door would;
	// changesAsked records what it was asked.
	changes      *client.Changes
	changesErr   error
	changesAsked []guard.SessionRequest
	// unverified is what CheckCellResults answers: why each cell's result does not verify;
	// hostsAsked the hosts it was asked to verify against.
	unverified map[int]error
	hostsAsked []*receipt.Hosts
	// checked is what CheckedReviewers answers: the keys the session's check recorded; nil
	// answers that no check could be read (the inbox then leaves the judgment to the workflow).
	checked []approval.Key
}

func (d *sessionDoorFake) CheckedReviewers(context.Context, string, string) ([]approval.Key, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.checked == nil {
		return nil, errors.New("the fake holds no check")
	}
	return d.checked, nil
}

func (d *sessionDoorFake) CheckCellResults(_ context.Context, _ string, results map[int]guard.Result, hosts *receipt.Hosts) map[int]error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hostsAsked = append(d.hostsAsked, hosts)
	out := map[int]error{}
	for i := range results {
		out[i] = d.unverified[i]
	}
	return out
}

func (d *sessionDoorFake) set(f *sessionFixture) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, err := json.Marshal(f.status)
	if err != nil {
		f.t.Fatal(err)
	}
	var st contract.SessionStatus
	if err := json.Unmarshal(b, &st); err != nil {
		f.t.Fatal(err)
	}
	d.info = sessionInfo{Status: st, Running: true, Started: f.start}
	d.input = f.input
}

func (d *sessionDoorFake) ReadSession(_ context.Context, id string) (sessionInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if id != d.info.Status.WorkflowID {
		return sessionInfo{}, &notSessionError{WorkflowID: id, Type: contract.WorkflowName}
	}
	b, _ := json.Marshal(d.info.Status)
	si := d.info
	si.Status = contract.SessionStatus{}
	_ = json.Unmarshal(b, &si.Status)
	return si, nil
}

func (d *sessionDoorFake) SessionInput(_ context.Context, id, runID string) (contract.SessionInput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.input, nil
}

func (d *sessionDoorFake) DecideCell(_ context.Context, id, runID string, cd contract.CellDecision) (contract.DecideResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.decided = append(d.decided, cd)
	d.runIDs = append(d.runIDs, runID)
	state := contract.StatusRunning
	if !cd.Decision.Approve {
		state = contract.StatusDenied
	}
	return contract.DecideResult{ApprovalID: cd.Decision.ApprovalID, Approve: cd.Decision.Approve, Reviewer: cd.Decision.Reviewer, Digest: cd.Decision.Digest, State: state}, nil
}

func (d *sessionDoorFake) PendingSessions(context.Context) ([]pendingSession, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return []pendingSession{{WorkflowID: d.info.Status.WorkflowID, RunID: d.info.Status.RunID, StartTime: d.info.Started}}, nil
}

func (d *sessionDoorFake) SessionChanges(_ context.Context, id, runID string, started time.Time, req guard.SessionRequest) (*client.Changes, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if id != d.info.Status.WorkflowID || runID != d.info.Status.RunID || !started.Equal(d.info.Started) {
		return nil, fmt.Errorf("changes of %s run %s started %s: not the session read", id, runID, started)
	}
	d.changesAsked = append(d.changesAsked, req)
	return d.changes, d.changesErr
}

func (d *sessionDoorFake) sent() []contract.CellDecision {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]contract.CellDecision(nil), d.decided...)
}

// reviewerBrowser is a browser signed in to the inbox as a reviewer with a passkey.
type reviewerBrowser struct {
	t       *testing.T
	s       *Server
	pk      *reviewertest.Passkey
	cookie  *http.Cookie
	counter uint32
}

// newSessionServer returns an inbox whose Temporal client never connects, reading sessions
// through door, with alice's passkey in its reviewers file, and alice signed in.
func newSessionServer(t *testing.T, door sessionDoor, now time.Time) *reviewerBrowser {
	t.Helper()
	alice := reviewertest.NewPasskey(t, "alice", "localhost")
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
	s, err := New(Config{Temporal: tc, ReviewersPath: reviewers, Origin: sessionTestOrigin, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	s.door = door
	b := &reviewerBrowser{t: t, s: s, pk: alice, counter: 1}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/signin", nil))
	b.cookie = w.Result().Cookies()[0]
	w = b.post("/passkey/login/begin", map[string]string{})
	var begin struct{ Challenge string }
	if err := json.Unmarshal(w.Body.Bytes(), &begin); err != nil || w.Code != http.StatusOK {
		t.Fatalf("login begin: %d %s", w.Code, w.Body)
	}
	ch, _ := base64.RawURLEncoding.DecodeString(begin.Challenge)
	if w = b.post("/passkey/login/finish", alice.Assert(t, ch, sessionTestOrigin, b.next())); w.Code != http.StatusOK {
		t.Fatalf("sign-in: %d %s", w.Code, w.Body)
	}
	return b
}

func (b *reviewerBrowser) next() uint32 {
	b.counter++
	return b.counter
}

// post sends body as JSON from the inbox's own page (its origin, the session's CSRF token).
func (b *reviewerBrowser) post(path string, body any) *httptest.ResponseRecorder {
	b.t.Helper()
	return b.postFrom(sessionTestOrigin, true, path, body)
}

func (b *reviewerBrowser) postFrom(origin string, withCookie bool, path string, body any) *httptest.ResponseRecorder {
	b.t.Helper()
	j, _ := json.Marshal(body)
	r := httptest.NewRequest("POST", path, strings.NewReader(string(j)))
	if withCookie {
		r.AddCookie(b.cookie)
		if who := b.s.signIns.get(r); who != nil {
			r.Header.Set("X-CSRF-Token", who.csrf)
		}
	}
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	w := httptest.NewRecorder()
	b.s.ServeHTTP(w, r)
	if c := w.Result().Cookies(); len(c) > 0 && c[0].Value != "" {
		b.cookie = c[0]
	}
	return w
}

func (b *reviewerBrowser) get(path string) (int, string) {
	b.t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	r.AddCookie(b.cookie)
	w := httptest.NewRecorder()
	b.s.ServeHTTP(w, r)
	body, _ := io.ReadAll(w.Body)
	return w.Code, string(body)
}

var statementRE = regexp.MustCompile(`(?s)id="statement-(approve|deny)" data-approval-id="([^"]*)" data-expires="([^"]*)">(.*?)</pre>`)

// pageStatement is a statement the page offers to sign.
type pageStatement struct {
	ApprovalID, Expires, Text string
}

// statements returns the statements a session page offers, by kind.
func statements(page string) map[string]pageStatement {
	out := map[string]pageStatement{}
	for _, m := range statementRE.FindAllStringSubmatch(page, -1) {
		out[m[1]] = pageStatement{ApprovalID: html.UnescapeString(m[2]), Expires: html.UnescapeString(m[3]), Text: html.UnescapeString(m[4])}
	}
	return out
}

// sign returns the body the page posts once the passkey signed st for cell with digest.
func (b *reviewerBrowser) sign(st pageStatement, approve bool, cell int, digest, reason string) map[string]any {
	return map[string]any{
		"approve": approve, "approval_id": st.ApprovalID, "expires": st.Expires, "statement": st.Text, "reason": reason,
		"webauthn": b.pk.Assert(b.t, approval.WebAuthnChallenge([]byte(st.Text)), sessionTestOrigin, b.next()),
		"cell":     cell, "digest": digest,
	}
}

// TestSessionPageShowsEveryCell: the page shows the settings (file contents, env values, a
// sensitive one as its length, the caps and the settings digest), every earlier cell's code
// and output (stdout, the state reset, the file it wrote), no diff for a waiting cell that
// retries none, and the approve statement over the digest recomputed from all of it.
func TestSessionPageShowsEveryCell(t *testing.T) {
	f := newSessionFixture(t, "session-show")
	f.threeCells()
	door := &sessionDoorFake{}
	door.set(f)
	b := newSessionServer(t, door, f.start.Add(5*time.Minute))
	code, page := b.get("/session/session-show")
	if code != http.StatusOK {
		t.Fatalf("GET /session/session-show: %d %s", code, page)
	}
	text := html.UnescapeString(page)
	for _, want := range []string{
		// settings
		"notebook-agent", "orchestrator@ci", `MODE = "dry run "`, "TOKEN = ‹sensitive, 28 bytes›", "data.csv", "a,b", "helper.py",
		"⇥       return 1", "1h0m0s", "10m0s", `id="max-cells">10<`, f.checked.Digest, "sandboxflow-host-a",
		// earlier cells: code and output
		"cell one says", "cell one says 41", "wrote out.json", "State reset", "out.json", `{"y": 2}`,
		// the waiting cell
		"cell 3 waits for a decision", "Approve cell 3 with passkey",
		"The settings and every cell's code and output below hash to the digests and the chain the status names.",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the session page lacks %q", want)
		}
	}
	if strings.Contains(page, sessionToken) {
		t.Error("the session page shows the value of an env var the policy marks sensitive")
	}
	if strings.Contains(text, "Changes from cell") {
		t.Error("the waiting cell, which retries none, is diffed against another cell (another program)")
	}
	for i := 1; i <= 3; i++ {
		if !strings.Contains(page, fmt.Sprintf(`id="code-%d"`, i)) {
			t.Errorf("the page lacks cell %d's code", i)
		}
	}
	st := statements(page)
	ap, ok := st["approve"]
	if !ok {
		t.Fatalf("no approve statement on the page: %s", page)
	}
	want := guard.CellDigest(f.checked.Digest, 3, f.status.Cells[2].CodeDigest, f.status.Chain)
	if !strings.Contains(ap.Text, "digest: "+want) || !strings.Contains(ap.Text, "run_id: "+f.status.RunID) ||
		!strings.Contains(ap.Text, "sandbox_task_queue: sandboxflow-host-a") || !strings.Contains(ap.Text, "reviewer: alice") {
		t.Errorf("approve statement %q; want cell 3's digest %s, the session's run id, the host's task queue and alice", ap.Text, want)
	}
	if d := st["deny"]; !strings.Contains(d.Text, "digest: "+want) {
		t.Errorf("deny statement %q; want cell 3's digest", d.Text)
	}
	if rows := diffRows(page); len(rows) != 0 {
		t.Errorf("diff rows %q for a cell that retries none; want none", rows)
	}
}

// diffRows are the rows of the page's diff: their kind (same, add, del) and their text.
func diffRows(page string) []string {
	rows := regexp.MustCompile(`<tr class="d-(same|add|del)">.*?<td class="src">(.*?)</td></tr>`).FindAllStringSubmatch(page, -1)
	var got []string
	for _, r := range rows {
		got = append(got, r[1]+" "+html.UnescapeString(r[2]))
	}
	return got
}

// TestSessionPageWarnsOfFilesCellsWrote: a file an earlier cell wrote into /work that the
// interpreter may run by itself (a module named like a standard one) is warned of, as an input
// file is.
func TestSessionPageWarnsOfFilesCellsWrote(t *testing.T) {
	f := newSessionFixture(t, "session-warn")
	f.add("open('json.py', 'w').write('loads = eval')\n", contract.StatusSucceeded, &guard.Result{Outcome: guard.OutcomeSucceeded, OK: true,
		Files: []guard.File{{Name: "json.py", Size: 12, Content: []byte("loads = eval")}}})
	f.add("import json\n", contract.StatusAwaitingApproval, nil)
	door := &sessionDoorFake{}
	door.set(f)
	b := newSessionServer(t, door, f.start)
	_, page := b.get("/session/session-warn")
	if !strings.Contains(page, `id="startup-warning"`) || !strings.Contains(page, "cell 1 wrote json.py: module json shadows the standard module") {
		t.Errorf("no warning of json.py, which cell 1 wrote: %s", page)
	}
}

// TestSessionPageRefusesSigningALyingStatus: a status (a namespace writer's worker's answer)
// that shows other code, other output, another chain or other settings than it hashes to gets
// no approve statement, the page says what disagrees, and a denial stays possible.
func TestSessionPageRefusesSigningALyingStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		lie  func(f *sessionFixture)
		want string
	}{
		{"an earlier cell's output altered", func(f *sessionFixture) {
			f.status.Cells[0].Result.Stdout = []byte("cell one says 0\n")
		}, "cell 1's result_digest"},
		{"an earlier cell's code altered", func(f *sessionFixture) {
			f.status.Cells[1].Code = strings.Replace(f.status.Cells[1].Code, "'y': 2", "'y': 3", 1)
		}, "cell 2's code_digest"},
		{"the waiting cell's code altered", func(f *sessionFixture) {
			f.status.Cells[2].Code = "print('harmless')\n"
			f.status.Cells[2].CodeBytes = len(f.status.Cells[2].Code)
		}, "cell 3's code_digest"},
		{"the waiting cell shown as sh", func(f *sessionFixture) {
			f.status.Cells[2].Language = guard.Shell
		}, "cell 3's code_digest"},
		{"the waiting cell's digest another session's", func(f *sessionFixture) {
			c := &f.status.Cells[2]
			c.Digest = guard.CellDigest("sha256:"+strings.Repeat("1", 64), 3, c.CodeDigest, c.Chain)
		}, "cell 3's digest"},
		{"the state reset hidden", func(f *sessionFixture) {
			f.status.Cells[1].Result.StateReset = false
		}, "cell 2's result_digest"},
		{"the session's chain altered", func(f *sessionFixture) {
			f.status.Chain = guard.ChainStart("sha256:" + strings.Repeat("0", 64))
		}, "the session's chain"},
		{"the waiting cell's chain altered", func(f *sessionFixture) {
			c := &f.status.Cells[2]
			c.Chain = guard.ChainStart(f.checked.Digest) // as if cells 1 and 2 never ran
			c.Digest = guard.CellDigest(f.checked.Digest, 3, c.CodeDigest, c.Chain)
		}, "cell 3's chain"},
		{"an earlier cell left out", func(f *sessionFixture) {
			f.status.Cells = append(f.status.Cells[:1], f.status.Cells[2:]...)
		}, "cell 3 in its place"},
		{"a denied cell shown with output", func(f *sessionFixture) {
			f.status.Cells[1].State = contract.StatusDenied
		}, "a result for a cell that was denied"},
		{"an env value other than the session started with", func(f *sessionFixture) {
			f.input.Request.Env["MODE"] = "delete everything"
		}, "the session's settings"},
		{"an input file left out", func(f *sessionFixture) {
			delete(f.input.Request.Files, "helper.py")
		}, "differ in their input files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newSessionFixture(t, "session-lie")
			f.threeCells()
			tc.lie(f)
			door := &sessionDoorFake{}
			door.set(f)
			b := newSessionServer(t, door, f.start.Add(5*time.Minute))
			_, page := b.get("/session/session-lie")
			st := statements(page)
			if _, ok := st["approve"]; ok || strings.Contains(page, `id="approve"`) {
				t.Errorf("the page of a lying status offers an approval")
			}
			refused := regexp.MustCompile(`(?s)id="approve-refused">(.*?)</p>`).FindStringSubmatch(page)
			if refused == nil || !strings.Contains(html.UnescapeString(refused[1]), tc.want) || !strings.Contains(refused[1], "do not approve") {
				t.Errorf("approval refusal %q; want it to say %q and not to approve", refused, tc.want)
			}
			if _, ok := st["deny"]; !ok {
				t.Error("no denial offered")
			}
			if p := regexp.MustCompile(`(?s)id="chain-problem">(.*?)</p>`).FindStringSubmatch(page); p == nil || !strings.Contains(html.UnescapeString(p[1]), tc.want) || strings.Contains(page, `id="chain-ok"`) {
				t.Errorf("the page's verdict %q; want it to say %q", p, tc.want)
			}
			// The endpoint refuses an approval whatever the page offers: signed over the
			// honest digest, nothing is sent.
			c := f.status.Cells[len(f.status.Cells)-1]
			fields := reviewertest.Fields(f.status.WorkflowID, f.status.RunID, c.Digest, f.status.SandboxTaskQueue, true)
			fields.Reviewer = "alice"
			text, _ := fields.Statement()
			w := b.post("/session/session-lie/decide", b.sign(pageStatement{ApprovalID: fields.ApprovalID, Expires: fields.Expires.Format(time.RFC3339), Text: string(text)}, true, c.Cell, c.Digest, ""))
			if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "do not approve") {
				t.Errorf("approval POST: %d %s; want 409 refused", w.Code, w.Body)
			}
			if n := len(door.sent()); n != 0 {
				t.Errorf("%d decisions sent for a lying status", n)
			}
		})
	}
}

// TestCellDecisions: an approval signed on the page is sent as decide-cell for the waiting
// cell, pinned to the session's run, and verifies against the reviewers file as the workflow
// will verify it; a cross-origin POST, one without a signed-in reviewer, one for cell 2 when cell
// 3 waits, one made on a page read before a newer cell came and one over a tampered statement
// are refused, and none of them sends anything.
func TestCellDecisions(t *testing.T) {
	f := newSessionFixture(t, "session-decide")
	f.threeCells()
	// The page as it was while cell 2 waited, before it ran and cell 3 came.
	early := newSessionFixture(t, "session-decide")
	early.status.RunID, early.checked, early.input = f.status.RunID, f.checked, f.input
	early.status.Settings = f.status.Settings
	early.add(f.status.Cells[0].Code, contract.StatusSucceeded, f.status.Cells[0].Result)
	early.add(f.status.Cells[1].Code, contract.StatusAwaitingApproval, nil)
	door := &sessionDoorFake{}
	door.set(early)
	b := newSessionServer(t, door, f.start.Add(5*time.Minute))
	_, earlyPage := b.get("/session/session-decide")
	earlyStmt := statements(earlyPage)["approve"]
	if earlyStmt.Text == "" {
		t.Fatal("no approve statement for cell 2")
	}
	earlyDigest := early.status.Cells[1].Digest

	door.set(f) // cell 2 ran; cell 3 waits
	_, page := b.get("/session/session-decide")
	st := statements(page)["approve"]
	cell3 := f.status.Cells[2]

	for _, tc := range []struct {
		name   string
		origin string
		cookie bool
		body   map[string]any
		code   int
		want   string
	}{
		{"cross-origin", "https://evil.example", true, b.sign(st, true, 3, cell3.Digest, ""), http.StatusForbidden, "origin"},
		{"no origin", "", true, b.sign(st, true, 3, cell3.Digest, ""), http.StatusForbidden, "origin"},
		{"no login", sessionTestOrigin, false, b.sign(st, true, 3, cell3.Digest, ""), http.StatusForbidden, "no sign-in goes with this request"},
		{"cell 2 while cell 3 waits", sessionTestOrigin, true, b.sign(st, true, 2, cell3.Digest, ""), http.StatusConflict, "cell 2 does not wait for a decision; cell 3 does"},
		{"a page read before cell 3 came", sessionTestOrigin, true, b.sign(earlyStmt, true, 2, earlyDigest, ""), http.StatusConflict, "cell 2 does not wait for a decision; cell 3 does"},
		{"cell 3 with the digest of another page", sessionTestOrigin, true, b.sign(st, true, 3, earlyDigest, ""), http.StatusConflict, "not the"},
		{"cell 3 signed over cell 2's statement", sessionTestOrigin, true, b.sign(earlyStmt, true, 3, cell3.Digest, ""), http.StatusForbidden, "statement_mismatch"},
		{"a denial without a reason", sessionTestOrigin, true, b.sign(statements(page)["deny"], false, 3, cell3.Digest, ""), http.StatusBadRequest, "needs a reason"},
	} {
		w := b.postFrom(tc.origin, tc.cookie, "/session/session-decide/decide", tc.body)
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("%s: %d %s; want %d %q", tc.name, w.Code, w.Body, tc.code, tc.want)
		}
	}
	// An anonymous session (not signed in) with its own CSRF token, from the inbox's origin.
	anon := &reviewerBrowser{t: t, s: b.s, pk: b.pk}
	w := httptest.NewRecorder()
	b.s.ServeHTTP(w, httptest.NewRequest("GET", "/signin", nil))
	anon.cookie = w.Result().Cookies()[0]
	if w := anon.post("/session/session-decide/decide", b.sign(st, true, 3, cell3.Digest, "")); w.Code != http.StatusUnauthorized {
		t.Errorf("an anonymous session's POST: %d %s; want 401", w.Code, w.Body)
	}
	if code, page := anon.get("/session/session-decide"); code != http.StatusSeeOther || strings.Contains(page, "x = 41") {
		t.Errorf("an anonymous session's GET of the page: %d; want a redirect to sign in, no code", code)
	}
	if n := len(door.sent()); n != 0 {
		t.Fatalf("%d decisions sent by refused POSTs", n)
	}

	// Signed in but not a listed reviewer any more: the reviewers file lost alice's line.
	reviewers := b.s.cfg.ReviewersPath
	line, _ := os.ReadFile(reviewers)
	if err := os.WriteFile(reviewers, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if w := b.post("/session/session-decide/decide", b.sign(st, true, 3, cell3.Digest, "")); w.Code != http.StatusUnauthorized {
		t.Errorf("a reviewer no longer listed: %d %s; want 401", w.Code, w.Body)
	}
	if n := len(door.sent()); n != 0 {
		t.Fatalf("%d decisions sent for a reviewer no longer listed", n)
	}
	// Signed in again (the line is back), the approval goes through.
	if err := os.WriteFile(reviewers, line, 0o644); err != nil {
		t.Fatal(err)
	}
	b2 := newSessionServerFor(t, b)
	_, page = b2.get("/session/session-decide")
	st = statements(page)["approve"]
	w = b2.post("/session/session-decide/decide", b2.sign(st, true, 3, cell3.Digest, ""))
	if w.Code != http.StatusOK {
		t.Fatalf("approval: %d %s", w.Code, w.Body)
	}
	sent := door.sent()
	if len(sent) != 1 || sent[0].Cell != 3 || door.runIDs[0] != f.status.RunID {
		t.Fatalf("sent %+v to runs %v; want one decision for cell 3 of run %s", sent, door.runIDs, f.status.RunID)
	}
	d := sent[0].Decision
	if d.Digest != cell3.Digest || !d.Approve || d.Reviewer != "alice" || d.WebAuthn == nil {
		t.Errorf("decision %+v; want alice's passkey approval of %s", d, cell3.Digest)
	}
	// What was sent verifies as the workflow verifies it: against the reviewers file, for
	// exactly this session, run, cell digest and host.
	rv, err := approval.LoadReviewers(reviewers)
	if err != nil {
		t.Fatal(err)
	}
	if rv, err = rv.WithPasskeyOrigin(sessionTestOrigin); err != nil {
		t.Fatal(err)
	}
	want := approval.Fields{Version: approval.StatementVersion, WorkflowID: f.status.WorkflowID, RunID: f.status.RunID, Digest: cell3.Digest,
		Approve: true, ApprovalID: d.ApprovalID, SandboxTaskQueue: f.status.SandboxTaskQueue, Reviewer: "alice", Expires: d.Expires}
	if _, err := approval.Verify(rv, want, d.Proof(), f.start.Add(5*time.Minute)); err != nil {
		t.Errorf("the decision sent does not verify for cell 3: %v", err)
	}
	// A second session's run of the same id (a reset) is another statement: refused.
	other := *f
	other.status.RunID = uuid.NewString()
	door.set(&other)
	if w := b2.post("/session/session-decide/decide", b2.sign(st, true, 3, cell3.Digest, "")); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "statement_mismatch") ||
		!strings.Contains(w.Body.String(), "This page is out of date") {
		t.Errorf("the approval replayed to another run: %d %s; want 403 statement_mismatch", w.Code, w.Body)
	}
	if n := len(door.sent()); n != 1 {
		t.Errorf("%d decisions sent; want the one", n)
	}
}

// newSessionServerFor signs b's reviewer in again (a fresh inbox session) on b's server.
func newSessionServerFor(t *testing.T, b *reviewerBrowser) *reviewerBrowser {
	t.Helper()
	nb := &reviewerBrowser{t: t, s: b.s, pk: b.pk, counter: b.counter}
	w := httptest.NewRecorder()
	b.s.ServeHTTP(w, httptest.NewRequest("GET", "/signin", nil))
	nb.cookie = w.Result().Cookies()[0]
	w = nb.post("/passkey/login/begin", map[string]string{})
	var begin struct{ Challenge string }
	if err := json.Unmarshal(w.Body.Bytes(), &begin); err != nil || w.Code != http.StatusOK {
		t.Fatalf("login begin: %d %s", w.Code, w.Body)
	}
	ch, _ := base64.RawURLEncoding.DecodeString(begin.Challenge)
	if w = nb.post("/passkey/login/finish", nb.pk.Assert(t, ch, sessionTestOrigin, nb.next())); w.Code != http.StatusOK {
		t.Fatalf("sign-in: %d %s", w.Code, w.Body)
	}
	return nb
}

// TestPendingListsSessionCells: the pending list shows a session with a waiting cell as a
// session, with the cell's index, linking to its session page.
func TestPendingListsSessionCells(t *testing.T) {
	f := newSessionFixture(t, "session-list")
	f.threeCells()
	door := &sessionDoorFake{}
	door.set(f)
	b := newSessionServer(t, door, f.start.Add(5*time.Minute))
	rows, err := b.s.pendingCellRows(context.Background())
	if err != nil || len(rows) != 1 {
		t.Fatalf("rows %+v, %v; want one", rows, err)
	}
	if r := rows[0]; !r.Session || r.Cell != 3 || r.Agent != "notebook-agent" || r.Language != guard.Python || r.TimeLeft != "58m" {
		t.Errorf("row %+v; want session-list's cell 3, its agent, language and time left", r)
	}
	var sb strings.Builder
	if err := b.s.pages["rows"].ExecuteTemplate(&sb, "rows", pageData{Rows: rows}); err != nil {
		t.Fatal(err)
	}
	if got := sb.String(); !strings.Contains(got, `href="/session/session-list"`) || !strings.Contains(got, "session · cell 3") || strings.Contains(got, `href="/run/`) {
		t.Errorf("rows %s; want a link to /session/session-list marked as its cell 3", got)
	}
}

// TestSessionPageShowsWhatCellsWrote: a file a cell wrote stays in /work, where a later cell can
// import it, so the page shows it as it shows an input file: whole past its first 4 KiB, tabs
// drawn, its confusable names warned of; and output past what the page shows says so.
func TestSessionPageShowsWhatCellsWrote(t *testing.T) {
	f := newSessionFixture(t, "session-wrote")
	helper := "def f():\n\treturn 1\n" + strings.Repeat("PADDING = 'innocent'\n", 250) + "p\u0430ypal = LAST_LINE_PAST_4_KIB\n"
	f.add("open('helper.py', 'w').write(HELPER)\nprint('x' * 70000)\n", contract.StatusSucceeded, &guard.Result{Outcome: guard.OutcomeSucceeded, OK: true,
		Stdout: []byte(strings.Repeat("x", 70000) + "\nTAIL_OF_STDOUT\n"),
		Files: []guard.File{{Name: "helper.py", Size: int64(len(helper)), Content: []byte(helper)},
			{Name: "codec.py", Size: 40, Content: []byte("# coding: raw_unicode_escape\n# \\u000aimport os\n")}}})
	f.add("import helper\n", contract.StatusAwaitingApproval, nil)
	door := &sessionDoorFake{}
	door.set(f)
	b := newSessionServer(t, door, f.start)
	_, page := b.get("/session/session-wrote")
	text := html.UnescapeString(page)
	for _, want := range []string{"LAST_LINE_PAST_4_KIB", "⇥       return 1", `id="names-warning"`, "cell 1 wrote helper.py, line 253 column 1: p\u0430ypal mixes scripts",
		"cell 1: written file codec.py line 1: coding declaration", "a later cell that imports or runs it reads other code than shown",
		"(the first 64 KiB: download it to read the rest)"} {
		if !strings.Contains(text, want) {
			t.Errorf("the session page lacks %q", want)
		}
	}
	if strings.Contains(text, "TAIL_OF_STDOUT") {
		t.Error("the page shows stdout past its first 64 KiB (the test assumes it does not)")
	}
}

// TestMergePendingListsASessionOnce: runs and session cells are listed together, newest first;
// a run row of a session's workflow and run (a client whose pending list holds sessions too) is
// left out, so the session is listed once, as a session.
func TestMergePendingListsASessionOnce(t *testing.T) {
	at := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	runs := []pendingRow{
		{ID: "sandbox-1", runID: "r1", at: at},
		{ID: "session-1", runID: "s1", at: at.Add(time.Minute)},
		{ID: "session-1", runID: "s0", at: at.Add(-time.Minute)}, // another run of that id: not the session's
	}
	cells := []pendingRow{{ID: "session-1", runID: "s1", Session: true, Cell: 2, at: at.Add(2 * time.Minute)}}
	var got []string
	for _, r := range mergePending(runs, cells) {
		got = append(got, fmt.Sprintf("%s/%s session=%v cell=%d", r.ID, r.runID, r.Session, r.Cell))
	}
	want := []string{"session-1/s1 session=true cell=2", "sandbox-1/r1 session=false cell=0", "session-1/s0 session=false cell=0"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("merged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSessionPageShowsACellsQuorum: a cell that needs two approvals and has one shows "1 of 2"
// and who approved, so the second reviewer knows the cell waits for them.
func TestSessionPageShowsACellsQuorum(t *testing.T) {
	f := newSessionFixture(t, "session-quorum")
	f.threeCells()
	f.status.Cells[2].Quorum = 2
	f.status.Cells[2].Approvals = []contract.DecisionRecord{{ApprovalID: "a-1", Approve: true, Reviewer: "bob", Fingerprint: "SHA256:bobskey"}}
	door := &sessionDoorFake{}
	door.set(f)
	b := newSessionServer(t, door, f.start.Add(5*time.Minute))
	code, page := b.get("/session/session-quorum")
	if code != http.StatusOK {
		t.Fatalf("GET /session/session-quorum: %d %s", code, page)
	}
	m := regexp.MustCompile(`(?s)id="cell-3-approvals">(.*?)</dd>`).FindStringSubmatch(page)
	if m == nil || !strings.Contains(m[1], "<strong>1 of 2</strong> needed") || !strings.Contains(m[1], "bob") || !strings.Contains(m[1], "SHA256:bobskey") {
		t.Errorf("cell 3's approvals %q; want 1 of 2 needed, by bob (SHA256:bobskey)", m)
	}
	if strings.Contains(page, `id="cell-1-approvals"`) {
		t.Error("cell 1, checked without a quorum, shows approvals")
	}
}

// TestSessionPageDiffsARetryAgainstTheCellItRetries: a waiting cell that retries a denied cell is
// shown with its diff against that cell, and its whole code.
func TestSessionPageDiffsARetryAgainstTheCellItRetries(t *testing.T) {
	f := newSessionFixture(t, "session-retry")
	f.add("x = 41\nprint('cell one says', x)\n", contract.StatusSucceeded, &guard.Result{Outcome: guard.OutcomeSucceeded, OK: true,
		Stdout: []byte("cell one says 41\n"), Duration: 40 * time.Millisecond})
	f.add("import shutil\nshutil.rmtree('/work')\n", contract.StatusDenied, nil)
	f.add("import os\nprint(os.listdir('/work'))\n", contract.StatusAwaitingApproval, nil).Retries = 2
	door := &sessionDoorFake{}
	door.set(f)
	b := newSessionServer(t, door, f.start.Add(5*time.Minute))
	code, page := b.get("/session/session-retry")
	if code != http.StatusOK {
		t.Fatalf("GET /session/session-retry: %d %s", code, page)
	}
	text := html.UnescapeString(page)
	i := strings.Index(text, "Changes from cell 2, which this cell retries")
	if i < 0 || !strings.Contains(text[i:], "rmtree") || !strings.Contains(text[i:], "listdir") {
		t.Errorf("the page lacks cell 3's diff against cell 2, which it retries:\n%s", text)
	}
	wantDiff := []string{"del import shutil", "del shutil.rmtree('/work')", "add import os", "add print(os.listdir('/work'))"}
	if got := diffRows(page); strings.Join(got, "\n") != strings.Join(wantDiff, "\n") {
		t.Errorf("diff rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantDiff, "\n"))
	}
	if !strings.Contains(page, `id="code-3"`) || !strings.Contains(text, "Cell 3 in full") {
		t.Error("the waiting cell's whole code is missing beside its diff")
	}
}

// TestSessionPageHidesUnverifiedCellResults: a cell result the session's history does not vouch
// for (a status a namespace writer's worker made up, a receipt that does not verify) is not
// shown: the page says why in its place, and its downloads are refused; a verified one beside it
// is shown.
func TestSessionPageHidesUnverifiedCellResults(t *testing.T) {
	f := newSessionFixture(t, "session-unverified")
	f.add("print(1)\n", contract.StatusSucceeded, &guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("VERIFIED_OUTPUT\n")})
	f.add("print(2)\n", contract.StatusSucceeded, &guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("all 42 tests passed\n")})
	door := &sessionDoorFake{unverified: map[int]error{2: &guard.ReceiptRefused{Field: "receipt", Msg: "the session's history records no result of cell 2"}}}
	door.set(f)
	b := newSessionServer(t, door, f.start)
	_, page := b.get("/session/session-unverified")
	text := html.UnescapeString(page)
	for _, want := range []string{"VERIFIED_OUTPUT", `id="result-unverified-2"`, "Unverified result, not shown:", "records no result of cell 2"} {
		if !strings.Contains(text, want) {
			t.Errorf("the session page lacks %q", want)
		}
	}
	if strings.Contains(text, "all 42 tests passed") {
		t.Error("the page shows an unverified cell result")
	}
	for cell, want := range map[string]int{"1": http.StatusOK, "2": http.StatusConflict} {
		if code, _ := b.get("/session/session-unverified/download/cell-" + cell + "-stdout"); code != want {
			t.Errorf("cell %s's stdout download: %d; want %d", cell, code, want)
		}
	}
}

// TestSessionPageVerifiesAgainstTheInboxsHosts: an inbox given the hosts file (--hosts) checks
// every cell result against it, not against the hosts the session's check recorded, which a
// namespace writer's workflow worker can record for a key of its own.
func TestSessionPageVerifiesAgainstTheInboxsHosts(t *testing.T) {
	f := newSessionFixture(t, "session-hosts")
	f.threeCells()
	door := &sessionDoorFake{}
	door.set(f)
	b := newSessionServer(t, door, f.start.Add(5*time.Minute))
	hosts, err := receipt.ParseHosts([]byte(hosttest.New(t, "host-a").Line()))
	if err != nil {
		t.Fatal(err)
	}
	b.s.cfg.Hosts = hosts
	if code, page := b.get("/session/session-hosts"); code != http.StatusOK {
		t.Fatalf("GET: %d %s", code, page)
	}
	if len(door.hostsAsked) == 0 || door.hostsAsked[len(door.hostsAsked)-1] != hosts {
		t.Errorf("cell results checked against %v; want the inbox's hosts", door.hostsAsked)
	}
}

// A passkey the reviewers file lists now but did not list when the session was checked is
// refused by the inbox with the reason, before anything is sent (the session would refuse it
// against the keys its check recorded, and say why only in the worker's log); the same passkey,
// once the check recorded it, decides.
func TestCellDecisionByAKeyListedAfterTheCheck(t *testing.T) {
	f := newSessionFixture(t, "session-decide")
	f.threeCells()
	door := &sessionDoorFake{checked: []approval.Key{{Principals: []string{"bob"}, Fingerprint: "SHA256:bob-was-listed-then"}}}
	door.set(f)
	b := newSessionServer(t, door, f.start.Add(5*time.Minute))
	_, page := b.get("/session/session-decide")
	if !strings.Contains(page, `id="decision-bar"`) || !strings.Contains(page, "Approve cell 3 <kbd>a</kbd>") {
		t.Errorf("the page of a waiting cell has no decision bar for cell 3")
	}
	// Said before any passkey ceremony, in the Decide card and on the bar.
	for _, id := range []string{`id="not-checked-with"`, `id="bar-refused"`} {
		if i := strings.Index(page, id); i < 0 || !strings.Contains(page[i:], "accepts the reviewers it was checked with") {
			t.Errorf("the page does not say at %s that the session accepts the reviewers it was checked with", id)
		}
	}
	cell3 := f.status.Cells[2]
	w := b.post("/session/session-decide/decide", b.sign(statements(page)["approve"], true, 3, cell3.Digest, ""))
	if want := "this session accepts the reviewers it was checked with; ask for a new session"; w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), want) {
		t.Errorf("a key listed after the check: %d %s; want 403 saying %q", w.Code, w.Body, want)
	}
	if n := len(door.sent()); n != 0 {
		t.Fatalf("%d decisions sent by a key the check did not record", n)
	}
	rv, err := approval.LoadReviewers(b.s.cfg.ReviewersPath)
	if err != nil {
		t.Fatal(err)
	}
	door.mu.Lock()
	door.checked = rv.Keys()
	door.mu.Unlock()
	_, page = b.get("/session/session-decide")
	if strings.Contains(page, `id="not-checked-with"`) {
		t.Error("the page says a recorded key was listed after the check")
	}
	if w := b.post("/session/session-decide/decide", b.sign(statements(page)["approve"], true, 3, cell3.Digest, "")); w.Code != http.StatusOK {
		t.Errorf("a key the check recorded: %d %s; want 200", w.Code, w.Body)
	}
}

// TestSessionPageShowsWhereACellsTimeWent: a cell's status phases are on the session page, as
// every door writes them.
func TestSessionPageShowsWhereACellsTimeWent(t *testing.T) {
	f := newSessionFixture(t, "session-phases")
	f.threeCells()
	check, wait, queue, run := int64(12), int64(95_000), int64(40), int64(1500)
	f.status.Cells[0].Phases = &contract.AuditPhases{CheckMS: &check, WaitMS: &wait, QueueMS: &queue, RunMS: &run}
	door := &sessionDoorFake{}
	door.set(f)
	b := newSessionServer(t, door, f.start.Add(5*time.Minute))
	code, page := b.get("/session/session-phases")
	if code != http.StatusOK {
		t.Fatalf("GET /session/session-phases: %d %s", code, page)
	}
	m := regexp.MustCompile(`id="cell-phases-1">([^<]*)</dd>`).FindStringSubmatch(page)
	if want := "check 12 ms, wait for a person 1m, queue 40 ms, run 1.5 s"; m == nil || m[1] != want {
		t.Errorf("cell 1's time %q; want %q", m, want)
	}
	if strings.Contains(page, `id="cell-phases-2"`) {
		t.Error("cell 2, whose status has no phases, shows a time")
	}
}

// TestSessionPageShowsTheImage: a session whose check recorded its image shows it among the
// settings, which every cell's reviewer reads.
func TestSessionPageShowsTheImage(t *testing.T) {
	f := newSessionFixture(t, "session-image")
	f.threeCells()
	f.status.Settings.Image = "sha256:c0ffee"
	door := &sessionDoorFake{}
	door.set(f)
	b := newSessionServer(t, door, f.start.Add(5*time.Minute))
	if code, page := b.get("/session/session-image"); code != http.StatusOK || !strings.Contains(page, `id="session-image">sha256:c0ffee<`) {
		t.Errorf("GET /session/session-image: %d; want the image among the settings:\n%s", code, page)
	}
}

// The session page shows what the operators' policy rules say of the session: each warning,
// escaped, and the approvals each cell needs from a group.
func TestSessionPageShowsPolicyRules(t *testing.T) {
	f := newSessionFixture(t, "session-rules")
	f.status.Rules = &guard.RuleDecision{PolicyHash: "sha256:x", Warnings: []string{"corp: reaches <corp>"},
		Groups: []guard.GroupNeed{{Group: "security", Approvals: 1, Principals: []string{"sec"}}}}
	f.add("print(1)\n", contract.StatusAwaitingApproval, nil)
	door := &sessionDoorFake{}
	door.set(f)
	b := newSessionServer(t, door, f.start)
	_, page := b.get("/session/session-rules")
	for _, want := range []string{`id="policy-warning"`, "corp: reaches &lt;corp&gt;", "each cell needs 1 approval(s) from security"} {
		if !strings.Contains(page, want) {
			t.Errorf("the session page lacks %q: %s", want, page)
		}
	}
}
