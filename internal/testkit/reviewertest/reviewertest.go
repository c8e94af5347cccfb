// Package reviewertest makes throw-away reviewer keys for tests: an ed25519 key or a software
// stand-in for a FIDO security key, its allowed_signers file, and decisions signed with it.
// It is imported only by tests. It approves nothing by itself: its keys are new for every
// test, and a worker verifies only keys its operator listed in its reviewers file.
package reviewertest

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
)

// Reviewer is a test reviewer: a key and the principal it signs for.
type Reviewer struct {
	// Principal is the reviewer's name in the allowed_signers file.
	Principal string
	// Signer signs statements.
	Signer ssh.Signer
	// KeyFile is the private key in OpenSSH format (only for ed25519 reviewers), usable by
	// ssh-keygen -Y sign.
	KeyFile string
	// File is an allowed_signers file that lists this reviewer alone.
	File string
}

// New makes an ed25519 reviewer with its own key file and allowed_signers file in a temporary
// folder of t.
func New(t testing.TB, principal string) *Reviewer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	block, err := ssh.MarshalPrivateKey(priv, principal)
	if err != nil {
		t.Fatal(err)
	}
	r := &Reviewer{Principal: principal, Signer: signer, KeyFile: filepath.Join(dir, "id_ed25519")}
	if err := os.WriteFile(r.KeyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	r.File = WriteAllowedSigners(t, dir, r)
	return r
}

// NewSecurityKey makes a reviewer whose key is a software stand-in for an
// sk-ssh-ed25519@openssh.com security key that reports flags (0x01 is user presence) with its
// signatures.
func NewSecurityKey(t testing.TB, principal string, flags byte) *Reviewer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	r := &Reviewer{Principal: principal, Signer: &skSigner{key: priv, app: "ssh:", flags: flags, counter: 7}}
	r.File = WriteAllowedSigners(t, t.TempDir(), r)
	return r
}

// AllowedLine is the reviewer's allowed_signers line.
func (r *Reviewer) AllowedLine() string {
	return r.Principal + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(r.Signer.PublicKey())))
}

// WriteAllowedSigners writes an allowed_signers file listing reviewers into dir and returns its
// path.
func WriteAllowedSigners(t testing.TB, dir string, reviewers ...*Reviewer) string {
	t.Helper()
	var b strings.Builder
	for _, r := range reviewers {
		b.WriteString(r.AllowedLine() + "\n")
	}
	path := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Fields returns a statement for the run with a fresh approval id, expiring in an hour.
func Fields(workflowID, runID, digest, sandboxTaskQueue string, approve bool) approval.Fields {
	return approval.Fields{
		Version:    approval.StatementVersion,
		WorkflowID: workflowID, RunID: runID, Digest: digest, Approve: approve,
		ApprovalID: uuid.NewString(), SandboxTaskQueue: sandboxTaskQueue,
		Expires: time.Now().Add(time.Hour).UTC().Truncate(time.Second),
	}
}

// Decision signs f and returns the decision that carries it, as a reviewer's client sends it.
func (r *Reviewer) Decision(t testing.TB, f approval.Fields) contract.Decision {
	t.Helper()
	d, err := r.Sign(f)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Sign is Decision without a testing.TB. A version 2 statement without a reviewer is signed
// as the reviewer's first principal; the decision names the principal signed.
func (r *Reviewer) Sign(f approval.Fields) (contract.Decision, error) {
	if f.Version == approval.StatementVersion2 && f.Reviewer == "" {
		f.Reviewer, _, _ = strings.Cut(r.Principal, ",")
	}
	stmt, err := f.Statement()
	if err != nil {
		return contract.Decision{}, err
	}
	sig, err := approval.Sign(r.Signer, stmt)
	if err != nil {
		return contract.Decision{}, err
	}
	d := contract.Decision{
		ApprovalID: f.ApprovalID, Digest: f.Digest, Approve: f.Approve,
		Expires: f.Expires, Signature: sig, Statement: string(stmt),
	}
	if f.Version == approval.StatementVersion2 {
		d.Reviewer = f.Reviewer
	}
	return d, nil
}

// skSigner signs as a FIDO security key does (OpenSSH PROTOCOL.u2f): over
// SHA256(application) || flags || counter || SHA256(data), with flags and counter after the
// signature.
type skSigner struct {
	key     ed25519.PrivateKey
	app     string
	flags   byte
	counter uint32
}

type skPublicKey struct{ blob []byte }

func (k skPublicKey) Type() string    { return approval.KeyTypeSKEd25519 }
func (k skPublicKey) Marshal() []byte { return k.blob }
func (k skPublicKey) Verify([]byte, *ssh.Signature) error {
	return fmt.Errorf("reviewertest: verify with approval.Verify")
}

func (s *skSigner) PublicKey() ssh.PublicKey {
	var b []byte
	b = appendString(b, []byte(approval.KeyTypeSKEd25519))
	b = appendString(b, s.key.Public().(ed25519.PublicKey))
	b = appendString(b, []byte(s.app))
	return skPublicKey{blob: b}
}

func (s *skSigner) Sign(_ io.Reader, data []byte) (*ssh.Signature, error) {
	app := sha256.Sum256([]byte(s.app))
	msg := sha256.Sum256(data)
	tail := binary.BigEndian.AppendUint32([]byte{s.flags}, s.counter)
	signed := append(append(append([]byte{}, app[:]...), tail...), msg[:]...)
	return &ssh.Signature{Format: approval.KeyTypeSKEd25519, Blob: ed25519.Sign(s.key, signed), Rest: tail}, nil
}

func appendString(b, s []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// NewKey makes an ed25519 reviewer in memory, with no files; principals may list several
// names, comma-separated, as an allowed_signers line does.
func NewKey(principals string) (*Reviewer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("reviewertest: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, fmt.Errorf("reviewertest: %w", err)
	}
	return &Reviewer{Principal: principals, Signer: signer}, nil
}
