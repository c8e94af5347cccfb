package inbox

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// TestRunPageShowsWhatTheHostMeasured: a finished run's page shows the signal that ended the
// code, the image it ran in and every egress attempt, with a host name escaped as text.
func TestRunPageShowsWhatTheHostMeasured(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	res := guard.Result{Outcome: guard.OutcomeFailed, ExitCode: 137, Signal: 9, ImageID: "sha256:feed", Duration: time.Second,
		StdoutBinary: true, Stdout: []byte("looks like text"),
		Egress: &guard.EgressReport{Attempts: []guard.EgressAttempt{
			{Kind: "connect", Host: "api.example.com", Port: 443, IP: "192.0.2.1", Allowed: true, BytesOut: 12, BytesIn: 34},
			{Kind: "connect", Host: "<b>evil</b>.example", Port: 80, Reason: "not allowed"},
		}, Dropped: 2}}
	var b bytes.Buffer
	data := pageData{Title: "run", Run: &runView{ID: "sandbox-1", State: "completed", Result: newResultView(res)}}
	if err := pages["run"].ExecuteTemplate(&b, "layout", data); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{`id="result-signal">9<`, `id="result-image">sha256:feed<`, `id="result-egress"`,
		"api.example.com", "192.0.2.1", "not allowed", "&lt;b&gt;evil&lt;/b&gt;.example", "2 more attempts refused", "binary output: download it."} {
		if !strings.Contains(page, want) {
			t.Errorf("run page lacks %q", want)
		}
	}
	if strings.Contains(page, "<b>evil</b>") {
		t.Errorf("an egress host reached the page as HTML")
	}
}

// TestDenyReasonLimitIsTheContracts: the page bounds a reason by the contract's limit, the one
// the workflow enforces, not by a figure of its own.
func TestDenyReasonLimitIsTheContracts(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	data := pageData{Title: "run", Run: &runView{ID: "sandbox-1", State: contract.StatusAwaitingApproval, Awaiting: true}}
	if err := pages["run"].ExecuteTemplate(&b, "layout", data); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`id="deny-reason" rows="2" maxlength="%d"`, contract.MaxReasonBytes); !strings.Contains(b.String(), want) {
		t.Errorf("run page lacks %s", want)
	}
}

// TestRunPageSaysWhereOutputIsCut: stdout or stderr longer than the page shows says so, and
// where to read the rest.
func TestRunPageSaysWhereOutputIsCut(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{outputPreviewBytes, outputPreviewBytes + 1} {
		res := guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: bytes.Repeat([]byte("x"), n)}
		var b bytes.Buffer
		if err := pages["run"].ExecuteTemplate(&b, "layout", pageData{Title: "run", Run: &runView{ID: "sandbox-1", State: "succeeded", Result: newResultView(res)}}); err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Contains(b.String(), "the first 64 KiB: download it"), n > outputPreviewBytes; got != want {
			t.Errorf("stdout of %d bytes: cut note %v; want %v", n, got, want)
		}
	}
}

// TestRunPageSaysAResultWasRecovered: a result that reached its run late says so, with the
// kind of timeout; one that came in time says nothing of it.
func TestRunPageSaysAResultWasRecovered(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range []*guard.Recovered{nil, {How: guard.RecoveredLateResult, ActivityID: "7", Timeout: "heartbeat"}} {
		res := guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Recovered: rec}
		var b bytes.Buffer
		if err := pages["run"].ExecuteTemplate(&b, "layout", pageData{Title: "run", Run: &runView{ID: "sandbox-1", State: "succeeded", Result: newResultView(res)}}); err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Contains(b.String(), "Recovered late (after a heartbeat timeout of sandbox activity"), rec != nil; got != want {
			t.Errorf("recovered %+v: the page says recovered late %v; want %v", rec, got, want)
		}
	}
}

// TestRunPageShowsTheImageBeforeTheDecision: a waiting run whose check recorded its image shows
// the image's ID among the request's facts, where the reviewer reads before deciding.
func TestRunPageShowsTheImageBeforeTheDecision(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	for _, image := range []string{"sha256:c0ffee", ""} {
		var b bytes.Buffer
		data := pageData{Title: "run", Run: &runView{ID: "sandbox-1", State: contract.StatusAwaitingApproval, Awaiting: true, Image: image}}
		if err := pages["run"].ExecuteTemplate(&b, "layout", data); err != nil {
			t.Fatal(err)
		}
		shown := strings.Contains(b.String(), `id="request-image">`+image+`<`)
		if shown != (image != "") || (image == "" && strings.Contains(b.String(), `id="request-image"`)) {
			t.Errorf("image %q: shown %t; want it shown when recorded, and no row otherwise", image, shown)
		}
	}
}
