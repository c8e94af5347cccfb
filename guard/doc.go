// Package guard holds what sandboxflow decides before and after any code runs: the request an
// orchestrator sends, the operator's policy and its limits, every input check, the digest a
// reviewer approves, output truncation, the typed errors, and the wrapper that puts all of it around
// a backend that is not trusted to honour any of it.
//
// It is pure Go: no Temporal and no Docker imports, so the same checks run in the workflow's
// local activity, in the sandbox activity and in tests.
//
// The flow is:
//
//	checked, err := policy.Check(request, backendName) // ToolUsageError or ConfigError
//	// ... a person approves checked.Digest ...
//	result, err := guard.New(backend, policy).Run(ctx, checked)
//
// Run re-checks the request against the policy, re-computes the digest, runs the backend under a
// backstop of timeout + grace and re-applies every output and file limit to what comes back.
//
// What a reviewer reads must be what runs: Check refuses, as a ToolUsageError, source that
// Python or sh would read other than it is drawn, by the checks of package pysource (which knows
// how Python reads source); the views use pysource directly to draw the rest as Python reads it
// and to warn of what may run unseen.
package guard
