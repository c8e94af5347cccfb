package approval

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Reason says why a decision was refused. A Reason is an error, so errors.Is(err, ReasonExpired)
// works on what Verify returns; RefusalError carries the details.
type Reason string

// Reasons a decision is refused.
const (
	// ReasonUnsigned: the decision carries no signature and no passkey assertion.
	ReasonUnsigned Reason = "unsigned"
	// ReasonMalformed: the signature, the statement or an expected field cannot be read.
	ReasonMalformed Reason = "malformed"
	// ReasonUnsupported: a proof kind, key type or algorithm this version cannot verify.
	ReasonUnsupported Reason = "unsupported"
	// ReasonUnknownKey: the signing key is not in the reviewers.
	ReasonUnknownKey Reason = "unknown_key"
	// ReasonWrongNamespace: the signature is not in Namespace, or the key's namespaces= option
	// does not allow it.
	ReasonWrongNamespace Reason = "wrong_namespace"
	// ReasonBadSignature: the signature does not verify over this run's statement.
	ReasonBadSignature Reason = "bad_signature"
	// ReasonStatementMismatch: the statement the decision carries differs from this run's in
	// one field (RefusalError.Field).
	ReasonStatementMismatch Reason = "statement_mismatch"
	// ReasonExpired: the statement's expiry has passed.
	ReasonExpired Reason = "expired"
	// ReasonKeyNotValid: the key's valid-after or valid-before excludes the time of the check.
	ReasonKeyNotValid Reason = "key_not_valid"
	// ReasonPrincipalMismatch: the decision names a reviewer the key may not sign for, or names
	// none while the key's principals are all patterns.
	ReasonPrincipalMismatch Reason = "principal_mismatch"
	// ReasonNoUserPresence: a security key signed without the user-presence flag.
	ReasonNoUserPresence Reason = "no_user_presence"
)

// Error returns the reason's name.
func (r Reason) Error() string { return string(r) }

// RefusalError is why Verify refused a decision. It unwraps to its Reason.
type RefusalError struct {
	// Reason is the kind of refusal.
	Reason Reason
	// Field is the statement field that differs, for ReasonStatementMismatch.
	Field string
	// Detail says what was wrong, for the reviewer.
	Detail string
}

// Error returns "approval: refused (reason): detail".
func (e *RefusalError) Error() string {
	return fmt.Sprintf("approval: refused (%s): %s", e.Reason, e.Detail)
}

// Unwrap returns the Reason.
func (e *RefusalError) Unwrap() error { return e.Reason }

