package approval

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"
)

// softPasskey is a software authenticator: it makes assertions as a browser and a passkey would.
type softPasskey struct {
	key  *ecdsa.PrivateKey
	rpID string
}

func newSoftPasskey(t *testing.T, rpID string) *softPasskey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &softPasskey{key: k, rpID: rpID}
}

func (p *softPasskey) line(t *testing.T, principal string) string {
	t.Helper()
	pub, err := PasskeyAuthorizedKey(&p.key.PublicKey, p.rpID)
	if err != nil {
		t.Fatal(err)
	}
	return principal + " " + pub + " passkey"
}

type assertOpts struct {
	rpID, origin, typ string
	flags             byte
	crossOrigin       bool
}

func (p *softPasskey) assert(t *testing.T, challenge []byte, o assertOpts) *WebAuthnAssertion {
	t.Helper()
	if o.rpID == "" {
		o.rpID = p.rpID
	}
	if o.typ == "" {
		o.typ = webauthnTypeGet
	}
	rp := sha256.Sum256([]byte(o.rpID))
	auth := append(rp[:], o.flags)
	auth = binary.BigEndian.AppendUint32(auth, 7)
	cd, err := json.Marshal(map[string]any{"type": o.typ, "challenge": base64.RawURLEncoding.EncodeToString(challenge),
		"origin": o.origin, "crossOrigin": o.crossOrigin})
	if err != nil {
		t.Fatal(err)
	}
	cdh := sha256.Sum256(cd)
	h := sha256.Sum256(append(append([]byte(nil), auth...), cdh[:]...))
	sig, err := ecdsa.SignASN1(rand.Reader, p.key, h[:])
	if err != nil {
		t.Fatal(err)
	}
	e := base64.RawURLEncoding.EncodeToString
	return &WebAuthnAssertion{CredentialID: e([]byte("cred")), AuthenticatorData: e(auth), ClientDataJSON: e(cd), Signature: e(sig)}
}

