package approval

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// sshKeygen returns the path of Debian's ssh-keygen (openssh-client); need.SSHKeygen decides
// whether its absence skips the test or fails it.
func sshKeygen(t *testing.T) string {
	t.Helper()
	need.Need(t, need.SSHKeygen)
	p, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func runKeygen(t *testing.T, stdin []byte, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(sshKeygen(t), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// keygenVerify runs ssh-keygen -Y verify of sig over msg for principal.
func keygenVerify(t *testing.T, allowed, principal, namespace, sig string, msg []byte) (string, error) {
	t.Helper()
	dir := t.TempDir()
	a := writeFile(t, dir, "allowed_signers", allowed)
	s := writeFile(t, dir, "msg.sig", sig)
	return runKeygen(t, msg, "-Y", "verify", "-n", namespace, "-f", a, "-I", principal, "-s", s)
}

func TestSSHKeygenVerifiesOurSignatures(t *testing.T) {
	stmt := mustStatement(t, testFields())
	for _, s := range []ssh.Signer{newEd25519Signer(t), newECDSASigner(t)} {
		line := allowedLine("alice@example.com", `namespaces="sandboxflow-approval"`, s.PublicKey()) + "\n"
		sig := mustSign(t, s, stmt)
		out, err := keygenVerify(t, line, "alice@example.com", Namespace, sig, stmt)
		if err != nil || !strings.Contains(out, `Good "sandboxflow-approval" signature for alice@example.com`) {
			t.Errorf("%s: ssh-keygen -Y verify: %v: %s", s.PublicKey().Type(), err, out)
		}
		// And ssh-keygen refuses it over another statement: the check above means something.
		other := testFields()
		other.RunID = "another-run"
		if out, err := keygenVerify(t, line, "alice@example.com", Namespace, sig, mustStatement(t, other)); err == nil {
			t.Errorf("%s: ssh-keygen accepted our signature over another statement: %s", s.PublicKey().Type(), out)
		}
	}
}

// TestSSHKeygenVerifiesSecurityKeySignatures checks our reading of PROTOCOL.u2f: ssh-keygen
// accepts the software security-key signatures the refusal tests use.
func TestSSHKeygenVerifiesSecurityKeySignatures(t *testing.T) {
	stmt := mustStatement(t, testFields())
	for _, typ := range []string{KeyTypeSKEd25519, KeyTypeSKECDSAP256} {
		s := newSKSigner(t, typ, skFlagUserPresence)
		line := allowedLine("carol", "", s.PublicKey()) + "\n"
		sig := mustSign(t, s, stmt)
		out, err := keygenVerify(t, line, "carol", Namespace, sig, stmt)
		if err != nil || !strings.Contains(out, "Good") {
			t.Errorf("%s: ssh-keygen -Y verify: %v: %s", typ, err, out)
		}
		r := mustReviewers(t, line)
		v, err := Verify(r, testFields(), Proof{Signature: sig}, testNow)
		if err != nil || !v.Touched {
			t.Errorf("%s: Verify: got %+v, %v; want touched", typ, v, err)
		}
	}
}

func TestOurVerifyAcceptsSSHKeygenSignatures(t *testing.T) {
	sshKeygen(t)
	tests := []struct {
		keyType string
		args    []string
	}{
		{KeyTypeEd25519, []string{"-t", "ed25519"}},
		{KeyTypeECDSAP256, []string{"-t", "ecdsa", "-b", "256"}},
	}
	f := testFields()
	stmt := mustStatement(t, f)
	for _, tt := range tests {
		dir := t.TempDir()
		key := filepath.Join(dir, "id")
		if out, err := runKeygen(t, nil, append(tt.args, "-q", "-N", "", "-C", "alice", "-f", key)...); err != nil {
			t.Fatalf("ssh-keygen keygen: %v: %s", err, out)
		}
		st := writeFile(t, dir, "st", string(stmt))
		if out, err := runKeygen(t, nil, "-Y", "sign", "-n", Namespace, "-f", key, st); err != nil {
			t.Fatalf("ssh-keygen -Y sign: %v: %s", err, out)
		}
		sig, err := os.ReadFile(st + ".sig")
		if err != nil {
			t.Fatal(err)
		}
		pub, err := os.ReadFile(key + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		r := mustReviewers(t, "alice "+string(pub))
		v, err := Verify(r, f, Proof{Signature: string(sig), Reviewer: "alice", Statement: string(stmt)}, testNow)
		if err != nil {
			t.Errorf("%s: Verify of ssh-keygen's signature: %v", tt.keyType, err)
			continue
		}
		if v.KeyType != tt.keyType || v.Principal != "alice" || v.Touched {
			t.Errorf("%s: got %+v; want principal alice, key type %s, not touched", tt.keyType, v, tt.keyType)
		}
		// ssh-keygen's signature with another namespace is refused with its reason.
		if out, err := runKeygen(t, nil, "-Y", "sign", "-n", "git", "-f", key, writeFile(t, dir, "st2", string(stmt))); err != nil {
			t.Fatalf("ssh-keygen -Y sign -n git: %v: %s", err, out)
		}
		gitSig, _ := os.ReadFile(filepath.Join(dir, "st2.sig"))
		if _, err := Verify(r, f, Proof{Signature: string(gitSig)}, testNow); !isReason(err, ReasonWrongNamespace) {
			t.Errorf("%s: namespace git: got %v; want %s", tt.keyType, err, ReasonWrongNamespace)
		}
		// And over a statement for another run it is refused.
		other := f
		other.RunID = "another-run"
		if _, err := Verify(r, other, Proof{Signature: string(sig)}, testNow); !isReason(err, ReasonBadSignature) {
			t.Errorf("%s: another run: got %v; want %s", tt.keyType, err, ReasonBadSignature)
		}
	}
}

func TestLoadSignerEncryptedKeyFromSSHKeygen(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "id")
	if out, err := runKeygen(t, nil, "-q", "-t", "ed25519", "-N", "s3cret", "-f", key); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	if _, err := LoadSigner(key, nil); err == nil {
		t.Fatalf("LoadSigner without passphrase: got no error; want one")
	} else if _, ok := errorsAsPassphrase(err); !ok {
		t.Errorf("LoadSigner without passphrase: got %v; want *ssh.PassphraseMissingError", err)
	}
	s, err := LoadSigner(key, []byte("s3cret"))
	if err != nil {
		t.Fatalf("LoadSigner: %v", err)
	}
	stmt := mustStatement(t, testFields())
	pub, _ := os.ReadFile(key + ".pub")
	out, err := keygenVerify(t, "alice "+string(pub), "alice", Namespace, mustSign(t, s, stmt), stmt)
	if err != nil {
		t.Fatalf("ssh-keygen -Y verify: %v: %s", err, out)
	}
}

func TestDevKeysWorkWithSSHKeygen(t *testing.T) {
	dir := t.TempDir()
	k, err := EnsureDevKeys(dir, "dev")
	if err != nil {
		t.Fatalf("EnsureDevKeys: %v", err)
	}
	out, err := runKeygen(t, nil, "-y", "-f", k.PrivateKey)
	if err != nil {
		t.Fatalf("ssh-keygen -y: %v: %s", err, out)
	}
	pub, _ := os.ReadFile(k.PublicKey)
	if strings.Fields(out)[1] != strings.Fields(string(pub))[1] {
		t.Fatalf("ssh-keygen -y: got %s; want %s", out, pub)
	}
	stmt := mustStatement(t, testFields())
	st := writeFile(t, t.TempDir(), "st", string(stmt))
	if out, err := runKeygen(t, nil, "-Y", "sign", "-n", Namespace, "-f", k.PrivateKey, st); err != nil {
		t.Fatalf("ssh-keygen -Y sign with the dev key: %v: %s", err, out)
	}
	sig, _ := os.ReadFile(st + ".sig")
	r, err := LoadReviewers(k.AllowedSigners)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := Verify(r, testFields(), Proof{Signature: string(sig)}, testNow); err != nil || v.Principal != "dev" {
		t.Fatalf("Verify: got %+v, %v; want principal dev", v, err)
	}
	allowed, _ := os.ReadFile(k.AllowedSigners)
	if out, err := keygenVerify(t, string(allowed), "dev", Namespace, string(sig), stmt); err != nil {
		t.Fatalf("ssh-keygen -Y verify against the dev allowed_signers: %v: %s", err, out)
	}
}
