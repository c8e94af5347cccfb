// Package rules holds the operators' policy rules: a versioned file (JSON or YAML) of rules
// written as CEL expressions over a checked request and its metadata, the reviewer groups they
// name, and caps on the runs waiting and the sandboxes running per agent and in all.
//
// A rule whose condition holds may refuse the request with a reason, raise its quorum, require
// approvals from a named group of reviewers, or add a warning every reviewer view shows. No rule
// approves anything. Every rule is compiled once, when the file is loaded, and evaluated under a
// cost limit; the file's hash (sha256 of its bytes) is recorded with each check and in the
// sandbox host's receipt. The workflow worker and the sandbox host each evaluate their own file.
package rules
