package contract

// UpdateAwaitCheck is the update a client sends with the start of a RunCode run
// (update-with-start) to learn the outcome of the worker's check without polling the status
// query: it takes no argument and answers once the check finished, with the request as the check
// recorded it (a guard.Summary, whose Digest is what a reviewer approves), or with the check's
// typed error (ToolUsageError or ConfigError), with which the run then ends. It never changes the
// run.
const UpdateAwaitCheck = "await-check"
