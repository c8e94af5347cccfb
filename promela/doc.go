// Package promela holds approval.pml, a Promela model of a RunCode run's approval protocol as the
// code implements it, session.pml, one of a session's cells, and the tests that check them with
// spin (make test; model_test.go, integration-tagged): TestModelHolds and
// TestSessionModelHolds search every execution within their budgets and fail on any
// counterexample, printing its trail; TestModelFindsRemovedChecks and
// TestSessionModelFindsRemovedChecks remove one check of the code at a time and require spin to
// find the counterexample it allows.
//
// What the models prove (P1-P6, L1-L2, S1-S4), their budgets, which step of each model is which
// function of the code, what they found and what they leave out are written in docs/protocol.md,
// "The models: what is proven". Keep that table true when a step of the code moves.
package promela
