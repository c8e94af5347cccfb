package approval

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
)

// SSHSIG framing (PROTOCOL.sshsig).
const (
	sshsigMagic     = "SSHSIG"
	sshsigVersion   = 1
	armorBegin      = "-----BEGIN SSH SIGNATURE-----"
	armorEnd        = "-----END SSH SIGNATURE-----"
	armorLineLength = 70
	maxArmoredBytes = 64 << 10

	// HashSHA512 and HashSHA256 are the SSHSIG hash algorithms; signing uses HashSHA512.
	HashSHA512 = "sha512"
	HashSHA256 = "sha256"
)

// SSHSignature is a parsed SSHSIG signature (PROTOCOL.sshsig).
type SSHSignature struct {
	// PublicKey is the signer's key in SSH wire encoding.
	PublicKey []byte
	// Namespace is the signature's namespace; approvals use Namespace.
	Namespace string
	// HashAlgorithm is HashSHA512 or HashSHA256.
	HashAlgorithm string
	// Signature is the SSH signature encoding (format, blob, and flags and counter for sk- keys).
	Signature []byte
}

// ParseSSHSignature parses an armored SSHSIG ("-----BEGIN SSH SIGNATURE-----" ...), as
// ssh-keygen -Y sign writes it. Space around the armor and CRLF line ends are accepted.
func ParseSSHSignature(armored string) (*SSHSignature, error) {
	if len(armored) > maxArmoredBytes {
		return nil, fmt.Errorf("approval: ssh signature: longer than %d bytes", maxArmoredBytes)
	}
	s := strings.TrimSpace(strings.ReplaceAll(armored, "\r\n", "\n"))
	body, ok := strings.CutPrefix(s, armorBegin+"\n")
	if !ok {
		return nil, fmt.Errorf("approval: ssh signature: does not start with %s", armorBegin)
	}
	body, ok = strings.CutSuffix(body, "\n"+armorEnd)
	if !ok {
		return nil, fmt.Errorf("approval: ssh signature: does not end with %s", armorEnd)
	}
	var b64 strings.Builder
	for _, line := range strings.Split(body, "\n") {
		b64.WriteString(strings.TrimSpace(line))
	}
	blob, err := base64.StdEncoding.DecodeString(b64.String())
	if err != nil {
		return nil, fmt.Errorf("approval: ssh signature: base64: %w", err)
	}
	return parseSSHSigBlob(blob)
}

func parseSSHSigBlob(blob []byte) (*SSHSignature, error) {
	r := &wireReader{b: blob}
	magic, err := r.fixed(len(sshsigMagic))
	if err != nil || string(magic) != sshsigMagic {
		return nil, errors.New("approval: ssh signature: no SSHSIG preamble")
	}
	v, err := r.uint32()
	if err != nil {
		return nil, fmt.Errorf("approval: ssh signature: version: %w", err)
	}
	if v != sshsigVersion {
		return nil, fmt.Errorf("approval: ssh signature: version %d; want %d", v, sshsigVersion)
	}
	var fields [5][]byte
	for i, name := range []string{"publickey", "namespace", "reserved", "hash_algorithm", "signature"} {
		if fields[i], err = r.string(); err != nil {
			return nil, fmt.Errorf("approval: ssh signature: %s: %w", name, err)
		}
	}
	if !r.empty() {
		return nil, fmt.Errorf("approval: ssh signature: %d bytes after the signature", len(r.b))
	}
	sig := &SSHSignature{
		PublicKey:     fields[0],
		Namespace:     string(fields[1]),
		HashAlgorithm: string(fields[3]),
		Signature:     fields[4],
	}
	if sig.Namespace == "" {
		return nil, errors.New("approval: ssh signature: empty namespace")
	}
	if sig.HashAlgorithm != HashSHA512 && sig.HashAlgorithm != HashSHA256 {
		return nil, fmt.Errorf("approval: ssh signature: hash algorithm %q; want %s or %s", printable(sig.HashAlgorithm), HashSHA512, HashSHA256)
	}
	return sig, nil
}

// Marshal returns the armored form, with base64 lines of 70 characters as ssh-keygen writes.
func (s *SSHSignature) Marshal() string {
	w := &wireWriter{}
	w.raw([]byte(sshsigMagic))
	w.uint32(sshsigVersion)
	w.string(s.PublicKey)
	w.string([]byte(s.Namespace))
	w.string(nil)
	w.string([]byte(s.HashAlgorithm))
	w.string(s.Signature)
	enc := base64.StdEncoding.EncodeToString(w.b)
	var b strings.Builder
	b.WriteString(armorBegin + "\n")
	for len(enc) > armorLineLength {
		b.WriteString(enc[:armorLineLength] + "\n")
		enc = enc[armorLineLength:]
	}
	b.WriteString(enc + "\n" + armorEnd + "\n")
	return b.String()
}

