package client

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// sessionCase is a session's history as its status shows it, built honestly with guard's
// functions: cell 1 ran and printed "ok", cell 2 was denied, cell 3 waits.
type sessionCase struct {
	settings guard.CheckedSession
	in       contract.SessionInput
	st       contract.SessionStatus
}

var sessionNow = time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC)

func newSessionCase(t *testing.T, env string) sessionCase {
	t.Helper()
	req := guard.SessionRequest{Languages: []string{guard.Python, guard.Shell}, MaxCells: 10, Settings: guard.Settings{
		Env:   map[string]string{"MODE": env},
		Files: map[string][]byte{"data.csv": []byte("a,b\n1,2\n")},
	}}
	s, err := guard.Policy{Languages: []string{guard.Python, guard.Shell}}.CheckSession(req, "docker")
	if err != nil {
		t.Fatal(err)
	}
	st := contract.SessionStatus{State: contract.SessionOpen, WorkflowID: "session-a", RunID: "run-a", SandboxTaskQueue: "host-1",
		StatementVersion: approval.StatementVersion, Settings: s.Summary()}
	chain := guard.ChainStart(s.Digest)
	add := func(lang, code, state string, res *guard.Result) {
		n := len(st.Cells) + 1
		cd := guard.CellCodeDigest(lang, code)
		c := contract.CellStatus{Cell: n, Language: lang, Code: code, CodeBytes: len(code), CodeDigest: cd, Chain: chain,
			Digest: guard.CellDigest(s.Digest, n, cd, chain), State: state, Result: res,
			DecisionWait: contract.DecisionWait{ApprovalDeadline: sessionNow.Add(10 * time.Minute)}}
		if res != nil {
			c.ResultDigest = guard.ResultDigest(*res)
			chain = guard.ChainNext(chain, c.Digest, c.ResultDigest)
		}
		st.Cells = append(st.Cells, c)
	}
	add(guard.Python, "x = 41\nprint('ok')\n", contract.StatusSucceeded, &guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("ok\n"),
		Files: []guard.File{{Name: "out.txt", Size: 2, Content: []byte("hi")}}})
	add(guard.Shell, "rm -rf /work\n", contract.StatusDenied, nil)
	add(guard.Python, "print(x + 1)\n", contract.StatusAwaitingApproval, nil)
	st.Chain = chain
	return sessionCase{settings: s, in: contract.SessionInput{Request: req}, st: st}
}

// TestCellStatementForComputesGuardsDigest: the statement for cell 3 signs the session's ids,
// its host's task queue and the digest guard computes for a three-cell history (cell 1's
// result chained, the denied cell 2 leaving the chain as it was), naming the reviewer.
func TestCellStatementForComputesGuardsDigest(t *testing.T) {
	sc := newSessionCase(t, "fast")
	s := sc.settings
	c1 := sc.st.Cells[0]
	res1 := guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("ok\n"), Files: []guard.File{{Name: "out.txt", Size: 2, Content: []byte("hi")}}}
	chain := guard.ChainNext(guard.ChainStart(s.Digest), guard.CellDigest(s.Digest, 1, guard.CellCodeDigest(guard.Python, c1.Code), guard.ChainStart(s.Digest)), guard.ResultDigest(res1))
	want := guard.CellDigest(s.Digest, 3, guard.CellCodeDigest(guard.Python, "print(x + 1)\n"), chain)

	f, err := CellStatementFor(sc.st, 3, StatementOptions{Reviewer: "alice"}, sessionNow)
	if err != nil {
		t.Fatal(err)
	}
	if f.Digest != want || f.WorkflowID != "session-a" || f.RunID != "run-a" || f.SandboxTaskQueue != "host-1" ||
		f.Reviewer != "alice" || f.Version != approval.StatementVersion || !f.Approve || !f.Expires.Equal(sessionNow.Add(10*time.Minute)) {
		t.Errorf("statement %+v; want digest %s for session-a/run-a on host-1 by alice, expiring at the cell's deadline", f, want)
	}
	if got, err := VerifyCells(sc.st, 2); err != nil || got != chain {
		t.Errorf("chain after the denied cell 2 = %s, %v; want the chain after cell 1, %s", got, err, chain)
	}
	if err := CheckSessionShown(sc.st, sc.in); err != nil {
		t.Errorf("CheckSessionShown of an honest status: %v", err)
	}
	// A denial is made from the cell's digest as shown.
	if d, err := CellStatementFor(sc.st, 3, StatementOptions{Reviewer: "alice", Deny: true}, sessionNow); err != nil || d.Approve || d.Digest != want {
		t.Errorf("denial %+v, %v; want a denial of %s", d, err, want)
	}
}

