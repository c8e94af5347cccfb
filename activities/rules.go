package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/rules"
)

// ruleRecord is what a check records of its rules' decision: nil without a policy file.
func ruleRecord(d guard.RuleDecision) *guard.RuleDecision {
	if d.PolicyHash == "" {
		return nil
	}
	return &d
}

// policyRefused emits policy.refused for a refusal by the policy rules or caps at a check.
func (a *Activities) policyRefused(ctx context.Context, check, agent string, err error) {
	var pr *guard.PolicyRefused
	if !errors.As(err, &pr) {
		return
	}
	d := map[string]any{"check": check, "agent": agent, "reason": pr.Reason, "policy_hash": a.rules.Hash()}
	if pr.Rule != "" {
		d["rule"] = pr.Rule
	}
	if pr.Cap != "" {
		d["cap"] = pr.Cap
	}
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		d["workflow_id"], d["run_id"] = info.WorkflowExecution.ID, info.WorkflowExecution.RunID
	}
	a.sink.Emit(context.WithoutCancel(ctx), Event{Type: contract.EventPolicyRefused, Time: time.Now(), Data: d})
}

// capQueryTimeout bounds each visibility count of a cap.
const capQueryTimeout = 10 * time.Second

// underCaps refuses, as a PolicyRefused naming the cap, a start that would pass one of the
// policy's caps: runs waiting for approval and sandboxes running (runs running, sessions open),
// per agent and in all, counted in the namespace's visibility store. Visibility is eventually
// consistent, so starts that race within its delay may each pass a cap by a few. A run's start
// is held to the waiting and the running caps (a loop whose runs already run is stopped too), a
// session's to the running caps.
func (a *Activities) underCaps(ctx context.Context, agent string, session bool) error {
	if a.rules == nil || !activity.IsActivity(ctx) {
		return nil
	}
	l := a.rules.Limits()
	type capq struct {
		name, query string
		limit       int
	}
	// A session's status is its current cell's while one waits or runs. The run being checked
	// is never counted: an edit's check runs while its run waits.
	self := fmt.Sprintf("ExecutionStatus = 'Running' AND WorkflowId != '%s'", queryQuote(activity.GetInfo(ctx).WorkflowExecution.ID))
	waiting := fmt.Sprintf("%s AND %s = '%s'", self, contract.AttrStatus, contract.StatusAwaitingApproval)
	running := fmt.Sprintf("%s AND ((WorkflowType = '%s' AND %s = '%s') OR WorkflowType = '%s')",
		self, contract.WorkflowName, contract.AttrStatus, contract.StatusRunning, contract.SessionWorkflowName)
	byAgent := fmt.Sprintf(" AND %s = '%s'", contract.AttrAgent, queryQuote(agent))
	caps := []capq{{"running.per_agent", running + byAgent, l.Running.PerAgent}, {"running.total", running, l.Running.Total}}
	if !session {
		caps = append([]capq{{"waiting.per_agent", waiting + byAgent, l.Waiting.PerAgent}, {"waiting.total", waiting, l.Waiting.Total}}, caps...)
	}
	for _, c := range caps {
		if c.limit == 0 || (agent == "" && strings.HasSuffix(c.name, "per_agent")) {
			continue
		}
		n, err := a.count(ctx, c.query)
		if err != nil {
			return err
		}
		if n >= int64(c.limit) {
			who := "in all"
			if strings.HasSuffix(c.name, "per_agent") {
				who = "for agent " + agent
			}
			return &guard.PolicyRefused{Cap: c.name, Reason: fmt.Sprintf("%d %s %s, the policy's cap %s is %d: try again when fewer are",
				n, strings.Split(c.name, ".")[0], who, c.name, c.limit)}
		}
	}
	return nil
}

// queryQuote escapes a value for a single-quoted visibility query string.
func queryQuote(s string) string {
	return strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s)
}

// count counts the workflows of the activity's namespace that match query.
func (a *Activities) count(ctx context.Context, query string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, capQueryTimeout)
	defer cancel()
	resp, err := a.historyOf(ctx).WorkflowService().CountWorkflowExecutions(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Namespace: activity.GetInfo(ctx).Namespace, Query: query})
	if err != nil {
		return 0, &guard.IntegrationError{Op: "policy caps: count workflows", Err: err}
	}
	return resp.GetCount(), nil
}

// verifyRules applies this host's own policy rules to what it received (in), whatever the
// workflow recorded: a request they refuse, or whose approvals (vs) lack the quorum or a group's
// approvals they ask for, is refused as an ApprovalRefused (RefusedPolicy). It returns the
// policy's hash, "" without a policy file.
func (a *Activities) verifyRules(who string, in rules.Input, vs []approval.Verified) (string, error) {
	d, err := a.rules.Decide(in)
	if err != nil {
		// Its text only: the refusal is the host's (an ApprovalRefused), not the check's.
		return "", refuse(who, guard.RefusedPolicy, "this host's policy rules refuse the request: %v", err)
	}
	if len(vs) < d.Quorum {
		return "", refuse(who, guard.RefusedPolicy, "this host's policy rules need %d approvals by distinct reviewers; the input carries %d", d.Quorum, len(vs))
	}
	principals := make([]string, len(vs))
	for i, v := range vs {
		principals[i] = v.Principal
	}
	if missing := guard.Missing(d.Groups, principals); missing != nil {
		return "", refuse(who, guard.RefusedPolicy, "this host's policy rules still need %s", strings.Join(missing, " and "))
	}
	return d.PolicyHash, nil
}

// cellRules applies the policy rules to cell of session s: a rule that refuses it refuses it,
// and so does a rule that asks of it a quorum or a group's approvals beyond what the rules ask of
// the session's settings (which the session's check recorded for every cell, and its workflow
// waits for): the workflow cannot wait for them, and the host would refuse the cell once approved.
func (a *Activities) cellRules(s guard.CheckedSession, cell guard.Cell) error {
	d, err := a.rules.Decide(rules.ForCell(&s, cell.Index, cell.Language, cell.Code))
	if err != nil || a.rules == nil {
		return err
	}
	sd, err := a.rules.Decide(rules.ForSession(&s))
	if err != nil {
		return err
	}
	if d.Quorum > max(sd.Quorum, a.cellQuorum(s)) {
		return &guard.PolicyRefused{Rule: "(cell quorum)", Reason: fmt.Sprintf("a rule asks %d approvals of this cell, more than the session's %d: write rules that ask more of a session over its settings (subject \"session\")", d.Quorum, max(sd.Quorum, a.cellQuorum(s)))}
	}
	for _, g := range d.Groups {
		i := slices.IndexFunc(sd.Groups, func(h guard.GroupNeed) bool { return h.Group == g.Group })
		if i < 0 || sd.Groups[i].Approvals < g.Approvals {
			return &guard.PolicyRefused{Rule: strings.Join(g.Rules, ","), Reason: fmt.Sprintf("the rule asks %d approval(s) from %s of this cell, beyond what it asks of the session: write rules that ask a group of a session over its settings (subject \"session\")", g.Approvals, g.Group)}
		}
	}
	return nil
}
