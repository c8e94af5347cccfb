//go:build integration

package workflows_test

import (
	"os"
	"path/filepath"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// A decision sent with Wait (issue 33: the result from the decide update itself) on a quorum of
// 2, the code run by the local backend: carol's approval, which leaves the run waiting, is
// answered at once; bob's, which starts the run, is answered once the run has ended, with its
// result, in the workflow task that ends the run (after the sandbox activity completed, beside
// the workflow's completion), under the version marker run-decide-wait-v1. With
// SANDBOXFLOW_RECORD_HISTORY=1 it records testdata/runcode_decide_wait.json, which
// TestReplayDecideWaitHistory replays.
func TestIntegrationDecideWaitAnswersWithTheResult(t *testing.T) {
	it := newITest(t)
	q := newQuorumReviewers(it)
	it.worker(it.queue, it.localBackend(), func(c *activities.Config) { c.Policy.Quorum = 2 })
	const id = "recorded-decide-wait" // workflows.recordedDecideWaitID
	run := it.start(id, it.queue, guard.Request{Code: "print('waited for')"})

	first := it.signedAs(id, q.multi, "carol", true)
	first.Wait = true
	res, err := it.decide(id, first)
	if err != nil || res.State != contract.StatusAwaitingApproval || res.Ended || res.Result != nil {
		t.Fatalf("carol's approval, 1 of 2, with Wait: %+v, %v; want it answered at once, the run still waiting", res, err)
	}
	second := it.signedAs(id, q.bob, "bob", true)
	second.Wait = true
	res, err = it.decide(id, second)
	if err != nil || res.State != contract.StatusRunning || !res.Ended || res.Result == nil ||
		string(res.Result.Stdout) != "waited for\n" || res.Approvals != 2 {
		t.Fatalf("bob's approval, 2 of 2, with Wait: %+v, %v; want it answered once the run ended, with its result", res, err)
	}
	out, err := it.result(run)
	if err != nil || string(out.Stdout) != string(res.Result.Stdout) || out.ApprovalID != res.Result.ApprovalID {
		t.Fatalf("the workflow's result %+v, %v; want the one the update answered with", out, err)
	}

	events := it.history(id)
	var markers, activityDone, bobDone, completed int
	for _, e := range events {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if p := e.GetMarkerRecordedEventAttributes().GetDetails()["change-id"].GetPayloads(); len(p) == 1 && string(p[0].GetData()) == `"run-decide-wait-v1"` {
				markers++
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			activityDone = int(e.GetEventId())
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
			bobDone = int(e.GetEventId()) // the last update answered: bob's
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			completed = int(e.GetEventId())
		}
	}
	if markers != 1 || activityDone == 0 || bobDone < activityDone || completed < bobDone {
		t.Fatalf("history: %d run-decide-wait-v1 markers, the sandbox activity completed at event %d, bob's update at %d, the run at %d; "+
			"want one marker and bob's answer after the activity, before the run's completion", markers, activityDone, bobDone, completed)
	}

	if os.Getenv(envRecordHistory) == "1" {
		data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(&historypb.History{Events: events})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", "runcode_decide_wait.json"), append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %d events", len(events))
	}
}