// TestCellStatementForRefusesAlteredHistories: a workflow worker that shows one history and asks
// to sign another is caught, naming the cell and field; so is a cell that does not wait, and a
// status asking for a statement that names no reviewer.
func TestCellStatementForRefusesAlteredHistories(t *testing.T) {
	for _, tc := range []struct {
		name  string
		alter func(st *contract.SessionStatus, other contract.SessionStatus)
		cell  int
		field string
	}{
		{"cell 1 shows it printed ok but the chain binds another result", func(st *contract.SessionStatus, _ contract.SessionStatus) {
			// Every later chain and digest is recomputed over the result the reviewer is not shown.
			hidden := *st.Cells[0].Result
			hidden.Stdout = []byte("the secret is 1234\n")
			chain := guard.ChainNext(st.Cells[0].Chain, st.Cells[0].Digest, guard.ResultDigest(hidden))
			for i := 1; i < 3; i++ {
				c := &st.Cells[i]
				c.Chain = chain
				c.Digest = guard.CellDigest(st.Settings.Digest, c.Cell, c.CodeDigest, chain)
			}
			st.Chain = chain
		}, 2, "chain"},
		{"cell 1's result differs from its result digest", func(st *contract.SessionStatus, _ contract.SessionStatus) {
			r := *st.Cells[0].Result
			r.Stdout = []byte("fine\n")
			st.Cells[0].Result = &r
		}, 1, "result_digest"},
		{"cell 3's digest is another's", func(st *contract.SessionStatus, _ contract.SessionStatus) {
			st.Cells[2].Digest = st.Cells[0].Digest
		}, 3, "digest"},
		{"cell 3's code is not what its code digest hashes", func(st *contract.SessionStatus, _ contract.SessionStatus) {
			st.Cells[2].Code, st.Cells[2].CodeBytes = "print(42)\n", len("print(42)\n")
		}, 3, "code_digest"},
		{"cell 1's code is not what its code digest hashes", func(st *contract.SessionStatus, _ contract.SessionStatus) {
			st.Cells[0].Code, st.Cells[0].CodeBytes = "x = 41\n", len("x = 41\n")
		}, 1, "code_digest"},
		{"the session's chain is not the one its cells compute", func(st *contract.SessionStatus, _ contract.SessionStatus) {
			st.Chain = st.Cells[0].Chain
		}, 0, "chain"},
		{"the denied cell 2 shows a result", func(st *contract.SessionStatus, _ contract.SessionStatus) {
			st.Cells[1].Result = &guard.Result{Outcome: guard.OutcomeSucceeded}
			st.Cells[1].ResultDigest = guard.ResultDigest(*st.Cells[1].Result)
		}, 2, "result"},
		{"the cells are another session's (other settings)", func(st *contract.SessionStatus, other contract.SessionStatus) {
			st.Cells, st.Chain = other.Cells, other.Chain
		}, 1, "chain"},
		{"cell 1's badge says succeeded but the result it chains failed", func(st *contract.SessionStatus, _ contract.SessionStatus) {
			// Every digest and the chain are honest; only the state the pages show as a badge lies.
			failed := guard.Result{Outcome: guard.OutcomeFailed, ExitCode: 1, Stderr: []byte("Traceback: the key was not found\n")}
			st.Cells[0].Result, st.Cells[0].ResultDigest = &failed, guard.ResultDigest(failed)
			chain := guard.ChainNext(st.Cells[0].Chain, st.Cells[0].Digest, st.Cells[0].ResultDigest)
			for i := 1; i < 3; i++ {
				c := &st.Cells[i]
				c.Chain = chain
				c.Digest = guard.CellDigest(st.Settings.Digest, c.Cell, c.CodeDigest, chain)
			}
			st.Chain = chain
		}, 1, "state"},
		{"a cell is left out", func(st *contract.SessionStatus, _ contract.SessionStatus) {
			st.Cells = []contract.CellStatus{st.Cells[0], st.Cells[2]}
		}, 2, "cells"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := newSessionCase(t, "fast")
			tc.alter(&sc.st, newSessionCase(t, "slow").st)
			f, err := CellStatementFor(sc.st, 3, StatementOptions{Reviewer: "alice"}, sessionNow)
			var mm *CellMismatchError
			if !errors.As(err, &mm) || mm.Cell != tc.cell || mm.Field != tc.field || ErrorType(err) != TypeCellMismatch {
				t.Fatalf("CellStatementFor = %+v, %v; want a *CellMismatchError for cell %d's %s", f, err, tc.cell, tc.field)
			}
			if !strings.Contains(err.Error(), "do not approve") {
				t.Errorf("message %q does not say not to approve", err)
			}
		})
	}

	sc := newSessionCase(t, "fast")
	for _, cell := range []int{1, 2, 4} {
		if f, err := CellStatementFor(sc.st, cell, StatementOptions{Reviewer: "alice"}, sessionNow); err == nil {
			t.Errorf("cell %d, which does not wait: statement %+v; want a refusal", cell, f)
		}
	}
	old := sc.st
	old.StatementVersion = approval.StatementVersion1
	if _, err := CellStatementFor(old, 3, StatementOptions{Reviewer: "alice"}, sessionNow); !errors.Is(err, ErrStatementVersion) {
		t.Errorf("a status asking for statement version 1: %v; want %v", err, ErrStatementVersion)
	}
	closed := sc.st
	closed.End, closed.State = contract.EndClosed, contract.SessionClosed
	if _, err := CellStatementFor(closed, 3, StatementOptions{Reviewer: "alice"}, sessionNow); err == nil {
		t.Error("a statement for a cell of a closed session was made")
	}
	noHost := sc.st
	noHost.SandboxTaskQueue = ""
	if _, err := CellStatementFor(noHost, 3, StatementOptions{Reviewer: "alice"}, sessionNow); err == nil {
		t.Error("a statement binding no sandbox host was made")
	}
}

