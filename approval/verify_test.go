package approval

import (
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func TestVerifyAccepts(t *testing.T) {
	ed := newEd25519Signer(t)
	ec := newECDSASigner(t)
	skEd := newSKSigner(t, KeyTypeSKEd25519, skFlagUserPresence)
	skEC := newSKSigner(t, KeyTypeSKECDSAP256, skFlagUserPresence|skFlagUserVerified)
	r := mustReviewers(t,
		allowedLine("alice,alice@example.com", "", ed.PublicKey()),
		allowedLine("bob", `namespaces="git,sandboxflow-approval"`, ec.PublicKey()),
		allowedLine("carol", "", skEd.PublicKey()),
		allowedLine("*@example.com,dave", "", skEC.PublicKey()),
	)
	f := testFields()
	stmt := mustStatement(t, f)
	tests := []struct {
		name     string
		signer   ssh.Signer
		reviewer string
		want     Verified
	}{
		{"ed25519", ed, "", Verified{Principal: "alice", KeyType: KeyTypeEd25519}},
		{"ed25519 second principal", ed, "alice@example.com", Verified{Principal: "alice@example.com", KeyType: KeyTypeEd25519}},
		{"ecdsa", ec, "bob", Verified{Principal: "bob", KeyType: KeyTypeECDSAP256}},
		{"sk-ed25519 touched", skEd, "", Verified{Principal: "carol", KeyType: KeyTypeSKEd25519, Touched: true, Counter: 42}},
		{"sk-ecdsa touched and verified", skEC, "", Verified{Principal: "dave", KeyType: KeyTypeSKECDSAP256, Touched: true, UserVerified: true, Counter: 42}},
		{"pattern principal", skEC, "erin@example.com", Verified{Principal: "erin@example.com", KeyType: KeyTypeSKECDSAP256, Touched: true, UserVerified: true, Counter: 42}},
	}
	for _, tt := range tests {
		got, err := Verify(r, f, Proof{Signature: mustSign(t, tt.signer, stmt), Reviewer: tt.reviewer}, testNow)
		if err != nil {
			t.Errorf("%s: Verify: %v", tt.name, err)
			continue
		}
		tt.want.Fingerprint = ssh.FingerprintSHA256(tt.signer.PublicKey())
		tt.want.Method = MethodSSH
		tt.want.Expires = testExpires
		if got != tt.want {
			t.Errorf("%s: got %+v; want %+v", tt.name, got, tt.want)
		}
	}
	// The expiry may come from the statement the decision carries.
	noExp := f
	noExp.Expires = time.Time{}
	if _, err := Verify(r, noExp, Proof{Signature: mustSign(t, ed, stmt), Statement: string(stmt)}, testNow); err != nil {
		t.Errorf("expiry from the carried statement: %v", err)
	}
}

// TestVerifyRefuses checks each refusal reason, and that every field of the statement is bound.
func TestVerifyRefuses(t *testing.T) {
	alice := newEd25519Signer(t)
	stranger := newEd25519Signer(t)
	gitOnly := newEd25519Signer(t)
	retired := newEd25519Signer(t)
	lazy := newSKSigner(t, KeyTypeSKEd25519, 0)
	lazyEC := newSKSigner(t, KeyTypeSKECDSAP256, skFlagUserVerified)
	patterns := newEd25519Signer(t)
	r := mustReviewers(t,
		allowedLine("alice", "", alice.PublicKey()),
		allowedLine("gus", `namespaces="git"`, gitOnly.PublicKey()),
		allowedLine("rita", `valid-before="20260101Z"`, retired.PublicKey()),
		allowedLine("larry", "", lazy.PublicKey()),
		allowedLine("lena", "", lazyEC.PublicKey()),
		allowedLine("*@example.com", "", patterns.PublicKey()),
	)
	want := testFields()
	stmt := mustStatement(t, want)
	sign := func(s ssh.Signer, f Fields) string { return mustSign(t, s, mustStatement(t, f)) }
	other := func(change func(*Fields)) Fields {
		f := testFields()
		change(&f)
		return f
	}
	otherNS, err := SignNamespace(alice, "git", stmt)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		proof  Proof
		now    time.Time
		reason Reason
		field  string
	}{
		{"unsigned", Proof{}, testNow, ReasonUnsigned, ""},
		{"garbage", Proof{Signature: "hello"}, testNow, ReasonMalformed, ""},
		{"unknown key", Proof{Signature: mustSign(t, stranger, stmt)}, testNow, ReasonUnknownKey, ""},
		{"other namespace", Proof{Signature: otherNS}, testNow, ReasonWrongNamespace, ""},
		{"key limited to other namespaces", Proof{Signature: mustSign(t, gitOnly, stmt)}, testNow, ReasonWrongNamespace, ""},
		{"key past valid-before", Proof{Signature: mustSign(t, retired, stmt)}, testNow, ReasonKeyNotValid, ""},
		{"other workflow", Proof{Signature: sign(alice, other(func(f *Fields) { f.WorkflowID = "runcode-other" }))}, testNow, ReasonBadSignature, ""},
		{"other run", Proof{Signature: sign(alice, other(func(f *Fields) { f.RunID = "11111111-1d2a-4c5e-9f00-1234567890ab" }))}, testNow, ReasonBadSignature, ""},
		{"other digest", Proof{Signature: sign(alice, other(func(f *Fields) { f.Digest = "sha256:" + strings.Repeat("cd", 32) }))}, testNow, ReasonBadSignature, ""},
		{"deny for approve", Proof{Signature: sign(alice, other(func(f *Fields) { f.Approve = false }))}, testNow, ReasonBadSignature, ""},
		{"other approval id", Proof{Signature: sign(alice, other(func(f *Fields) { f.ApprovalID = "00000000-4b5a-4968-8776-a5b4c3d2e1f0" }))}, testNow, ReasonBadSignature, ""},
		{"other task queue", Proof{Signature: sign(alice, other(func(f *Fields) { f.SandboxTaskQueue = "elsewhere" }))}, testNow, ReasonBadSignature, ""},
		{"other expiry", Proof{Signature: sign(alice, other(func(f *Fields) { f.Expires = f.Expires.Add(time.Hour) }))}, testNow, ReasonBadSignature, ""},
		{"expired", Proof{Signature: mustSign(t, alice, stmt)}, testExpires, ReasonExpired, ""},
		{"sk without presence", Proof{Signature: mustSign(t, lazy, stmt)}, testNow, ReasonNoUserPresence, ""},
		{"sk-ecdsa verified but not present", Proof{Signature: mustSign(t, lazyEC, stmt)}, testNow, ReasonNoUserPresence, ""},
		{"principal mismatch", Proof{Signature: mustSign(t, alice, stmt), Reviewer: "bob"}, testNow, ReasonPrincipalMismatch, ""},
		{"reviewer is a pattern", Proof{Signature: mustSign(t, alice, stmt), Reviewer: "*"}, testNow, ReasonPrincipalMismatch, ""},
		{"only patterns, no reviewer", Proof{Signature: mustSign(t, patterns, stmt)}, testNow, ReasonPrincipalMismatch, ""},
		{"webauthn empty", Proof{WebAuthn: &WebAuthnAssertion{}}, testNow, ReasonMalformed, ""},
		{"both proofs", Proof{Signature: mustSign(t, alice, stmt), WebAuthn: &WebAuthnAssertion{}}, testNow, ReasonMalformed, ""},
	}
	for _, field := range statementFields {
		changed := other(func(f *Fields) {
			switch field {
			case FieldWorkflowID:
				f.WorkflowID = "runcode-other"
			case FieldRunID:
				f.RunID = "other-run"
			case FieldDigest:
				f.Digest = "sha256:" + strings.Repeat("cd", 32)
			case FieldDecision:
				f.Approve = false
			case FieldApprovalID:
				f.ApprovalID = "00000000-4b5a-4968-8776-a5b4c3d2e1f0"
			case FieldSandboxTaskQueue:
				f.SandboxTaskQueue = "elsewhere"
			case FieldExpires:
				f.Expires = f.Expires.Add(time.Minute)
			}
		})
		tests = append(tests, struct {
			name   string
			proof  Proof
			now    time.Time
			reason Reason
			field  string
		}{"carried statement with other " + field,
			Proof{Signature: sign(alice, changed), Statement: string(mustStatement(t, changed))},
			testNow, ReasonStatementMismatch, field})
	}
	for _, tt := range tests {
		got, err := Verify(r, want, tt.proof, tt.now)
		var ref *RefusalError
		if !errors.As(err, &ref) {
			t.Errorf("%s: got %+v, %v; want a *RefusalError", tt.name, got, err)
			continue
		}
		if !errors.Is(err, tt.reason) || ref.Reason != tt.reason {
			t.Errorf("%s: got reason %s (%v); want %s", tt.name, ref.Reason, err, tt.reason)
		}
		if ref.Field != tt.field {
			t.Errorf("%s: got field %q; want %q", tt.name, ref.Field, tt.field)
		}
		if got != (Verified{}) {
			t.Errorf("%s: got %+v with the refusal; want zero Verified", tt.name, got)
		}
		if !strings.HasPrefix(err.Error(), "approval: refused ("+string(tt.reason)+"): ") {
			t.Errorf("%s: got message %q; want it to start with approval: refused (%s)", tt.name, err, tt.reason)
		}
	}
}

