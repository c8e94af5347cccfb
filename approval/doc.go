// Package approval decides whether a reviewer really made a decision: it verifies signed
// approvals and denials of sandboxflow runs (issue 11) and holds no Temporal or Docker code, so
// the workflow, the sandbox activity and the starter all verify the same way.
//
// # Reviewers
//
// A reviewer is whoever holds a key listed in the reviewers file, OpenSSH's allowed_signers
// format (ssh-keygen(1), ALLOWED SIGNERS; git's gpg.ssh.allowedSignersFile):
//
//	alice@example.com ssh-ed25519 AAAAC3Nza... alice's laptop
//	bob namespaces="sandboxflow-approval" sk-ssh-ed25519@openssh.com AAAAGnNr...
//
// Keys may be ssh-ed25519, ecdsa-sha2-nistp256, or their security-key (FIDO) forms
// sk-ssh-ed25519@openssh.com and sk-ecdsa-sha2-nistp256@openssh.com. LoadReviewers and
// ParseAllowedSigners read the file; Reviewers marshals to JSON and back, so a workflow records
// the keys it checked against in history and verifies against the record on replay.
//
// # Statements
//
// A reviewer signs a statement: a few lines of text that bind the workflow id, the run id, the
// digest of the code, approve or deny, the approval id, the sandbox task queue, the principal
// the reviewer signs as (version 2) and an expiry (Fields.Statement, ParseStatement). Version 1
// names no principal: whoever relayed it could pick any the key's line allows; it is verified
// only where a run recorded no statement version (histories from before version 2). The
// signature is an SSHSIG in Namespace, exactly what OpenSSH makes:
//
//	starter statement ID --reviewer alice > st
//	ssh-keygen -Y sign -n sandboxflow-approval -f ~/.ssh/id_ed25519 st   # writes st.sig
//
// Sign does the same from Go with a key file (LoadSigner) or an ssh-agent (AgentSigner).
//
// # Verifying
//
// Verify takes the reviewers, the statement fields the verifier expects from its own knowledge
// (its workflow id and run id, the digest it computed, its task queue) and from the decision
// (approve or deny, approval id, expiry), the decision's proof, and the time. It returns who
// signed (Verified) or a *RefusalError whose Reason says why not: unsigned, unknown key, wrong
// namespace, bad signature, statement mismatch (with the field), expired, key not valid,
// principal mismatch, or a security key used without user presence. Security-key signatures
// must carry the user-presence flag; Verified records Touched and UserVerified. (This is stricter
// than ssh-keygen -Y verify of OpenSSH 9.2, which accepts a security-key signature made without a
// touch.)
//
// Proof admits a second kind, a WebAuthn passkey assertion over SHA-256 of the statement
// (WebAuthnChallenge). A passkey is listed as an sk-ecdsa-sha2-nistp256@openssh.com key whose
// application is the relying party id (PasskeyAuthorizedKey); Verify requires its rpIdHash, the
// one origin the Reviewers accept passkeys from (WithPasskeyOrigin: the inbox's scheme, host and
// port; none refuses passkeys; recorded with the keys, while a version 1 record, from before the
// pin, keeps accepting any origin of the relying party so old histories replay), user presence
// and user verification, and the same statement binding as an SSH signature. VerifyPasskeyLogin
// checks a sign-in assertion over a server challenge.
//
// # Passkey counters
//
// Counters keeps, in a verifier's own file, the last signature counter it accepted per passkey:
// one that is in use and does not grow (an old assertion replayed, a cloned authenticator) is
// refused (ReasonCounterReplayed); authenticators that always report 0 stay accepted. The inbox
// and every sandbox host keep their own file, since a counter is what that verifier has seen and
// a run's history, which any namespace writer can add to, is no place for it. The workflow does
// not check counters: one run accepts one decision, and it sees no other run.
//
// For development, EnsureDevKeys makes a reviewer key and its allowed_signers once.
package approval
