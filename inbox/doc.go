// Package inbox is the reviewers' inbox: a small web server where a reviewer reads a RunCode run
// that waits for a decision (its code highlighted, with line numbers and invisible characters made
// visible, its input files, env names, limits, network and egress, backend, digest and decision
// history) and approves or denies it with a passkey.
//
// # Access
//
// Every page but the sign-in page needs a sign-in (a cookie), and it sees runs only after its owner
// signed in with a passkey that the reviewers file lists (the same OpenSSH allowed_signers file
// the workers read; it is read again when it changes, so removing a line ends access at once).
// Registering a passkey shows only the line an operator adds to that file:
//
//	alice sk-ecdsa-sha2-nistp256@openssh.com AAAAInNrLWVjZHNh... passkey rp=localhost
//
// The key is the passkey's P-256 public key with the relying party id as its application
// (approval.PasskeyAuthorizedKey). Sign-in cookies are HttpOnly and SameSite=Strict (and Secure,
// with the __Host- prefix, over TLS); their ids are random and expire. Every POST must come from
// the inbox's own origin (the Origin header) and carry the sign-in's CSRF token. Responses carry a
// strict Content-Security-Policy (default-src 'self', no inline script, frame-ancestors 'none').
//
// # Decisions
//
// The inbox reads runs, checks what a status shows against the run's start, builds statements
// and sends decisions through the client package (client.Client.ReadRun, StartInput, CheckShown,
// StatementFor, DecideRun), the one reviewer door the starter uses too. Approving or denying
// signs the decision's statement (approval.Fields.Statement, which binds the workflow id, run id,
// digest, approve or deny, approval id, sandbox task queue and expiry) with the passkey: navigator.credentials.get with challenge = SHA-256 of the statement shown on the
// page. The inbox verifies the assertion (approval.Verify) before it sends the decision as the
// update "decide" with the assertion in its "webauthn" field, and the workflow and the sandbox
// activity verify it again, as they verify an SSH signature.
//
// # Sessions
//
// A Session workflow's page (/session/ID) shows its settings, with the file contents and env
// values of its start input, and every cell with its code and output; the cell that waits comes
// last, with a line diff against the cell before it. What the passkey signs for that cell is the
// session's statement (workflow id, run id, the host's task queue) over the cell digest the
// client's reviewer door recomputes from what the page shows (client.CheckSessionShown,
// VerifyCells, CellStatementFor): the settings digest, every cell's code digest, every earlier
// result's digest and the chain. A status that disagrees gets no approval. Sessions are read and
// decided through the client too (ReadSession, SessionStartInput, DecideCell pinned to the run
// read), behind the small sessionDoor interface the page's tests answer.
//
// # Output
//
// Output, files and what the code showed (guard.Output) of finished runs and cells are shown
// only from results that verify, as escaped text, escaped tables, or pictures: a PNG or JPEG
// whose bytes start with its format's magic and whose header decodes to at most 40
// megapixels, drawn by an <img> of the page's own download URL (?inline=1) with its size from
// that header. SVG and HTML are never drawn: they are named, with their size, and offered as
// downloads. Every download is an attachment (a checked picture inline only when asked for by
// the page) with its name's last element, a content type from a short list by extension
// (application/octet-stream otherwise), nosniff and a CSP that runs nothing; nothing from a run
// is ever rendered as HTML.
package inbox