func refuse(r Reason, format string, args ...any) error {
	return &RefusalError{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// Proof kinds (Verified.Method).
const (
	MethodSSH      = "ssh"      // an SSHSIG over the statement (ssh-keygen -Y sign, namespace Namespace)
	MethodWebAuthn = "webauthn" // a passkey assertion whose challenge is the statement's hash
)

// Proof is what a decision carries to show that a reviewer made it: an SSH signature or a
// passkey assertion. Its JSON names are the decision's.
type Proof struct {
	// Reviewer is the principal the decision names. Optional. With a version 2 statement the
	// reviewer is the principal signed, and a Reviewer naming another is refused
	// (ReasonStatementMismatch). With version 1 (which signs no principal), when set, the
	// verifying key must be allowed to sign for it; when empty, the key's first principal that is
	// not a pattern is the reviewer.
	Reviewer string `json:"reviewer,omitempty"`
	// Signature is an armored SSHSIG over the statement, in Namespace.
	Signature string `json:"signature,omitempty"`
	// WebAuthn is a passkey assertion whose challenge is SHA-256 of the statement
	// (WebAuthnChallenge), by a passkey listed in the reviewers (PasskeyAuthorizedKey).
	WebAuthn *WebAuthnAssertion `json:"webauthn,omitempty"`
	// Statement is the statement text the reviewer signed. Optional: when present it must equal
	// this run's statement, and a difference is reported with the field's name; its expiry is
	// used when the expected fields have none.
	Statement string `json:"statement,omitempty"`
}

// WebAuthnAssertion is a passkey assertion as navigator.credentials.get returns it, each field
// base64url without padding. Verify checks it: the passkey is in the reviewers, the relying party
// id and origin are the key's, user presence and user verification are set, and the challenge is
// SHA-256 of the statement.
type WebAuthnAssertion struct {
	CredentialID      string `json:"credential_id"`
	AuthenticatorData string `json:"authenticator_data"`
	ClientDataJSON    string `json:"client_data_json"`
	Signature         string `json:"signature"`
	UserHandle        string `json:"user_handle,omitempty"`
}

// Verified says who made a decision that verified.
type Verified struct {
	// Principal is the reviewer: the name the decision gave, or the key's first principal.
	Principal string `json:"principal"`
	// Fingerprint is the key's SHA256 fingerprint.
	Fingerprint string `json:"fingerprint"`
	// KeyType is the key's type (a KeyType* constant).
	KeyType string `json:"key_type"`
	// Method is MethodSSH or MethodWebAuthn.
	Method string `json:"method"`
	// Touched is true when a security key reported user presence (always true for sk- keys,
	// which are refused without it; false for keys that are not security keys).
	Touched bool `json:"touched"`
	// UserVerified is true when a security key reported user verification (PIN or biometric).
	UserVerified bool `json:"user_verified"`
	// Counter is the security key's signature counter (zero for other keys).
	Counter uint32 `json:"counter,omitempty"`
	// Challenge is what a passkey signed, base64url (WebAuthnChallenge of the statement, or a
	// sign-in's server challenge); Counters tells an assertion presented again by it. Empty for
	// SSH signatures.
	Challenge string `json:"challenge,omitempty"`
	// Expires is the statement's expiry.
	Expires time.Time `json:"expires"`
	// ValidBefore is the valid-before of the reviewers-file line that accepted the key (zero
	// when the line has none).
	ValidBefore time.Time `json:"valid_before,omitzero"`
}

// StillValid checks, at now, what of a verified decision can lapse with time: the statement's
// expiry and the key's valid-before. A verifier that lets time pass after Verify (a sandbox
// host waiting for its claim to show in the run's history) calls it again right before the code
// starts. A refusal is a *RefusalError, ReasonExpired or ReasonKeyNotValid.
func (v Verified) StillValid(now time.Time) error {
	if !v.ValidBefore.IsZero() && now.After(v.ValidBefore) {
		return refuse(ReasonKeyNotValid, "key %s was valid only before %s; it is now %s",
			v.Fingerprint, v.ValidBefore.Format(time.RFC3339), now.UTC().Format(expiresLayout))
	}
	if !now.Before(v.Expires) {
		return refuse(ReasonExpired, "the statement expired at %s; it is now %s; sign a new statement",
			v.Expires.UTC().Format(expiresLayout), now.UTC().Format(expiresLayout))
	}
	return nil
}

// Verify checks that proof is a valid decision by one of reviewers for exactly the statement
// that want describes, at time now. The caller fills want from its own knowledge (workflow id,
// run id, the digest it computed, the sandbox task queue) and from the decision (approve or
// deny, approval id, expiry); the signed statement must equal want.Statement() byte for byte.
// When want.Expires is zero the expiry is read from proof.Statement, and so is the reviewer of
// a version 2 statement when want.Reviewer is empty; the version is want's (the verifier's
// rule), never the statement's.
//
// A refusal is a *RefusalError (errors.Is matches its Reason). The signature is checked before
// expiry, key validity and principal, so those reasons always concern a genuine signature by a
// listed key.
func Verify(reviewers *Reviewers, want Fields, proof Proof, now time.Time) (Verified, error) {
	var v Verified
	switch {
	case proof.Signature == "" && proof.WebAuthn == nil:
		return v, refuse(ReasonUnsigned, "the decision carries no signature; sign the statement (starter statement) with a reviewer key, namespace %s", Namespace)
	case proof.Signature != "" && proof.WebAuthn != nil:
		return v, refuse(ReasonMalformed, "the decision carries both a signature and a passkey assertion; send one")
	}
	stmt, err := statementFor(&want, proof.Statement)
	if err != nil {
		return v, err
	}
	reviewer := proof.Reviewer
	if want.version() == StatementVersion2 {
		// The signed principal is the reviewer; a decision naming another is refused.
		if proof.Reviewer != "" && proof.Reviewer != want.Reviewer {
			return v, &RefusalError{Reason: ReasonStatementMismatch, Field: FieldReviewer,
				Detail: fmt.Sprintf("the decision names reviewer %q but the statement signed names %q", printable(proof.Reviewer), printable(want.Reviewer))}
		}
		reviewer = want.Reviewer
	}
	if proof.WebAuthn != nil {
		pub, entries, p, err := verifyAssertion(reviewers, proof.WebAuthn, WebAuthnChallenge(stmt), "")
		if err != nil {
			return v, err
		}
		return acceptKey(entries, reviewer, want, now, func(principal string) Verified {
			return passkeyVerified(principal, pub, p)
		})
	}
	sig, err := ParseSSHSignature(proof.Signature)
	if err != nil {
		return v, &RefusalError{Reason: ReasonMalformed, Detail: strings.TrimPrefix(err.Error(), "approval: ")}
	}
	if sig.Namespace != Namespace {
		return v, refuse(ReasonWrongNamespace, "signature namespace %q; want %q (ssh-keygen -Y sign -n %s)", printable(sig.Namespace), Namespace, Namespace)
	}
	pub, err := parsePublicKey(sig.PublicKey)
	if err != nil {
		return v, refuse(ReasonUnsupported, "signing key: %v", err)
	}
	var entries []Key
	if reviewers != nil {
		for _, k := range reviewers.keys {
			if k.pub != nil && bytes.Equal(k.pub.blob, pub.blob) {
				entries = append(entries, k)
			}
		}
	}
	if len(entries) == 0 {
		return v, refuse(ReasonUnknownKey, "key %s %s is not in the reviewers file", pub.typ, pub.fingerprint())
	}
	data, err := signedData(sig.Namespace, sig.HashAlgorithm, stmt)
	if err != nil {
		return v, refuse(ReasonUnsupported, "%v", err)
	}
	sk, err := pub.verify(data, sig.Signature)
	switch {
	case errors.Is(err, errSigInvalid):
		return v, refuse(ReasonBadSignature, "the signature by %s does not verify over this decision's statement (%s)", pub.fingerprint(), describe(want))
	case err != nil:
		return v, refuse(ReasonMalformed, "signature by %s: %v", pub.fingerprint(), err)
	}
	if pub.isSK() && sk.flags&skFlagUserPresence == 0 {
		return v, refuse(ReasonNoUserPresence, "security key %s signed without user presence (flags 0x%02x); touch the key when signing", pub.fingerprint(), sk.flags)
	}
	return acceptKey(entries, reviewer, want, now, func(principal string) Verified {
		v := Verified{Principal: principal, Fingerprint: pub.fingerprint(), KeyType: pub.typ, Method: MethodSSH}
		if pub.isSK() {
			v.Touched = true
			v.UserVerified = sk.flags&skFlagUserVerified != 0
			v.Counter = sk.counter
		}
		return v
	})
}

// statementFor returns the statement want describes, after checking the one the decision
// carries (if any) against it field by field; a zero want.Expires is taken from that statement.
func statementFor(want *Fields, signed string) ([]byte, error) {
	if signed != "" {
		got, err := ParseStatement([]byte(signed))
		if err != nil {
			return nil, &RefusalError{Reason: ReasonMalformed, Detail: strings.TrimPrefix(err.Error(), "approval: ")}
		}
		if got.version() != want.version() {
			return nil, &RefusalError{Reason: ReasonStatementMismatch, Field: FieldVersion,
				Detail: fmt.Sprintf("the signed statement is version %d; this decision needs version %d (sign a new statement: starter statement)", got.version(), want.version())}
		}
		if want.Expires.IsZero() {
			want.Expires = got.Expires
		}
		if want.version() == StatementVersion2 && want.Reviewer == "" {
			want.Reviewer = got.Reviewer
		}
		gv, wv := got.values(), want.values()
		for i, name := range want.names() {
			if gv[i] != wv[i] {
				return nil, &RefusalError{Reason: ReasonStatementMismatch, Field: name,
					Detail: fmt.Sprintf("%s is %q in the signed statement; this decision needs %q", name, printable(gv[i]), printable(wv[i]))}
			}
		}
	}
	stmt, err := want.Statement()
	if err != nil {
		return nil, &RefusalError{Reason: ReasonMalformed, Detail: strings.TrimPrefix(err.Error(), "approval: ")}
	}
	if signed != "" && !bytes.Equal(stmt, []byte(signed)) {
		return nil, refuse(ReasonStatementMismatch, "the signed statement is not in canonical form")
	}
	return stmt, nil
}

// acceptKey accepts the first of the verifying key's reviewers-file lines that may sign for
// reviewer now, makes the result with verified, and checks the statement's expiry.
func acceptKey(entries []Key, reviewer string, want Fields, now time.Time, verified func(principal string) Verified) (Verified, error) {
	var first error
	for _, k := range entries {
		principal, err := acceptEntry(k, reviewer, now)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		v := verified(principal)
		v.Expires = want.Expires.UTC().Truncate(time.Second)
		v.ValidBefore = k.ValidBefore
		if err := v.StillValid(now); err != nil {
			return Verified{}, err
		}
		return v, nil
	}
	return Verified{}, first
}

// acceptEntry checks one reviewers-file line of the verifying key and returns the principal.
func acceptEntry(k Key, reviewer string, now time.Time) (string, error) {
	if k.Namespaces != "" && !matchPatternList(Namespace, k.Namespaces) {
		return "", refuse(ReasonWrongNamespace, "key %s is limited to namespaces=%q, which does not include %s", k.Fingerprint, k.Namespaces, Namespace)
	}
	if !k.ValidAfter.IsZero() && now.Before(k.ValidAfter) {
		return "", refuse(ReasonKeyNotValid, "key %s is valid only after %s", k.Fingerprint, k.ValidAfter.Format(time.RFC3339))
	}
	if !k.ValidBefore.IsZero() && now.After(k.ValidBefore) {
		return "", refuse(ReasonKeyNotValid, "key %s was valid only before %s", k.Fingerprint, k.ValidBefore.Format(time.RFC3339))
	}
	list := strings.Join(k.Principals, ",")
	if reviewer != "" {
		if err := checkPrincipal(reviewer); err != nil || strings.ContainsAny(reviewer, "*?!,") {
			return "", refuse(ReasonPrincipalMismatch, "reviewer %q is not a plain principal name", printable(reviewer))
		}
		if !matchPatternList(reviewer, list) {
			return "", refuse(ReasonPrincipalMismatch, "the decision names reviewer %q but key %s belongs to %s", printable(reviewer), k.Fingerprint, list)
		}
		return reviewer, nil
	}
	for _, p := range k.Principals {
		if !isPattern(p) {
			return p, nil
		}
	}
	return "", refuse(ReasonPrincipalMismatch, "key %s has only principal patterns (%s); the decision must name its reviewer", k.Fingerprint, list)
}

func describe(f Fields) string {
	names, vals := f.names(), f.values()
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = name + " " + vals[i]
	}
	return fmt.Sprintf("version %d: %s", f.version(), strings.Join(parts, ", "))
}
