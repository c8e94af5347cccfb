package approval

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// More reasons, for passkey (WebAuthn) decisions.
const (
	// ReasonNoUserVerification: a passkey signed without the user-verification flag (no PIN or
	// biometric).
	ReasonNoUserVerification Reason = "no_user_verification"
	// ReasonWrongOrigin: the passkey assertion was made on a page whose origin does not belong
	// to the key's relying party id.
	ReasonWrongOrigin Reason = "wrong_origin"
)

// WebAuthn authenticator data flags (WebAuthn §6.1).
const (
	webauthnFlagUP = 0x01
	webauthnFlagUV = 0x04
	webauthnFlagAT = 0x40
	webauthnFlagED = 0x80
)

const (
	webauthnTypeGet = "webauthn.get"
	// maxAssertionFieldBytes bounds each decoded assertion field.
	maxAssertionFieldBytes = 16 << 10
)

// A passkey is listed in the reviewers file as a key of type KeyTypeSKECDSAP256 whose
// application is the WebAuthn relying party id (a host name such as "inbox.example.com", or
// "localhost"); PasskeyAuthorizedKey writes it:
//
//	alice sk-ecdsa-sha2-nistp256@openssh.com AAAAInNrLWVjZHNh... passkey
//
// Its assertions verify when the authenticator data's rpIdHash is SHA-256 of that id and the
// client data's origin is https://<id>[:port] (http:// only for "localhost"). OpenSSH's own
// security keys use applications starting with "ssh:", which no web origin has, so one key kind
// cannot stand in for the other.

// WebAuthnChallenge returns the challenge a passkey signs for a decision: SHA-256 of the
// statement bytes.
func WebAuthnChallenge(statement []byte) []byte {
	sum := sha256.Sum256(statement)
	return sum[:]
}

// PasskeyAuthorizedKey returns a passkey's public key in authorized_keys form ("type base64"), as
// a line of the reviewers file needs it: an sk-ecdsa-sha2-nistp256@openssh.com key whose
// application is rpID. The key must be on P-256.
func PasskeyAuthorizedKey(pub *ecdsa.PublicKey, rpID string) (string, error) {
	if pub == nil || pub.Curve != elliptic.P256() {
		return "", errors.New("approval: passkey: want an ECDSA P-256 (ES256) key")
	}
	if rpID == "" || strings.HasPrefix(rpID, "ssh:") || strings.ContainsAny(rpID, " /:") {
		return "", fmt.Errorf("approval: passkey: relying party id %q: want a host name", printable(rpID))
	}
	q, err := pub.Bytes()
	if err != nil {
		return "", fmt.Errorf("approval: passkey: %w", err)
	}
	w := &wireWriter{}
	w.string([]byte(KeyTypeSKECDSAP256))
	w.string([]byte(nistp256CurveName))
	w.string(q)
	w.string([]byte(rpID))
	k, err := parsePublicKey(w.b)
	if err != nil {
		return "", fmt.Errorf("approval: passkey: %w", err)
	}
	return k.authorized(), nil
}

// assertion is a decoded WebAuthnAssertion.
type assertion struct {
	credentialID []byte
	authData     []byte
	clientData   []byte
	signature    []byte
	rpIDHash     []byte
	flags        byte
	counter      uint32
	client       clientData
}

// clientData is the part of CollectedClientData (WebAuthn §5.8.1) that is checked.
type clientData struct {
	Type        string `json:"type"`
	Challenge   string `json:"challenge"`
	Origin      string `json:"origin"`
	CrossOrigin bool   `json:"crossOrigin"`
}

