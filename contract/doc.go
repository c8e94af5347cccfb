// Package contract is sandboxflow's Temporal wire contract: the names and JSON shapes that
// workflows, activities and clients share, so that each side can be written (in Go or in any
// other language) without importing the others.
//
// It holds:
//   - the names: workflow types (RunCode, Session), signals, updates, queries, activity names,
//     the default task queue, search attributes and memo keys, and the states they take;
//   - the one-struct-in, one-struct-out shapes that cross Temporal: workflow inputs, statuses
//     and results, reviewers' decisions and edits, sandbox claims, activity inputs and outputs,
//     session cells, live output, notification records and audit records;
//   - how sandboxflow's typed errors (guard's, and a Rejection of a decision) cross Temporal as
//     application errors and come back (ToFailure, FromFailure, ErrorDetails);
//   - reading a run's start input from its history (ReadInput), for values a status never
//     carries.
//
// These names and shapes are recorded in workflow histories and read by clients that are not
// ours: a name, a JSON field or an error type string never changes (fields are only ever
// added), so that every recorded history still replays (workflows/testdata) and every client
// still reads what it wrote. docs/schema holds JSON Schemas generated from these types, which
// TestSchemaFilesMatchTheGoTypes keeps in step. The protocol these names take part in is
// written once, in docs/protocol.md.
//
// It imports the ground floor only (guard's vocabulary, approval, receipt, pysource) and the
// Temporal SDK's types, never a workflow or an activity.
package contract
