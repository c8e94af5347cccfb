// Package receipt is a sandbox host's signed account of one run or session cell (issue 31): a
// canonical, versioned statement of what ran (workflow and run, the request's digest, the
// approvals and the reviewers' key fingerprints the host verified), where (host name and key,
// backend, runtime, image), when, how it ended, and the length and SHA-256 of what it produced:
// each output stream whole as the code wrote it and as the result keeps it, and each produced
// file as the backend returned it; the egress attempts and the secret names used. A session cell's
// statement also names the hash of the previous cell's receipt, so a session's receipts chain.
//
// The host signs the statement with its own key as an SSHSIG in Namespace, which no reviewer key
// signs in (approval.Namespace is another), so neither signature can pass as the other. Operators
// list the hosts' public keys in a hosts file, in OpenSSH allowed_signers format (the host's name
// as principal), which also serves `ssh-keygen -Y verify` as is.
//
// Verify checks a receipt against the hosts; CheckResult checks a result against the receipt.
// Both are pure (no I/O, no clock), so the RunCode workflow calls them itself.
//
// # The statement
//
// The statement is one JSON object followed by a newline: the fields of Statement, in the order
// of its declaration, written by Go's encoding/json without HTML escaping or indentation (every
// list present, [] when empty). A statement is accepted only in that form: Parse decodes it and
// writes it again, and the bytes must be the same. Its first field, "receipt", is Version. Hashes
// are lower-case hex SHA-256 ("sha256sum" prints the same). The kept stdout and stderr are hashed
// as the result's JSON carries them (UTF-8 text, invalid bytes replaced by U+FFFD), so
// `jq -j .result.stdout | sha256sum` computes the same hash from an audit export.
package receipt
