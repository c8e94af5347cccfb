package approval

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
)

// Key types a reviewer key may have. The sk- types are FIDO security keys (PROTOCOL.u2f).
const (
	KeyTypeEd25519     = "ssh-ed25519"
	KeyTypeSKEd25519   = "sk-ssh-ed25519@openssh.com"
	KeyTypeECDSAP256   = "ecdsa-sha2-nistp256"
	KeyTypeSKECDSAP256 = "sk-ecdsa-sha2-nistp256@openssh.com"
)

const (
	skFlagUserPresence  = 0x01 // SSH_SK_USER_PRESENCE_REQD
	skFlagUserVerified  = 0x04 // SSH_SK_USER_VERIFICATION_REQD
	nistp256CurveName   = "nistp256"
	maxApplicationBytes = 1024
)

// publicKey is a parsed reviewer key of one of the KeyType* types.
type publicKey struct {
	typ         string
	blob        []byte // the key's SSH wire encoding
	ed          ed25519.PublicKey
	ec          *ecdsa.PublicKey
	application string // sk- keys only
}

// parsePublicKey parses the SSH wire encoding of a public key of a supported type.
func parsePublicKey(blob []byte) (*publicKey, error) {
	r := &wireReader{b: blob}
	typ, err := r.string()
	if err != nil {
		return nil, fmt.Errorf("key type: %w", err)
	}
	k := &publicKey{typ: string(typ), blob: append([]byte(nil), blob...)}
	switch k.typ {
	case KeyTypeEd25519, KeyTypeSKEd25519:
		pk, err := r.string()
		if err != nil {
			return nil, fmt.Errorf("%s key: %w", k.typ, err)
		}
		if len(pk) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%s key: %d bytes; want %d", k.typ, len(pk), ed25519.PublicKeySize)
		}
		k.ed = ed25519.PublicKey(append([]byte(nil), pk...))
	case KeyTypeECDSAP256, KeyTypeSKECDSAP256:
		curve, err := r.string()
		if err != nil {
			return nil, fmt.Errorf("%s key: %w", k.typ, err)
		}
		if string(curve) != nistp256CurveName {
			return nil, fmt.Errorf("%s key: curve %q; want %q", k.typ, curve, nistp256CurveName)
		}
		q, err := r.string()
		if err != nil {
			return nil, fmt.Errorf("%s key: %w", k.typ, err)
		}
		ec, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), q)
		if err != nil {
			return nil, fmt.Errorf("%s key: %w", k.typ, err)
		}
		k.ec = ec
	default:
		return nil, fmt.Errorf("key type %q is not supported (use %s, %s, %s or %s)",
			printable(string(typ)), KeyTypeEd25519, KeyTypeSKEd25519, KeyTypeECDSAP256, KeyTypeSKECDSAP256)
	}
	if k.isSK() {
		app, err := r.string()
		if err != nil {
			return nil, fmt.Errorf("%s key application: %w", k.typ, err)
		}
		if len(app) > maxApplicationBytes {
			return nil, fmt.Errorf("%s key application: %d bytes", k.typ, len(app))
		}
		k.application = string(app)
	}
	if !r.empty() {
		return nil, fmt.Errorf("%s key: %d bytes after the key", k.typ, len(r.b))
	}
	return k, nil
}

func (k *publicKey) isSK() bool {
	return k.typ == KeyTypeSKEd25519 || k.typ == KeyTypeSKECDSAP256
}

// fingerprint is OpenSSH's SHA256 fingerprint ("SHA256:" and unpadded base64).
func (k *publicKey) fingerprint() string {
	sum := sha256.Sum256(k.blob)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// authorized is the key in authorized_keys form: "type base64".
func (k *publicKey) authorized() string {
	return k.typ + " " + base64.StdEncoding.EncodeToString(k.blob)
}

// skResult is what a security key reported with its signature.
type skResult struct {
	flags   byte
	counter uint32
}

var (
	errSigMalformed = errors.New("malformed signature")
	errSigInvalid   = errors.New("signature does not verify")
)

// verify checks sig, an SSH signature encoding (string format, string blob, and for sk- keys
// byte flags and uint32 counter), over data. It reports the sk- flags; it does not judge them.
func (k *publicKey) verify(data, sig []byte) (skResult, error) {
	var res skResult
	r := &wireReader{b: sig}
	format, err := r.string()
	if err != nil {
		return res, fmt.Errorf("%w: format: %v", errSigMalformed, err)
	}
	if string(format) != k.typ {
		return res, fmt.Errorf("%w: signature type %q for key type %q", errSigMalformed, printable(string(format)), k.typ)
	}
	blob, err := r.string()
	if err != nil {
		return res, fmt.Errorf("%w: %v", errSigMalformed, err)
	}
	signed := data
	if k.isSK() {
		if res.flags, err = r.byte(); err != nil {
			return res, fmt.Errorf("%w: flags: %v", errSigMalformed, err)
		}
		if res.counter, err = r.uint32(); err != nil {
			return res, fmt.Errorf("%w: counter: %v", errSigMalformed, err)
		}
		signed = skSignedData(k.application, res.flags, res.counter, data)
	}
	if !r.empty() {
		return res, fmt.Errorf("%w: %d bytes after the signature", errSigMalformed, len(r.b))
	}
	switch k.typ {
	case KeyTypeEd25519, KeyTypeSKEd25519:
		if len(blob) != ed25519.SignatureSize {
			return res, fmt.Errorf("%w: ed25519 signature of %d bytes", errSigMalformed, len(blob))
		}
		if !ed25519.Verify(k.ed, signed, blob) {
			return res, errSigInvalid
		}
	case KeyTypeECDSAP256, KeyTypeSKECDSAP256:
		br := &wireReader{b: blob}
		rr, err1 := br.mpint()
		ss, err2 := br.mpint()
		if err := errors.Join(err1, err2); err != nil || !br.empty() {
			return res, fmt.Errorf("%w: ecdsa r and s", errSigMalformed)
		}
		h := sha256.Sum256(signed)
		if !ecdsa.Verify(k.ec, h[:], rr, ss) {
			return res, errSigInvalid
		}
	}
	return res, nil
}

// skSignedData is what a security key signs (PROTOCOL.u2f, "SSH U2F signatures"):
// SHA256(application) || flags || uint32 counter || SHA256(message). No extensions are defined.
func skSignedData(application string, flags byte, counter uint32, message []byte) []byte {
	app := sha256.Sum256([]byte(application))
	msg := sha256.Sum256(message)
	w := &wireWriter{}
	w.raw(app[:])
	w.byte(flags)
	w.uint32(counter)
	w.raw(msg[:])
	return w.b
}