// TestCheckSessionShownRefusesOtherSettings: a status whose settings differ from the session's
// start, or whose digest is not theirs, is refused.
func TestCheckSessionShownRefusesOtherSettings(t *testing.T) {
	for name, alter := range map[string]func(*contract.SessionStatus, *contract.SessionInput){
		"env value": func(_ *contract.SessionStatus, in *contract.SessionInput) { in.Request.Env["MODE"] = "slow" },
		"file content": func(_ *contract.SessionStatus, in *contract.SessionInput) {
			in.Request.Files["data.csv"] = []byte("a,b\n9,9\n")
		},
		"network":   func(st *contract.SessionStatus, _ *contract.SessionInput) { st.Settings.Network = true },
		"env names": func(st *contract.SessionStatus, _ *contract.SessionInput) { st.Settings.EnvNames = nil },
		"languages": func(st *contract.SessionStatus, _ *contract.SessionInput) {
			st.Settings.Languages = []string{guard.Python}
		},
		"max cells": func(st *contract.SessionStatus, _ *contract.SessionInput) { st.Settings.MaxCells = 99 },
		"packages shown, none opened with": func(st *contract.SessionStatus, _ *contract.SessionInput) {
			st.Settings.Packages = []guard.Package{{Name: "six", Version: "1.16.0", Hashes: []string{"sha256:" + strings.Repeat("1", 64)}}}
		},
		"packages opened with, none shown": func(_ *contract.SessionStatus, in *contract.SessionInput) {
			in.Request.Packages = "six==1.16.0 --hash=sha256:" + strings.Repeat("1", 64)
		},
		"timeout": func(st *contract.SessionStatus, _ *contract.SessionInput) { st.Settings.Limits.Timeout = time.Hour },
	} {
		sc := newSessionCase(t, "fast")
		alter(&sc.st, &sc.in)
		if err := CheckSessionShown(sc.st, sc.in); err == nil {
			t.Errorf("%s differs: CheckSessionShown accepted it", name)
		}
	}
}

// A session opened with packages: its honest status, which shows them, is accepted.
func TestCheckSessionShownWithPackages(t *testing.T) {
	req := guard.SessionRequest{Languages: []string{guard.Python}, Settings: guard.Settings{Packages: "six==1.16.0 --hash=sha256:" + strings.Repeat("1", 64)}}
	s, err := guard.Policy{Languages: []string{guard.Python}, Packages: true}.CheckSession(req, "docker")
	if err != nil {
		t.Fatal(err)
	}
	st := contract.SessionStatus{WorkflowID: "session-p", Settings: s.Summary()}
	if err := CheckSessionShown(st, contract.SessionInput{Request: req}); err != nil {
		t.Errorf("CheckSessionShown of an honest status with packages: %v", err)
	}
}