func TestVerifyNilReviewers(t *testing.T) {
	stmt := mustStatement(t, testFields())
	_, err := Verify(nil, testFields(), Proof{Signature: mustSign(t, newEd25519Signer(t), stmt)}, testNow)
	if !errors.Is(err, ReasonUnknownKey) {
		t.Fatalf("got %v; want %s", err, ReasonUnknownKey)
	}
}

func TestVerifySHA256Signature(t *testing.T) {
	alice := newEd25519Signer(t)
	r := mustReviewers(t, allowedLine("alice", "", alice.PublicKey()))
	stmt := mustStatement(t, testFields())
	data, err := signedData(Namespace, HashSHA256, stmt)
	if err != nil {
		t.Fatal(err)
	}
	s, err := alice.Sign(nil, data)
	if err != nil {
		t.Fatal(err)
	}
	w := &wireWriter{}
	w.string([]byte(s.Format))
	w.string(s.Blob)
	sig := (&SSHSignature{PublicKey: alice.PublicKey().Marshal(), Namespace: Namespace, HashAlgorithm: HashSHA256, Signature: w.b}).Marshal()
	if _, err := Verify(r, testFields(), Proof{Signature: sig}, testNow); err != nil {
		t.Fatalf("sha256 SSHSIG: %v", err)
	}
}

