// Package client is what agent orchestrators and reviewers import to use sandboxflow from Go: it
// starts RunCode workflows, lists the runs that wait for a person, shows what a reviewer needs,
// sends decisions, waits for results, and describes the run_code tool for function calling.
//
// It works over a Temporal client the caller dials (with the same data converter as the workers,
// when payloads are encrypted). The starter command is a thin main over this package.
//
// There is no way to approve a run without a person: Approve sends one reviewer's decision for one
// digest, and the workflow accepts only the first valid decision.
package client
