package contract_test

import (
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/jsontest"
	"github.com/sandboxflow/sandboxflow/pysource"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// testKey is a fixed ed25519 public key, so that the encodings below do not change between runs.
const testKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBnJHou0AtBCUp2z8m+4OmsI9nAbotDY3G/MRVlObdpR"

// fullCheckResult and the values below set every field of their types, so that an encoding
// test sees each key.
func fullCheckResult(t *testing.T) contract.CheckResult {
	reviewers, hosts := keysForTest(t)
	return contract.CheckResult{
		Checked:   guard.Checked{Language: "python", Code: "print(1)", Digest: "sha256:c0de"},
		CheckedBy: checkedByForTest(reviewers),
		Hosts:     hosts,
		Notify:    &contract.NotifyOptions{MaximumAttempts: 3},
		Quorum:    2,
	}
}

func fullSessionCheckResult(t *testing.T) contract.SessionCheckResult {
	reviewers, hosts := keysForTest(t)
	return contract.SessionCheckResult{
		Session:   guard.CheckedSession{Languages: []string{"python"}, MaxCells: 4, Digest: "sha256:5e55"},
		CheckedBy: checkedByForTest(reviewers),
		Notify:    &contract.NotifyOptions{MaximumAttempts: 3},
		Hosts:     hosts,
		Quorum:    2,
	}
}

func checkedByForTest(reviewers *approval.Reviewers) contract.CheckedBy {
	return contract.CheckedBy{
		ApprovalTimeout:  time.Hour,
		Run:              contract.RunOptions{TaskQueue: "sandbox", Grace: time.Second, HeartbeatTimeout: 2 * time.Second},
		Reviewers:        reviewers,
		Warnings:         []pysource.StartupWarning{{File: "sitecustomize.py", Reason: "runs at start-up"}},
		StatementVersion: approval.StatementVersion,
	}
}

var (
	testTime  = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	testVotes = []contract.DecisionRecord{
		{ApprovalID: "a1", Approve: true, Reviewer: "alice", Via: "update", Time: testTime},
		{ApprovalID: "a2", Approve: true, Reviewer: "bob", Via: "signal", Time: testTime},
	}
)

func fullStatus() contract.Status {
	return contract.Status{
		State:            contract.StatusSucceeded,
		WorkflowID:       "run-1",
		RunID:            "r1",
		SandboxTaskQueue: "sandbox",
		StatementVersion: approval.StatementVersion,
		Request:          guard.Summary{Language: "python", Code: "print(1)", CodeBytes: 8, Digest: "sha256:c0de"},
		DecisionWait: contract.DecisionWait{
			ApprovalDeadline: testTime.Add(time.Hour),
			Decision:         &testVotes[0],
			Quorum:           2,
			Approvals:        testVotes,
		},
		Edit:              &guard.Edit{Editor: "alice", OriginalDigest: "sha256:01d", Digest: "sha256:c0de"},
		RejectedDecisions: 1,
		LastRejection:     "wrong digest",
		IgnoredDecisions:  1,
		RunAttempts:       1,
		Error:             "none really",
		Cancel:            &guard.Cancellation{By: "carol", Reason: "late", Time: testTime},
		Notification:      &contract.NotifyRecord{State: "delivered", Delivered: []string{"slack"}},
	}
}

func fullCellStatus() contract.CellStatus {
	return contract.CellStatus{
		Cell:       2,
		Language:   "python",
		Code:       "print(2)",
		CodeBytes:  8,
		CodeDigest: "sha256:c0de",
		Chain:      "sha256:c4a1",
		Digest:     "sha256:d1",
		State:      contract.StatusSucceeded,
		Metadata:   guard.Metadata{Agent: "agent"},
		RequestID:  "req-2",
		Submitted:  testTime,
		DecisionWait: contract.DecisionWait{
			ApprovalDeadline: testTime.Add(time.Hour),
			Decision:         &testVotes[0],
			Quorum:           2,
			Approvals:        testVotes,
		},
		Result:               &guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("2\n")},
		ResultDigest:         "sha256:4e5",
		Retries:              1,
		Cancel:               &guard.Cancellation{By: "carol", Time: testTime},
		SuspiciousCharacters: []pysource.Suspicious{{Line: 1, Column: 2, Rune: "U+202E", Name: "RIGHT-TO-LEFT OVERRIDE"}},
		Error:                "none really",
		Notification:         &contract.NotifyRecord{State: "delivered", Delivered: []string{"slack"}},
	}
}