func TestVerifyPasskey(t *testing.T) {
	alice := newSoftPasskey(t, "localhost")
	stranger := newSoftPasskey(t, "localhost")
	ssh := newSoftPasskey(t, "ssh:")
	reviewers := mustReviewers(t, alice.line(t, "alice"))
	want := testFields()
	stmt := mustStatement(t, want)
	ch := WebAuthnChallenge(stmt)
	other := want
	other.Digest = "sha256:" + strings.Repeat("cd", 32)
	const ok = webauthnFlagUP | webauthnFlagUV
	good := assertOpts{origin: "http://localhost:8235", flags: ok}
	with := func(f func(*assertOpts)) assertOpts { o := good; f(&o); return o }
	v, err := Verify(reviewers, want, Proof{WebAuthn: alice.assert(t, ch, good), Statement: string(stmt)}, testNow)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if v.Principal != "alice" || v.Method != MethodWebAuthn || !v.Touched || !v.UserVerified || v.Counter != 7 || !v.Expires.Equal(testExpires) {
		t.Errorf("Verified = %+v", v)
	}
	sshPub, err := parsePublicKey(func() []byte {
		w := &wireWriter{}
		q, _ := ssh.key.PublicKey.Bytes()
		w.string([]byte(KeyTypeSKECDSAP256))
		w.string([]byte(nistp256CurveName))
		w.string(q)
		w.string([]byte("ssh:"))
		return w.b
	}())
	if err != nil {
		t.Fatal(err)
	}
	sshReviewers := mustReviewers(t, "carol "+sshPub.authorized())
	cases := []struct {
		name      string
		reviewers *Reviewers
		a         *WebAuthnAssertion
		reviewer  string
		want      Reason
	}{
		{"stranger's passkey", reviewers, stranger.assert(t, ch, good), "", ReasonUnknownKey},
		{"other digest", reviewers, alice.assert(t, WebAuthnChallenge(mustStatement(t, other)), good), "", ReasonBadSignature},
		{"no user presence", reviewers, alice.assert(t, ch, with(func(o *assertOpts) { o.flags = webauthnFlagUV })), "", ReasonNoUserPresence},
		{"no user verification", reviewers, alice.assert(t, ch, with(func(o *assertOpts) { o.flags = webauthnFlagUP })), "", ReasonNoUserVerification},
		{"other relying party", reviewers, alice.assert(t, ch, with(func(o *assertOpts) { o.rpID = "evil.example" })), "", ReasonUnknownKey},
		{"other origin", reviewers, alice.assert(t, ch, with(func(o *assertOpts) { o.origin = "https://evil.example" })), "", ReasonWrongOrigin},
		{"cross origin", reviewers, alice.assert(t, ch, with(func(o *assertOpts) { o.crossOrigin = true })), "", ReasonWrongOrigin},
		{"registration, not assertion", reviewers, alice.assert(t, ch, with(func(o *assertOpts) { o.typ = "webauthn.create" })), "", ReasonMalformed},
		{"other principal", reviewers, alice.assert(t, ch, good), "bob", ReasonPrincipalMismatch},
		{"openssh security key application", sshReviewers, ssh.assert(t, ch, with(func(o *assertOpts) { o.origin = "https://ssh:" })), "", ReasonUnknownKey},
	}
	for _, tc := range cases {
		_, err := Verify(tc.reviewers, want, Proof{WebAuthn: tc.a, Reviewer: tc.reviewer}, testNow)
		if !isReason(err, tc.want) {
			t.Errorf("%s: got %v; want %s", tc.name, err, tc.want)
		}
	}
	if _, err := Verify(reviewers, want, Proof{WebAuthn: alice.assert(t, ch, good)}, testExpires); !isReason(err, ReasonExpired) {
		t.Errorf("expired: got %v; want %s", err, ReasonExpired)
	}
	tampered := strings.Replace(string(stmt), want.Digest, other.Digest, 1)
	if _, err := Verify(reviewers, want, Proof{WebAuthn: alice.assert(t, WebAuthnChallenge([]byte(tampered)), good), Statement: tampered}, testNow); !isReason(err, ReasonStatementMismatch) {
		t.Errorf("tampered statement: got %v; want %s", err, ReasonStatementMismatch)
	}
}

func TestVerifyPasskeyLogin(t *testing.T) {
	alice := newSoftPasskey(t, "localhost")
	reviewers := mustReviewers(t, alice.line(t, "alice"))
	ch := []byte("0123456789abcdef0123456789abcdef")
	opts := assertOpts{origin: "http://localhost:8235", flags: webauthnFlagUP | webauthnFlagUV}
	v, err := VerifyPasskeyLogin(reviewers, alice.assert(t, ch, opts), ch, "http://localhost:8235", testNow)
	if err != nil || v.Principal != "alice" {
		t.Fatalf("VerifyPasskeyLogin = %+v, %v; want alice", v, err)
	}
	if _, err := VerifyPasskeyLogin(reviewers, alice.assert(t, ch, opts), ch, "http://localhost:9999", testNow); !isReason(err, ReasonWrongOrigin) {
		t.Errorf("other port: got %v; want %s", err, ReasonWrongOrigin)
	}
	if _, err := VerifyPasskeyLogin(reviewers, alice.assert(t, []byte("other"), opts), ch, "http://localhost:8235", testNow); !isReason(err, ReasonBadSignature) {
		t.Errorf("other challenge: got %v; want %s", err, ReasonBadSignature)
	}
	// The line round-trips through the recorded JSON form, as the workflow records reviewers.
	b, err := json.Marshal(reviewers)
	if err != nil {
		t.Fatal(err)
	}
	var again Reviewers
	if err := json.Unmarshal(b, &again); err != nil {
		t.Fatalf("reviewers json: %v", err)
	}
	if _, err := VerifyPasskeyLogin(&again, alice.assert(t, ch, opts), ch, "http://localhost:8235", testNow); err != nil {
		t.Errorf("after json: %v", err)
	}
}
