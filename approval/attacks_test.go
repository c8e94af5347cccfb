package approval

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// assertRaw is a passkey assertion over client data written as given (a browser writes it; a
// hostile page or a cloned authenticator may write anything the passkey will sign).
func (p *softPasskey) assertRaw(t *testing.T, clientData string, counter uint32) *WebAuthnAssertion {
	t.Helper()
	rp := sha256.Sum256([]byte(p.rpID))
	auth := append(rp[:], webauthnFlagUP|webauthnFlagUV)
	auth = binary.BigEndian.AppendUint32(auth, counter)
	cdh := sha256.Sum256([]byte(clientData))
	h := sha256.Sum256(append(append([]byte(nil), auth...), cdh[:]...))
	sig, err := ecdsa.SignASN1(rand.Reader, p.key, h[:])
	if err != nil {
		t.Fatal(err)
	}
	e := base64.RawURLEncoding.EncodeToString
	return &WebAuthnAssertion{CredentialID: e([]byte("cred")), AuthenticatorData: e(auth), ClientDataJSON: e([]byte(clientData)), Signature: e(sig)}
}

// Attacks on the pinned passkey origin: every spelling of the inbox's origin a browser never
// writes, another origin of its host, and client data a browser writes for frames, are refused;
// only the browser's own serialization of the configured origin verifies.
func TestPasskeyOriginAttacks(t *testing.T) {
	alice := newSoftPasskey(t, "inbox.example.com")
	reviewers := pinned(t, mustReviewers(t, alice.line(t, "alice")), "https://inbox.example.com")
	f := testFields()
	f.Version = StatementVersion2
	f.Reviewer = "alice"
	stmt := mustStatement(t, f)
	ch := base64.RawURLEncoding.EncodeToString(WebAuthnChallenge(stmt))
	cd := func(extra string) string {
		return `{"type":"webauthn.get","challenge":"` + ch + `",` + extra + `}`
	}
	for _, tc := range []struct {
		name, clientData string
		want             Reason // "" to accept
	}{
		{"the inbox", cd(`"origin":"https://inbox.example.com","crossOrigin":false`), ""},
		{"trailing slash", cd(`"origin":"https://inbox.example.com/"`), ReasonWrongOrigin},
		{"upper-case host", cd(`"origin":"https://INBOX.example.com"`), ReasonWrongOrigin},
		{"default port", cd(`"origin":"https://inbox.example.com:443"`), ReasonWrongOrigin},
		{"userinfo", cd(`"origin":"https://mallory@inbox.example.com"`), ReasonWrongOrigin},
		{"null origin", cd(`"origin":"null"`), ReasonWrongOrigin},
		{"no origin", cd(`"crossOrigin":false`), ReasonWrongOrigin},
		{"IPv6 literal", cd(`"origin":"https://[::1]"`), ReasonWrongOrigin},
		{"trailing dot", cd(`"origin":"https://inbox.example.com."`), ReasonWrongOrigin},
		{"a query", cd(`"origin":"https://inbox.example.com?x"`), ReasonWrongOrigin},
		{"a cross-origin frame", cd(`"origin":"https://inbox.example.com","crossOrigin":true,"topOrigin":"https://evil.example"`), ReasonWrongOrigin},
		{"a registration", `{"type":"webauthn.create","challenge":"` + ch + `","origin":"https://inbox.example.com"}`, ReasonMalformed},
		{"crossOrigin as a string", cd(`"origin":"https://inbox.example.com","crossOrigin":"false"`), ReasonMalformed},
	} {
		_, err := Verify(reviewers, f, Proof{WebAuthn: alice.assertRaw(t, tc.clientData, 3), Statement: string(stmt)}, testNow)
		if tc.want == "" && err != nil || tc.want != "" && !isReason(err, tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
	}
	for _, bad := range []string{"null", "https://[::1]:8443", "https://[2001:db8::1]", "https://alice@inbox.example.com",
		"https://inbox.example.com/#x", "https://inbox.example.com?", "https://inbox.example.com/app", "http://localhost.evil.example",
		"ftp://inbox.example.com", "https://inbox.example.com:443/x"} {
		if got, err := CanonicalOrigin(bad); err == nil {
			t.Errorf("CanonicalOrigin(%q) = %q; want an error", bad, got)
		}
	}
	for in, want := range map[string]string{
		"https://inbox.example.com/":      "https://inbox.example.com",
		"https://INBOX.Example.COM:443":   "https://inbox.example.com",
		"HTTP://LOCALHOST:80/":            "http://localhost",
		"https://inbox.example.com:8443/": "https://inbox.example.com:8443",
	} {
		if got, err := CanonicalOrigin(in); err != nil || got != want {
			t.Errorf("CanonicalOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// The same assertion cannot decide both ways, nor another run: the challenge is the statement's
// hash, and the statement names the decision and the run.
func TestPasskeyAssertionBoundToDecisionAndRun(t *testing.T) {
	alice := newSoftPasskey(t, "localhost")
	reviewers := pinned(t, mustReviewers(t, alice.line(t, "alice")), inboxOrigin)
	f := testFields()
	f.Version, f.Reviewer = StatementVersion2, "alice"
	a := alice.assert(t, WebAuthnChallenge(mustStatement(t, f)), assertOpts{origin: inboxOrigin, flags: webauthnFlagUP | webauthnFlagUV})
	if _, err := Verify(reviewers, f, Proof{WebAuthn: a}, testNow); err != nil {
		t.Fatalf("approve: %v", err)
	}
	deny := f
	deny.Approve = false
	other := f
	other.RunID = "0b9c2f6e-1d2a-4c5e-9f00-1234567890ac"
	for name, w := range map[string]Fields{"the approval sent as a denial": deny, "another run's statement": other} {
		if _, err := Verify(reviewers, w, Proof{WebAuthn: a}, testNow); !isReason(err, ReasonBadSignature) {
			t.Errorf("%s: %v; want %s", name, err, ReasonBadSignature)
		}
	}
}

// A counter at 2^32-1 cannot wrap to accept 0 or 1 again; a counters file that is corrupt,
// empty, of another form, or not a file, refuses every passkey decision (fail closed) instead of
// starting again from nothing.
func TestCountersFailClosed(t *testing.T) {
	v := func(counter uint32, challenge string) Verified {
		return Verified{Method: MethodWebAuthn, Fingerprint: "SHA256:k", Counter: counter, Challenge: challenge}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "counters.json")
	c := NewCounters(path)
	if err := c.Advance(v(1<<32-1, "a")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []uint32{0, 1} {
		if err := c.Advance(v(n, "b")); !isReason(err, ReasonCounterReplayed) {
			t.Errorf("counter %d after 2^32-1: %v; want %s", n, err, ReasonCounterReplayed)
		}
	}
	for name, content := range map[string]string{
		"truncated":       `{"version":1,"passkeys":{"SHA256:k":{"coun`,
		"empty":           ``,
		"null":            `null`,
		"empty object":    `{}`,
		"no version":      `{"passkeys":{}}`,
		"version 2":       `{"version":2,"passkeys":{}}`,
		"an array":        `[]`,
		"counter as text": `{"version":1,"passkeys":{"SHA256:k":{"counter":"9"}}}`,
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		err := NewCounters(p).Advance(v(5, "c"))
		if err == nil {
			t.Errorf("counters file %s (%q): accepted; want it refused", name, content)
		}
		if b, _ := os.ReadFile(p); string(b) != content {
			t.Errorf("counters file %s: rewritten as %s; want it left for the operator", name, b)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "dir.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := NewCounters(filepath.Join(dir, "dir.json")).Advance(v(5, "c")); err == nil {
		t.Error("counters path is a folder: accepted; want it refused")
	}
}

// Statement expiry and key validity edges: the instant of expiry refuses; valid-before without Z
// is the verifier's local time (as ssh-keygen reads it), with Z UTC; nothing but digits and one
// trailing Z is a time.
func TestKeyTimeEdges(t *testing.T) {
	f := testFields()
	if err := (Verified{Expires: f.Expires}).StillValid(f.Expires); !isReason(err, ReasonExpired) {
		t.Errorf("at the expiry instant: %v; want %s", err, ReasonExpired)
	}
	if err := (Verified{Expires: f.Expires}).StillValid(f.Expires.Add(-time.Second)); err != nil {
		t.Errorf("a second before the expiry: %v", err)
	}
	for _, bad := range []string{"20261201+0100", "2026-12-01", "20261201T1000Z", "20261201zz", "202612011000ZZ", " 20261201", "20261301", "202612011060"} {
		if got, err := parseKeyTime(bad); err == nil {
			t.Errorf("parseKeyTime(%q) = %v; want an error", bad, got)
		}
	}
	if got, err := parseKeyTime("202612011000Z"); err != nil || !got.Equal(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("parseKeyTime Z = %v, %v", got, err)
	}
	// Without Z, the verifier's own zone, as ssh-keygen: a sandbox host in UTC reads a line
	// written for +01:00 an hour later (operators: write Z).
	local := time.Local
	time.Local = time.FixedZone("CET", 3600)
	got, err := parseKeyTime("202612011000")
	time.Local = local
	if err != nil || !got.Equal(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)) || got.Location() != time.UTC {
		t.Errorf("parseKeyTime without Z at +01:00 = %v, %v; want 09:00 UTC", got, err)
	}
	for _, stmt := range []string{"2026-11-30T11:00:00+01:00", "2026-11-30T11:00:00", "2026-11-30T11:00:00.5Z", "2026-11-30t11:00:00z"} {
		s := strings.Replace(string(mustStatement(t, f)), "expires: 2026-11-30T11:00:00Z", "expires: "+stmt, 1)
		if _, err := ParseStatement([]byte(s)); err == nil {
			t.Errorf("statement expiring %q parsed; want it refused", stmt)
		}
	}
}

// Principals match as OpenSSH matches them, code point by code point: a decision naming the
// signed principal in another case or Unicode normalization is refused, and so is a statement
// signing a look-alike of a listed name (NFD of josé, upper case, Cyrillic а); a line whose
// principals are patterns (*, alice,*) lets its key sign as any name they match, as OpenSSH's
// allowed_signers does, and the recorded reviewer is then the name signed, with the key's
// fingerprint.
func TestPrincipalVariants(t *testing.T) {
	key := newEd25519Signer(t)
	wild := newEd25519Signer(t)
	reviewers := mustReviewers(t, allowedLine("josé,alice", "", key.PublicKey()), allowedLine("ops,*", "", wild.PublicKey()))
	f := testFields()
	f.Version = StatementVersion2
	verify := func(signer int, signedAs, named string) (Verified, error) {
		g := f
		g.Reviewer = signedAs
		stmt := mustStatement(t, g)
		k := key
		if signer == 1 {
			k = wild
		}
		want := f
		want.Reviewer = ""
		return Verify(reviewers, want, Proof{Signature: mustSign(t, k, stmt), Statement: string(stmt), Reviewer: named}, testNow)
	}
	for _, p := range []string{"*", "al?ce", "!bob", "alice,bob", "alice "} {
		g := f
		g.Reviewer = p
		if _, err := g.Statement(); err == nil {
			t.Errorf("a statement signing reviewer %q was made; want it refused", p)
		}
	}
	nfd := "jose\u0301"
	for _, tc := range []struct {
		name              string
		signer            int
		signedAs, named   string
		want              Reason
		wantPrincipalSeen string
	}{
		{"as listed", 0, "josé", "josé", "", "josé"},
		{"named in NFD", 0, "josé", nfd, ReasonStatementMismatch, ""},
		{"named in upper case", 0, "alice", "Alice", ReasonStatementMismatch, ""},
		{"signed in NFD", 0, nfd, "", ReasonPrincipalMismatch, ""},
		{"signed in upper case", 0, "Alice", "", ReasonPrincipalMismatch, ""},
		{"signed as a Cyrillic look-alike", 0, "\u0430lice", "", ReasonPrincipalMismatch, ""},
		{"a wildcard line signs as another's name", 1, "alice", "", "", "alice"},
	} {
		v, err := verify(tc.signer, tc.signedAs, tc.named)
		if tc.want == "" && (err != nil || v.Principal != tc.wantPrincipalSeen) || tc.want != "" && !isReason(err, tc.want) {
			t.Errorf("%s: %+v, %v; want %q (principal %q)", tc.name, v, err, tc.want, tc.wantPrincipalSeen)
		}
	}
}