// keysForTest returns a reviewers file and a hosts file that list testKey.
func keysForTest(t *testing.T) (*approval.Reviewers, *receipt.Hosts) {
	t.Helper()
	r, err := approval.ParseAllowedSigners([]byte("alice " + testKey + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := receipt.ParseHosts([]byte("host-1 " + testKey + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return r, h
}

// TestRecordedEncodings pins the JSON of the results the check activities record in history
// and of the statuses the queries return: keys, their order and their omission. A change of
// the Go types that moves a field (into an embedded struct, say) must not change a byte.
func TestRecordedEncodings(t *testing.T) {
	jsontest.Pinned(t, "CheckResult", fullCheckResult(t), wantCheckResult)
	jsontest.Pinned(t, "SessionCheckResult", fullSessionCheckResult(t), wantSessionCheckResult)
	jsontest.Pinned(t, "Status", fullStatus(), wantStatus)
	jsontest.Pinned(t, "CellStatus", fullCellStatus(), wantCellStatus)
}

const (
	wantCheckResult        = `{"checked":{"language":"python","code":"print(1)","limits":{"max_stdout_bytes":0,"max_stderr_bytes":0,"max_files":0,"max_file_bytes":0,"max_total_file_bytes":0,"timeout":"0s"},"network":false,"backend":"","metadata":{},"digest":"sha256:c0de","owner":{}},"run":{"task_queue":"sandbox","start_attempts":0,"grace":"1s","heartbeat_timeout":"2s","report_margin":"0s","start_backoff":"0s","max_start_backoff":"0s"},"reviewers":{"version":2,"keys":[{"principals":["alice"],"key_type":"ssh-ed25519","public_key":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBnJHou0AtBCUp2z8m+4OmsI9nAbotDY3G/MRVlObdpR","fingerprint":"SHA256:YVNBnIbv5/qM7QqphHz30xxDS+AhlySzceU308u8/4A"}]},"warnings":[{"file":"sitecustomize.py","reason":"runs at start-up"}],"statement_version":2,"hosts":{"version":1,"keys":[{"principals":["host-1"],"key_type":"ssh-ed25519","public_key":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBnJHou0AtBCUp2z8m+4OmsI9nAbotDY3G/MRVlObdpR","fingerprint":"SHA256:YVNBnIbv5/qM7QqphHz30xxDS+AhlySzceU308u8/4A"}]},"notify":{"maximum_attempts":3},"quorum":2,"approval_timeout":"1h0m0s"}`
	wantSessionCheckResult = `{"session":{"languages":["python"],"limits":{"max_stdout_bytes":0,"max_stderr_bytes":0,"max_files":0,"max_file_bytes":0,"max_total_file_bytes":0,"timeout":"0s"},"network":false,"backend":"","metadata":{},"lifetime":0,"idle_timeout":0,"max_cells":4,"digest":"sha256:5e55","owner":{}},"approval_timeout":3600000000000,"run":{"task_queue":"sandbox","start_attempts":0,"grace":"1s","heartbeat_timeout":"2s","report_margin":"0s","start_backoff":"0s","max_start_backoff":"0s"},"reviewers":{"version":2,"keys":[{"principals":["alice"],"key_type":"ssh-ed25519","public_key":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBnJHou0AtBCUp2z8m+4OmsI9nAbotDY3G/MRVlObdpR","fingerprint":"SHA256:YVNBnIbv5/qM7QqphHz30xxDS+AhlySzceU308u8/4A"}]},"warnings":[{"file":"sitecustomize.py","reason":"runs at start-up"}],"statement_version":2,"notify":{"maximum_attempts":3},"hosts":{"version":1,"keys":[{"principals":["host-1"],"key_type":"ssh-ed25519","public_key":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBnJHou0AtBCUp2z8m+4OmsI9nAbotDY3G/MRVlObdpR","fingerprint":"SHA256:YVNBnIbv5/qM7QqphHz30xxDS+AhlySzceU308u8/4A"}]},"quorum":2}`
	wantStatus             = `{"state":"succeeded","workflow_id":"run-1","run_id":"r1","sandbox_task_queue":"sandbox","statement_version":2,"request":{"language":"python","code":"print(1)","code_bytes":8,"limits":{"max_stdout_bytes":0,"max_stderr_bytes":0,"max_files":0,"max_file_bytes":0,"max_total_file_bytes":0,"timeout":"0s"},"network":false,"backend":"","digest":"sha256:c0de","metadata":{}},"approval_deadline":"2026-01-02T04:04:05Z","decision":{"approval_id":"a1","approve":true,"reviewer":"alice","via":"update","time":"2026-01-02T03:04:05Z","touched":false},"quorum":2,"approvals":[{"approval_id":"a1","approve":true,"reviewer":"alice","via":"update","time":"2026-01-02T03:04:05Z","touched":false},{"approval_id":"a2","approve":true,"reviewer":"bob","via":"signal","time":"2026-01-02T03:04:05Z","touched":false}],"edit":{"editor":"alice","original_digest":"sha256:01d","digest":"sha256:c0de"},"rejected_decisions":1,"last_rejection":"wrong digest","ignored_decisions":1,"run_attempts":1,"error":"none really","cancel":{"by":"carol","reason":"late","time":"2026-01-02T03:04:05Z"},"notification":{"state":"delivered","delivered":["slack"]}}`
	wantCellStatus         = `{"cell":2,"language":"python","code":"print(2)","code_bytes":8,"code_digest":"sha256:c0de","chain":"sha256:c4a1","digest":"sha256:d1","state":"succeeded","metadata":{"agent":"agent"},"request_id":"req-2","submitted":"2026-01-02T03:04:05Z","approval_deadline":"2026-01-02T04:04:05Z","decision":{"approval_id":"a1","approve":true,"reviewer":"alice","via":"update","time":"2026-01-02T03:04:05Z","touched":false},"quorum":2,"approvals":[{"approval_id":"a1","approve":true,"reviewer":"alice","via":"update","time":"2026-01-02T03:04:05Z","touched":false},{"approval_id":"a2","approve":true,"reviewer":"bob","via":"signal","time":"2026-01-02T03:04:05Z","touched":false}],"result":{"outcome":"succeeded","ok":true,"exit_code":0,"timed_out":false,"stdout_truncated":false,"stderr_truncated":false,"files_truncated":false,"stdout":"2\n","stderr":"","duration":"0s","duration_ms":0},"result_digest":"sha256:4e5","retries":1,"cancel":{"by":"carol","time":"2026-01-02T03:04:05Z"},"suspicious_characters":[{"line":1,"column":2,"rune":"U+202E","name":"RIGHT-TO-LEFT OVERRIDE"}],"error":"none really","notification":{"state":"delivered","delivered":["slack"]}}`
)
