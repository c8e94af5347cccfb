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
	// counter is the signature counter reported (7 unless set; zeroCounter reports 0).
	counter     uint32
	zeroCounter bool
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
	counter := o.counter
	if counter == 0 && !o.zeroCounter {
		counter = 7
	}
	auth = binary.BigEndian.AppendUint32(auth, counter)
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

// inboxOrigin is the origin the tests' reviewers accept passkey assertions from.
const inboxOrigin = "http://localhost:8235"

// pinned returns r accepting passkey assertions from origin.
func pinned(t *testing.T, r *Reviewers, origin string) *Reviewers {
	t.Helper()
	p, err := r.WithPasskeyOrigin(origin)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVerifyPasskey(t *testing.T) {
	alice := newSoftPasskey(t, "localhost")
	stranger := newSoftPasskey(t, "localhost")
	ssh := newSoftPasskey(t, "ssh:")
	reviewers := pinned(t, mustReviewers(t, alice.line(t, "alice")), inboxOrigin)
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
	sshReviewers := pinned(t, mustReviewers(t, "carol "+sshPub.authorized()), "https://ssh:")
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
		{"other port of the inbox's host", reviewers, alice.assert(t, ch, with(func(o *assertOpts) { o.origin = "http://localhost:9999" })), "", ReasonWrongOrigin},
		{"no port", reviewers, alice.assert(t, ch, with(func(o *assertOpts) { o.origin = "http://localhost" })), "", ReasonWrongOrigin},
		{"https beside the http inbox", reviewers, alice.assert(t, ch, with(func(o *assertOpts) { o.origin = "https://localhost:8235" })), "", ReasonWrongOrigin},
		{"no origin configured", mustReviewers(t, alice.line(t, "alice")), alice.assert(t, ch, good), "", ReasonWrongOrigin},
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

// Passkey decisions verify only when made on the inbox's own origin: with an https inbox, an
// assertion made on plain http, or on another port of the same host, is refused; the origin is
// recorded with the keys (version 2), and a version 1 record (histories from before the pin)
// keeps its rule, any origin of the relying party, so that it replays unchanged.
func TestPasskeyOriginIsPinned(t *testing.T) {
	alice := newSoftPasskey(t, "inbox.example.com")
	want := testFields()
	stmt := mustStatement(t, want)
	ch := WebAuthnChallenge(stmt)
	const ok = webauthnFlagUP | webauthnFlagUV
	reviewers := pinned(t, mustReviewers(t, alice.line(t, "alice")), "HTTPS://Inbox.Example.com:443/")
	if got := reviewers.PasskeyOrigin(); got != "https://inbox.example.com" {
		t.Fatalf("PasskeyOrigin = %q; want https://inbox.example.com", got)
	}
	b, err := json.Marshal(reviewers)
	if err != nil {
		t.Fatal(err)
	}
	var recorded Reviewers
	if err := json.Unmarshal(b, &recorded); err != nil {
		t.Fatalf("reviewers json %s: %v", b, err)
	}
	for _, r := range []*Reviewers{reviewers, &recorded} {
		for origin, wantReason := range map[string]Reason{
			"https://inbox.example.com":      "",
			"http://inbox.example.com":       ReasonWrongOrigin,
			"https://inbox.example.com:8443": ReasonWrongOrigin,
			"https://evil.inbox.example.com": ReasonWrongOrigin,
		} {
			_, err := Verify(r, want, Proof{WebAuthn: alice.assert(t, ch, assertOpts{origin: origin, flags: ok})}, testNow)
			if wantReason == "" && err != nil || wantReason != "" && !isReason(err, wantReason) {
				t.Errorf("assertion made on %s: %v; want %q", origin, err, wantReason)
			}
		}
	}
	legacy := strings.Replace(strings.Replace(string(b), `"version":2`, `"version":1`, 1), `,"passkey_origin":"https://inbox.example.com"`, "", 1)
	var old Reviewers
	if err := json.Unmarshal([]byte(legacy), &old); err != nil {
		t.Fatalf("version 1 json %s: %v", legacy, err)
	}
	if _, err := Verify(&old, want, Proof{WebAuthn: alice.assert(t, ch, assertOpts{origin: "https://inbox.example.com:8443", flags: ok})}, testNow); err != nil {
		t.Errorf("version 1 record, another port: %v; want it accepted as it was when recorded", err)
	}
	if again, _ := json.Marshal(old); string(again) != legacy {
		t.Errorf("version 1 record marshals as %s; want %s", again, legacy)
	}
	for _, bad := range []string{"http://inbox.example.com", "https://192.0.2.1", "https://inbox.example.com/path", "ftp://localhost"} {
		if _, err := CanonicalOrigin(bad); err == nil {
			t.Errorf("CanonicalOrigin(%q): no error; want one", bad)
		}
	}
}
