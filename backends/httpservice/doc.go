// Package httpservice is the backend of `worker --backend http`: it runs code on a
// code-execution service of the operator's own, one POST per run (NewHTTP, below). It is built on
// New, which runs code on any code-execution service behind a function: a hosted sandbox (E2B,
// Modal, Daytona), a service of your own, or anything else that takes a checked request and
// returns a result.
//
// The adapter cannot see inside the service, so the service must honour two things itself: the
// request's Network flag (no network unless it is true) and its Limits.Timeout. Everything else is
// still enforced around it by guard.Guarded: input checks and the digest before the call, a
// backstop of timeout + grace that cancels a call that has not returned, and output, file-count,
// file-size and file-name limits re-applied to whatever comes back (fail closed). Files with unsafe
// or repeated names are dropped and FilesTruncated is set.
//
// A function's error that is not one of guard's typed errors becomes an IntegrationError whose
// outcome is unknown (CodeMayHaveStarted), so it is never retried: return a
// *guard.IntegrationError with CodeMayHaveStarted false yourself for a failure you know happened
// before the code could start (the service was unreachable), and it may be retried. A panic in the
// function is recovered and reported the same way.
//
// Recipes: HTTP posts each checked request as JSON to a service of your own and reads a result
// back, with the response bounded and every failure typed. NewHTTP makes it the backend named
// "http" that `worker --backend http --http-url URL [--http-header-file F]` runs; LoadHeaderFile
// reads that file's "Name: value" lines (secrets: never logged, never quoted in errors); and
// HTTPDoctor checks the settings, that the service answers, and a probe run of print(1).
// examples/modal is such a service on Modal Sandboxes (block_network=True unless the request
// asks), documented with the exact request and response JSON that this package's tests pin. For a hosted sandbox SDK (E2B, Modal,
// Daytona), write the Func around the SDK's calls: create a sandbox with its network off unless
// c.Network, write c.Files, run c.Code in c.Language with c.Limits.Timeout, return exit code,
// output and the files it wrote, and kill the sandbox afterwards (ExampleNew shows the shape).
//
// Sessions: a Backend (and so the "http" backend) runs each request on its own and keeps
// nothing between calls, so it does not implement guard.SessionBackend; the Session workflow
// refuses a session on it with a ConfigError. Use the docker, e2b or local backend for sessions.
package httpservice