func TestParseSSHSignatureRoundTrip(t *testing.T) {
	armored := mustSign(t, newEd25519Signer(t), []byte("x"))
	sig, err := ParseSSHSignature("\n  " + strings.ReplaceAll(armored, "\n", "\r\n") + "\n")
	if err != nil {
		t.Fatalf("ParseSSHSignature: %v", err)
	}
	if got := sig.Marshal(); got != armored {
		t.Fatalf("Marshal: got %q; want %q", got, armored)
	}
	for _, bad := range []string{"", armorBegin + "\n" + armorEnd, strings.Replace(armored, "U1NIU0lH", "U1NIU0lI", 1), armored[:len(armored)-10]} {
		if _, err := ParseSSHSignature(bad); err == nil {
			t.Errorf("ParseSSHSignature(%q): got no error; want one", bad)
		}
	}
}

func TestRefusalMessages(t *testing.T) {
	r := mustReviewers(t, allowedLine("alice", "", newEd25519Signer(t).PublicKey()))
	noExp := testFields()
	noExp.Expires = time.Time{}
	_, err := Verify(r, noExp, Proof{Signature: "x"}, testNow)
	if want := "approval: refused (malformed): statement: expires is missing"; err == nil || err.Error() != want {
		t.Errorf("got %v; want %s", err, want)
	}
}

