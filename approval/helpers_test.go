package approval

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

var (
	testNow     = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	testExpires = testNow.Add(time.Hour)
)

func testFields() Fields {
	return Fields{
		Version:          StatementVersion1,
		WorkflowID:       "runcode-7f3a",
		RunID:            "0b9c2f6e-1d2a-4c5e-9f00-1234567890ab",
		Digest:           "sha256:" + strings.Repeat("ab", 32),
		Approve:          true,
		ApprovalID:       "5f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0",
		SandboxTaskQueue: "sandbox",
		Expires:          testExpires,
	}
}

func mustStatement(t testing.TB, f Fields) []byte {
	t.Helper()
	b, err := f.Statement()
	if err != nil {
		t.Fatalf("Statement: %v", err)
	}
	return b
}

func newEd25519Signer(t testing.TB) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newECDSASigner(t testing.TB) ssh.Signer {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// allowedLine returns an allowed_signers line for principals, options and the signer's key.
func allowedLine(principals, options string, pub ssh.PublicKey) string {
	key := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	if options != "" {
		return principals + " " + options + " " + key
	}
	return principals + " " + key
}

func mustReviewers(t testing.TB, lines ...string) *Reviewers {
	t.Helper()
	r, err := ParseAllowedSigners([]byte(strings.Join(lines, "\n") + "\n"))
	if err != nil {
		t.Fatalf("ParseAllowedSigners: %v", err)
	}
	return r
}

func mustSign(t testing.TB, s ssh.Signer, msg []byte) string {
	t.Helper()
	sig, err := Sign(s, msg)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return sig
}

// skSigner is a software stand-in for a FIDO security key: it signs what a security key signs
// (PROTOCOL.u2f) with chosen flags and counter. Its format is checked against ssh-keygen in
// TestSSHKeygenVerifiesSecurityKeySignatures.
type skSigner struct {
	typ     string
	app     string
	ed      ed25519.PrivateKey
	ec      *ecdsa.PrivateKey
	flags   byte
	counter uint32
}

func newSKSigner(t testing.TB, typ string, flags byte) *skSigner {
	t.Helper()
	s := &skSigner{typ: typ, app: "ssh:", flags: flags, counter: 42}
	var err error
	switch typ {
	case KeyTypeSKEd25519:
		_, s.ed, err = ed25519.GenerateKey(rand.Reader)
	case KeyTypeSKECDSAP256:
		s.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		err = fmt.Errorf("type %s", typ)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type rawPublicKey struct {
	typ  string
	blob []byte
}

func (k rawPublicKey) Type() string    { return k.typ }
func (k rawPublicKey) Marshal() []byte { return k.blob }
func (k rawPublicKey) Verify([]byte, *ssh.Signature) error {
	return fmt.Errorf("not implemented")
}

func (s *skSigner) PublicKey() ssh.PublicKey {
	w := &wireWriter{}
	w.string([]byte(s.typ))
	if s.ed != nil {
		w.string(s.ed.Public().(ed25519.PublicKey))
	} else {
		w.string([]byte(nistp256CurveName))
		q, err := s.ec.PublicKey.Bytes()
		if err != nil {
			panic(err)
		}
		w.string(q)
	}
	w.string([]byte(s.app))
	return rawPublicKey{typ: s.typ, blob: w.b}
}

func (s *skSigner) Sign(rnd io.Reader, data []byte) (*ssh.Signature, error) {
	app := sha256.Sum256([]byte(s.app))
	msg := sha256.Sum256(data)
	signed := append(append([]byte{}, app[:]...), s.flags, byte(s.counter>>24), byte(s.counter>>16), byte(s.counter>>8), byte(s.counter))
	signed = append(signed, msg[:]...)
	rest := []byte{s.flags, byte(s.counter >> 24), byte(s.counter >> 16), byte(s.counter >> 8), byte(s.counter)}
	if s.ed != nil {
		return &ssh.Signature{Format: s.typ, Blob: ed25519.Sign(s.ed, signed), Rest: rest}, nil
	}
	h := sha256.Sum256(signed)
	r, ss, err := ecdsa.Sign(rnd, s.ec, h[:])
	if err != nil {
		return nil, err
	}
	w := &wireWriter{}
	w.mpint(r)
	w.mpint(ss)
	return &ssh.Signature{Format: s.typ, Blob: w.b, Rest: rest}, nil
}

func isReason(err error, r Reason) bool {
	var ref *RefusalError
	return errors.As(err, &ref) && ref.Reason == r
}

func errorsAsPassphrase(err error) (*ssh.PassphraseMissingError, bool) {
	var p *ssh.PassphraseMissingError
	ok := errors.As(err, &p)
	return p, ok
}
