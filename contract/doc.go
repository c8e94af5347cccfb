// Package contract is the Temporal contract of sandboxflow in one place: the names of the
// workflows (RunCode, Session), activities, signals, updates and queries; the types they carry
// (Input, Decision, Status, the Session's requests and statuses, SandboxClaim, LiveOutput,
// CancelRequest, the audit record); the search attributes and their registration; the default
// task queue; the conversion between guard's typed errors and Temporal application failures
// (ToFailure, FromFailure); a decision's well-formedness (Decision.Problem); and ShownChecked,
// the reviewers' tools' check of a status against the run's start.
//
// Any Temporal client in any language can speak this contract: its JSON forms are described by
// the JSON Schemas in docs/schema/, generated from these types and checked against them by a
// test. The protocol these names take part in is written in docs/protocol.md.
package contract