// In a version 2 statement the reviewer's principal is signed: a key whose line allows two
// principals can sign for either, and the one signed is the one verified; whoever relays the
// decision cannot change it (the decision's reviewer, or the statement text), nor drop it to
// fall back to the key's first principal, nor present a version 1 statement to a run that needs
// version 2. With the passkey of the same line it is the same.
func TestVerifyV2BindsTheReviewer(t *testing.T) {
	key := newEd25519Signer(t)
	passkey := newSoftPasskey(t, "localhost")
	reviewers := pinned(t, mustReviewers(t, allowedLine("alice,bob", "", key.PublicKey()), passkey.line(t, "alice,bob")), inboxOrigin)
	f := testFields()
	f.Version = StatementVersion2
	for _, signedAs := range []string{"alice", "bob"} {
		f.Reviewer = signedAs
		stmt := mustStatement(t, f)
		sig := mustSign(t, key, stmt)
		a := passkey.assert(t, WebAuthnChallenge(stmt), assertOpts{origin: inboxOrigin, flags: webauthnFlagUP | webauthnFlagUV})
		relayed := map[string]string{"alice": "bob", "bob": "alice"}[signedAs]
		for _, p := range []struct {
			name  string
			proof Proof
		}{{"ssh", Proof{Signature: sig}}, {"passkey", Proof{WebAuthn: a}}} {
			// Verified as signed, with the statement or without (then want names the reviewer).
			want := f
			want.Reviewer = ""
			withStatement := p.proof
			withStatement.Statement = string(stmt)
			v, err := Verify(reviewers, want, withStatement, testNow)
			if err != nil || v.Principal != signedAs {
				t.Errorf("%s signed as %s: %+v, %v; want verified as %s", p.name, signedAs, v, err, signedAs)
			}
			named := withStatement
			named.Reviewer = signedAs
			if v, err := Verify(reviewers, f, named, testNow); err != nil || v.Principal != signedAs {
				t.Errorf("%s signed as %s, named: %+v, %v; want verified as %s", p.name, signedAs, v, err, signedAs)
			}
			// The relay names the other principal the key allows.
			named.Reviewer = relayed
			if _, err := Verify(reviewers, want, named, testNow); !isReason(err, ReasonStatementMismatch) {
				t.Errorf("%s signed as %s, relayed as %s: %v; want %s", p.name, signedAs, relayed, err, ReasonStatementMismatch)
			}
			// ... and edits the statement to match, or drops it.
			edited := withStatement
			edited.Statement = strings.Replace(string(stmt), "reviewer: "+signedAs+"\n", "reviewer: "+relayed+"\n", 1)
			if _, err := Verify(reviewers, want, edited, testNow); !isReason(err, ReasonBadSignature) {
				t.Errorf("%s signed as %s, statement edited to %s: %v; want %s", p.name, signedAs, relayed, err, ReasonBadSignature)
			}
			dropped := p.proof
			dropped.Reviewer = relayed
			asRelayed := f
			asRelayed.Reviewer = relayed
			if _, err := Verify(reviewers, asRelayed, dropped, testNow); !isReason(err, ReasonBadSignature) {
				t.Errorf("%s signed as %s, no statement, relayed as %s: %v; want %s", p.name, signedAs, relayed, err, ReasonBadSignature)
			}
			if _, err := Verify(reviewers, want, p.proof, testNow); !isReason(err, ReasonMalformed) {
				t.Errorf("%s signed as %s, no statement and no reviewer: %v; want %s", p.name, signedAs, err, ReasonMalformed)
			}
		}
	}
	// A version 1 statement (no reviewer) is refused where version 2 is needed.
	v1 := testFields()
	v1stmt := mustStatement(t, v1)
	want := f
	want.Reviewer = "alice"
	err := func() error {
		_, err := Verify(reviewers, want, Proof{Signature: mustSign(t, key, v1stmt), Statement: string(v1stmt)}, testNow)
		return err
	}()
	var ref *RefusalError
	if !errors.As(err, &ref) || ref.Reason != ReasonStatementMismatch || ref.Field != FieldVersion {
		t.Errorf("v1 statement where v2 is needed: %v; want %s of %s", err, ReasonStatementMismatch, FieldVersion)
	}
	if _, err := Verify(reviewers, want, Proof{Signature: mustSign(t, key, v1stmt)}, testNow); !isReason(err, ReasonBadSignature) {
		t.Errorf("v1 signature without its statement where v2 is needed: %v; want %s", err, ReasonBadSignature)
	}
	// A name the key's line does not allow is refused though signed.
	f.Reviewer = "mallory"
	stmt := mustStatement(t, f)
	if _, err := Verify(reviewers, f, Proof{Signature: mustSign(t, key, stmt), Statement: string(stmt)}, testNow); !isReason(err, ReasonPrincipalMismatch) {
		t.Errorf("signed as mallory: %v; want %s", err, ReasonPrincipalMismatch)
	}
}