// signedData is the SSHSIG "signed data" blob: magic, namespace, reserved, hash algorithm,
// H(message).
func signedData(namespace, hashAlg string, message []byte) ([]byte, error) {
	var h []byte
	switch hashAlg {
	case HashSHA512:
		sum := sha512.Sum512(message)
		h = sum[:]
	case HashSHA256:
		sum := sha256.Sum256(message)
		h = sum[:]
	default:
		return nil, fmt.Errorf("hash algorithm %q is not supported", printable(hashAlg))
	}
	w := &wireWriter{}
	w.raw([]byte(sshsigMagic))
	w.string([]byte(namespace))
	w.string(nil)
	w.string([]byte(hashAlg))
	w.string(h)
	return w.b, nil
}

// Sign signs statement with signer in Namespace with sha512 and returns the armored SSHSIG, the
// same as ssh-keygen -Y sign -n sandboxflow-approval. The signer's key must be one of the
// KeyType* types (an ssh-agent signer for a security key works too).
func Sign(signer ssh.Signer, statement []byte) (string, error) {
	return SignNamespace(signer, Namespace, statement)
}

// SignNamespace is Sign with another namespace; it exists for tools and tests.
func SignNamespace(signer ssh.Signer, namespace string, message []byte) (string, error) {
	if namespace == "" {
		return "", errors.New("approval: sign: empty namespace")
	}
	pub := signer.PublicKey()
	if _, err := parsePublicKey(pub.Marshal()); err != nil {
		return "", fmt.Errorf("approval: sign: %w", err)
	}
	data, err := signedData(namespace, HashSHA512, message)
	if err != nil {
		return "", fmt.Errorf("approval: sign: %w", err)
	}
	sig, err := signer.Sign(rand.Reader, data)
	if err != nil {
		return "", fmt.Errorf("approval: sign: %w", err)
	}
	w := &wireWriter{}
	w.string([]byte(sig.Format))
	w.string(sig.Blob)
	w.raw(sig.Rest)
	s := &SSHSignature{
		PublicKey:     pub.Marshal(),
		Namespace:     namespace,
		HashAlgorithm: HashSHA512,
		Signature:     w.b,
	}
	return s.Marshal(), nil
}

// SignerKey is the key that made a signature VerifyNamespace accepted.
type SignerKey struct {
	// KeyType is the key's type (KeyTypeEd25519 or KeyTypeECDSAP256).
	KeyType string `json:"key_type"`
	// PublicKey is the key in authorized_keys form: "type base64".
	PublicKey string `json:"public_key"`
	// Fingerprint is OpenSSH's SHA256 fingerprint.
	Fingerprint string `json:"fingerprint"`
}

// VerifyNamespace checks that armored is an SSHSIG in namespace over message, made by a plain
// ed25519 or ecdsa-p256 key (security keys are refused: what signs this way signs unattended), and
// returns the key. It consults no list of keys: the caller decides whether it trusts the key (a
// sandbox host's receipt is checked against the hosts file). A refusal is a *RefusalError:
// ReasonMalformed, ReasonUnsupported, ReasonWrongNamespace (a signature made for another
// namespace, such as a reviewer's approval presented as a receipt) or ReasonBadSignature.
func VerifyNamespace(armored, namespace string, message []byte) (SignerKey, error) {
	sig, err := ParseSSHSignature(armored)
	if err != nil {
		return SignerKey{}, &RefusalError{Reason: ReasonMalformed, Detail: strings.TrimPrefix(err.Error(), "approval: ")}
	}
	if sig.Namespace != namespace {
		return SignerKey{}, refuse(ReasonWrongNamespace, "signature namespace %q; want %q", printable(sig.Namespace), namespace)
	}
	pub, err := parsePublicKey(sig.PublicKey)
	if err != nil {
		return SignerKey{}, refuse(ReasonUnsupported, "signing key: %v", err)
	}
	if pub.isSK() {
		return SignerKey{}, refuse(ReasonUnsupported, "signing key %s is a security key; namespace %s takes plain keys only", pub.fingerprint(), namespace)
	}
	data, err := signedData(sig.Namespace, sig.HashAlgorithm, message)
	if err != nil {
		return SignerKey{}, refuse(ReasonUnsupported, "%v", err)
	}
	switch _, err := pub.verify(data, sig.Signature); {
	case errors.Is(err, errSigInvalid):
		return SignerKey{}, refuse(ReasonBadSignature, "the signature by %s does not verify over the message", pub.fingerprint())
	case err != nil:
		return SignerKey{}, refuse(ReasonMalformed, "signature by %s: %v", pub.fingerprint(), err)
	}
	return SignerKey{KeyType: pub.typ, PublicKey: pub.authorized(), Fingerprint: pub.fingerprint()}, nil
}

// AllowsNamespace reports whether the key's namespaces= option (none: any) lets it sign in
// namespace.
func (k Key) AllowsNamespace(namespace string) bool {
	return k.Namespaces == "" || matchPatternList(namespace, k.Namespaces)
}