// TestCellOutcome: a cell's result is data (a timeout included); a cell that did not run says why
// with a typed error.
func TestCellOutcome(t *testing.T) {
	timedOut := &guard.Result{Outcome: guard.OutcomeTimedOut, TimedOut: true, ExitCode: -1}
	if r, err := CellOutcome("s", contract.CellStatus{Cell: 1, State: contract.StatusTimedOut, Result: timedOut}); err != nil || !r.TimedOut {
		t.Errorf("timed out cell: %+v, %v; want its result", r, err)
	}
	var ad *guard.ApprovalDenied
	_, err := CellOutcome("s", contract.CellStatus{Cell: 2, State: contract.StatusDenied, DecisionWait: contract.DecisionWait{Decision: &contract.DecisionRecord{Reviewer: "bob", Reason: "no"}}})
	if !errors.As(err, &ad) || ad.Reason != guard.DeniedByReviewer || ad.Reviewer != "bob" || ad.Message != "no" {
		t.Errorf("denied cell: %v; want an ApprovalDenied by bob", err)
	}
	if _, err := CellOutcome("s", contract.CellStatus{Cell: 2, State: contract.StatusExpired}); !errors.As(err, &ad) || ad.Reason != guard.DeniedExpired {
		t.Errorf("expired cell: %v; want an ApprovalDenied (expired)", err)
	}
	for _, state := range []string{contract.CellDropped, contract.StatusError} {
		var nr *CellNotRunError
		if _, err := CellOutcome("s", contract.CellStatus{Cell: 3, State: state, Error: "host refused"}); !errors.As(err, &nr) || nr.State != state || ErrorType(err) != TypeCellNotRun {
			t.Errorf("%s cell: %v; want a *CellNotRunError", state, err)
		}
	}
	if _, err := CellOutcome("s", contract.CellStatus{Cell: 4, State: contract.StatusAwaitingApproval}); err == nil {
		t.Error("a waiting cell has an outcome")
	}
}

// A cell that leaves a module shadowing the standard library, or a start-up hook, in /work is
// named to the next cell's reviewer, and so is a module Python reads as other code than shown
// (a coding declaration other than UTF-8, tabs mixed with spaces); files with nothing to say
// about them are not.
func TestWrittenWarningsNameWhatACellLeftBehind(t *testing.T) {
	if s, n, src := writtenWarnings(nil); s != nil || n != nil || src != nil {
		t.Fatalf("writtenWarnings(nil) = %v, %v, %v", s, n, src)
	}
	res := &guard.Result{Files: []guard.File{
		{Name: "json.py", Content: []byte("def loads(s):\n    return eval(s)\n")},
		{Name: "usercustomize.py", Content: []byte("import os\n")},
		{Name: "helper.py", Content: []byte("p\u0430ssword = 1\n")},
		{Name: "data.csv", Content: []byte("a,b\n")},
		{Name: "codec.py", Content: []byte("# coding: raw_unicode_escape\n# \\u000aimport os\n")},
		{Name: "mixed.py", Content: []byte("if True:\n\tx = 1\n        y = 2\n")},
	}}
	startup, names, source := writtenWarnings(res)
	if len(source) != 2 || !strings.Contains(source[0], "written file codec.py") || !strings.Contains(source[0], "raw_unicode_escape") ||
		!strings.Contains(source[1], "written file mixed.py") {
		t.Errorf("source warnings %q; want codec.py's coding declaration and mixed.py's indentation", source)
	}
	got := map[string]bool{}
	for _, w := range startup {
		got[w.File] = true
	}
	if !got["json.py"] || !got["usercustomize.py"] || got["data.csv"] || got["helper.py"] {
		t.Errorf("start-up warnings %v; want json.py and usercustomize.py only", startup)
	}
	if len(names) != 1 || names[0].File != "helper.py" {
		t.Errorf("confusable names %v; want the Cyrillic a in helper.py", names)
	}
}

// A thread a cell left running is named in the next cell's views, and in its own.
func TestThreadsWarningNamesThreadsACellLeft(t *testing.T) {
	st := contract.SessionStatus{Cells: []contract.CellStatus{
		{Cell: 1, Result: &guard.Result{ThreadsAlive: 1}},
		{Cell: 2, State: contract.StatusAwaitingApproval},
		{Cell: 3, Result: &guard.Result{}},
	}}
	if w := ThreadsWarning(st, 0); !strings.Contains(w, "when this cell ended, 1 thread(s)") {
		t.Errorf("cell 1's own warning %q", w)
	}
	if w := ThreadsWarning(st, 1); !strings.Contains(w, "cell 1 ended with 1 thread(s)") {
		t.Errorf("cell 2's warning %q; want it to name cell 1's thread", w)
	}
	if w := ThreadsWarning(st, 2); !strings.Contains(w, "cell 1 ended with 1 thread(s)") {
		t.Errorf("cell 3's warning %q; want cell 1's thread (cell 2 did not run)", w)
	}
	st.Cells[2].Result.ThreadsAlive = 0
	st.Cells = append(st.Cells, contract.CellStatus{Cell: 4})
	if w := ThreadsWarning(st, 3); w != "" {
		t.Errorf("after a cell that ended with none: %q; want no warning", w)
	}
}
