package reviewertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
)

// Passkey is a software passkey: it makes WebAuthn assertions as a browser and an authenticator
// would (user presence and verification set), on whatever origin and with whatever signature
// counter a test says, as an attacker's page or a cloned authenticator could.
type Passkey struct {
	Principal string
	RPID      string
	key       *ecdsa.PrivateKey
}

// NewPasskey makes a passkey of the relying party rpID for principal.
func NewPasskey(t testing.TB, principal, rpID string) *Passkey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &Passkey{Principal: principal, RPID: rpID, key: k}
}

// AllowedLine is the passkey's reviewers-file line.
func (p *Passkey) AllowedLine(t testing.TB) string {
	t.Helper()
	pub, err := approval.PasskeyAuthorizedKey(&p.key.PublicKey, p.RPID)
	if err != nil {
		t.Fatal(err)
	}
	return p.Principal + " " + pub + " passkey"
}

// Assert makes an assertion over challenge, made on a page of origin, reporting counter.
func (p *Passkey) Assert(t testing.TB, challenge []byte, origin string, counter uint32) *approval.WebAuthnAssertion {
	t.Helper()
	rp := sha256.Sum256([]byte(p.RPID))
	auth := append(rp[:], 0x01|0x04) // user present, user verified
	auth = binary.BigEndian.AppendUint32(auth, counter)
	cd, err := json.Marshal(map[string]any{"type": "webauthn.get", "challenge": base64.RawURLEncoding.EncodeToString(challenge), "origin": origin, "crossOrigin": false})
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
	return &approval.WebAuthnAssertion{CredentialID: e([]byte(p.Principal)), AuthenticatorData: e(auth), ClientDataJSON: e(cd), Signature: e(sig)}
}

// Decision is the decision that carries an assertion over f's statement, made on origin with
// counter.
func (p *Passkey) Decision(t testing.TB, f approval.Fields, origin string, counter uint32) contract.Decision {
	t.Helper()
	if f.Version == approval.StatementVersion2 && f.Reviewer == "" {
		f.Reviewer = p.Principal
	}
	stmt, err := f.Statement()
	if err != nil {
		t.Fatal(err)
	}
	return contract.Decision{
		ApprovalID: f.ApprovalID, Digest: f.Digest, Approve: f.Approve, Expires: f.Expires, Reviewer: f.Reviewer,
		WebAuthn: p.Assert(t, approval.WebAuthnChallenge(stmt), origin, counter), Statement: string(stmt),
	}
}