func decodeAssertion(a *WebAuthnAssertion) (*assertion, error) {
	var p assertion
	for _, f := range []struct {
		name string
		in   string
		out  *[]byte
	}{
		{"credential_id", a.CredentialID, &p.credentialID},
		{"authenticator_data", a.AuthenticatorData, &p.authData},
		{"client_data_json", a.ClientDataJSON, &p.clientData},
		{"signature", a.Signature, &p.signature},
	} {
		if f.in == "" {
			return nil, fmt.Errorf("webauthn: %s is missing", f.name)
		}
		if len(f.in) > maxAssertionFieldBytes*4/3+4 {
			return nil, fmt.Errorf("webauthn: %s is too long", f.name)
		}
		b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(f.in, "="))
		if err != nil {
			return nil, fmt.Errorf("webauthn: %s: want base64url: %w", f.name, err)
		}
		*f.out = b
	}
	// rpIdHash (32) || flags (1) || signCount (4) [|| extensions]; an assertion carries no
	// attested credential data.
	if len(p.authData) < 37 {
		return nil, fmt.Errorf("webauthn: authenticator data of %d bytes; want at least 37", len(p.authData))
	}
	p.rpIDHash, p.flags = p.authData[:32], p.authData[32]
	p.counter = binary.BigEndian.Uint32(p.authData[33:37])
	if p.flags&webauthnFlagAT != 0 {
		return nil, errors.New("webauthn: authenticator data of an assertion carries attested credential data")
	}
	if len(p.authData) > 37 && p.flags&webauthnFlagED == 0 {
		return nil, fmt.Errorf("webauthn: %d bytes after the authenticator data without the extensions flag", len(p.authData)-37)
	}
	if err := json.Unmarshal(p.clientData, &p.client); err != nil {
		return nil, fmt.Errorf("webauthn: client data: %w", err)
	}
	return &p, nil
}

// verifyPasskey checks that p is signed by k, a passkey of the reviewers file, and returns
// errSigInvalid when it is not. It checks only the key, the relying party and the signature.
func (k *publicKey) verifyPasskey(p *assertion) error {
	if k.typ != KeyTypeSKECDSAP256 || k.ec == nil || strings.HasPrefix(k.application, "ssh:") {
		return errSigInvalid
	}
	app := sha256.Sum256([]byte(k.application))
	if !bytes.Equal(app[:], p.rpIDHash) {
		return errSigInvalid
	}
	cd := sha256.Sum256(p.clientData)
	signed := sha256.Sum256(append(append([]byte(nil), p.authData...), cd[:]...))
	if !ecdsa.VerifyASN1(k.ec, signed[:], p.signature) {
		return errSigInvalid
	}
	return nil
}

// originOf checks that origin belongs to the relying party rpID: https://rpID[:port], or
// http://localhost[:port] when rpID is "localhost" (browsers treat it as a secure context).
func originOf(origin, rpID string) error {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("origin %q is not an origin", printable(origin))
	}
	if u.Hostname() != rpID {
		return fmt.Errorf("origin %q is not on the relying party %q", printable(origin), rpID)
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && rpID == "localhost") {
		return fmt.Errorf("origin %q: want https", printable(origin))
	}
	return nil
}

// assertionOrigin is the origin a decision's passkey assertion must come from: the pinned one,
// or "" (any origin of the relying party) for a version 1 record. With neither, passkey decisions
// are refused.
func (r *Reviewers) assertionOrigin() (string, error) {
	switch {
	case r != nil && r.anyOrigin:
		return "", nil
	case r == nil || r.passkeyOrigin == "":
		return "", refuse(ReasonWrongOrigin, "no passkey origin is configured, so passkey decisions are refused: give the workers the inbox's origin (worker --passkey-origin)")
	}
	return r.passkeyOrigin, nil
}

