// Package notify tells reviewers that a run, or a session's cell, waits for their decision. The
// workflows schedule its activity (contract.NotifyActivityName) as a durable step when a wait
// starts: it is retried with backoff up to bounded attempts and the approval deadline, a worker
// lost mid-delivery is noticed by its heartbeat and another worker delivers, and a failure is
// logged and recorded in the run's status while the wait goes on. A notification is never part
// of a decision: a lost, late or forged one can delay a run, never run one.
//
// Channels (one entry each in the kinds table, Kinds):
//   - webhook: an HTTP POST of a JSON document signed the Standard Webhooks way: headers
//     webhook-id (the same for every attempt of one run's or cell's wait, so a receiver drops a
//     duplicate), webhook-timestamp (Unix seconds of the attempt) and webhook-signature
//     ("v1,<base64 HMAC-SHA256 over id.timestamp.body>", with the secret "whsec_<base64>" read
//     from a file);
//   - slack: a Slack-compatible incoming-webhook body ({"text", "blocks"}) whose values from
//     the request are plain_text blocks and, in the mrkdwn "text" fallback, have &, < and >
//     escaped (no mention, link or markup comes from the model's strings);
//   - email: a text/plain message over SMTP, always after STARTTLS (a server that does not
//     offer it gets nothing, credentials least of all); header values are stripped of control
//     characters and Q-encoded, so no value adds a header.
//
// A notification names the run (workflow id, and the cell), who asked (the request's metadata),
// the language, the code's size, the input files' names and sizes, the egress hosts, the secret
// names, the deadline and the inbox link. It never carries env values or input file contents,
// and carries the code only when the operator asks for it (Config.IncludeCode), escaped:
// invisible and control characters written as escapes (pysource.VisibleText), every line prefixed
// in text channels so that code cannot pass for the message around it.
package notify