// verifyAssertion finds the reviewers' passkey that signed a, then checks the client data
// (type webauthn.get, the challenge, the origin: exactly origin when it is not empty, else
// exactly the reviewers' passkey origin, or any origin of the key's relying party for a version
// 1 record), user presence and user verification. It returns the key's
// lines in the reviewers file.
func verifyAssertion(reviewers *Reviewers, a *WebAuthnAssertion, challenge []byte, origin string) (*publicKey, []Key, *assertion, error) {
	p, err := decodeAssertion(a)
	if err != nil {
		return nil, nil, nil, refuse(ReasonMalformed, "%v", err)
	}
	var (
		pub     *publicKey
		entries []Key
	)
	if reviewers != nil {
		for _, k := range reviewers.keys {
			if k.pub == nil || (pub != nil && !bytes.Equal(k.pub.blob, pub.blob)) {
				continue
			}
			if pub != nil || k.pub.verifyPasskey(p) == nil {
				pub = k.pub
				entries = append(entries, k)
			}
		}
	}
	if pub == nil {
		return nil, nil, nil, refuse(ReasonUnknownKey, "the passkey %s is not in the reviewers file for this relying party, or its signature does not verify",
			base64.RawURLEncoding.EncodeToString(p.credentialID))
	}
	if p.client.Type != webauthnTypeGet {
		return nil, nil, nil, refuse(ReasonMalformed, "client data type %q; want %q", printable(p.client.Type), webauthnTypeGet)
	}
	if p.client.Challenge != base64.RawURLEncoding.EncodeToString(challenge) {
		return nil, nil, nil, refuse(ReasonBadSignature, "the passkey %s signed another challenge than this decision's", pub.fingerprint())
	}
	if p.client.CrossOrigin {
		return nil, nil, nil, refuse(ReasonWrongOrigin, "the passkey was used from a cross-origin frame")
	}
	if err := originOf(p.client.Origin, pub.application); err != nil {
		return nil, nil, nil, refuse(ReasonWrongOrigin, "%v", err)
	}
	if origin == "" {
		if origin, err = reviewers.assertionOrigin(); err != nil {
			return nil, nil, nil, err
		}
	}
	if origin != "" && p.client.Origin != origin {
		return nil, nil, nil, refuse(ReasonWrongOrigin, "the passkey was used on %q; passkey decisions come from the inbox at %q only", printable(p.client.Origin), origin)
	}
	if p.flags&webauthnFlagUP == 0 {
		return nil, nil, nil, refuse(ReasonNoUserPresence, "passkey %s signed without user presence (flags 0x%02x)", pub.fingerprint(), p.flags)
	}
	if p.flags&webauthnFlagUV == 0 {
		return nil, nil, nil, refuse(ReasonNoUserVerification, "passkey %s signed without user verification (flags 0x%02x); use a PIN or biometric", pub.fingerprint(), p.flags)
	}
	return pub, entries, p, nil
}

// VerifyPasskeyLogin checks a passkey assertion made to sign in to the reviewers' inbox: the
// challenge is the server's, the origin must be exactly origin, user presence and user
// verification are required, and the passkey must be in reviewers. It returns the key's first
// principal that is not a pattern. The result's Expires is zero.
func VerifyPasskeyLogin(reviewers *Reviewers, a *WebAuthnAssertion, challenge []byte, origin string, now time.Time) (Verified, error) {
	if a == nil {
		return Verified{}, refuse(ReasonUnsigned, "no passkey assertion")
	}
	if origin == "" {
		return Verified{}, errors.New("approval: VerifyPasskeyLogin needs the expected origin")
	}
	pub, entries, p, err := verifyAssertion(reviewers, a, challenge, origin)
	if err != nil {
		return Verified{}, err
	}
	var first error
	for _, k := range entries {
		principal, err := acceptEntry(k, "", now)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		return passkeyVerified(principal, pub, p), nil
	}
	return Verified{}, first
}

func passkeyVerified(principal string, pub *publicKey, p *assertion) Verified {
	return Verified{
		Principal:    principal,
		Fingerprint:  pub.fingerprint(),
		KeyType:      pub.typ,
		Method:       MethodWebAuthn,
		Touched:      true,
		UserVerified: true,
		Counter:      p.counter,
		Challenge:    p.client.Challenge,
	}
}
