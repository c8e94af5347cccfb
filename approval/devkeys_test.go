package approval

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

func TestEnsureDevKeysOnce(t *testing.T) {
	dir := t.TempDir()
	first, err := EnsureDevKeys(dir, "dev")
	if err != nil {
		t.Fatalf("EnsureDevKeys: %v", err)
	}
	if !first.Created {
		t.Errorf("first call: got Created false; want true")
	}
	want := filepath.Join(dir, "reviewer", "id_ed25519")
	if first.PrivateKey != want || first.PublicKey != want+".pub" || first.AllowedSigners != filepath.Join(dir, "reviewer", "allowed_signers") {
		t.Errorf("paths: got %+v; want under %s", first, filepath.Join(dir, "reviewer"))
	}
	st, err := os.Stat(first.PrivateKey)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("private key mode: got %v, %v; want 0600", st.Mode().Perm(), err)
	}
	key, _ := os.ReadFile(first.PrivateKey)
	if !strings.HasPrefix(string(key), "-----BEGIN OPENSSH PRIVATE KEY-----") {
		t.Errorf("private key: got %.40q; want OpenSSH format", key)
	}
	second, err := EnsureDevKeys(dir, "someone-else")
	if err != nil {
		t.Fatalf("second EnsureDevKeys: %v", err)
	}
	if second.Created || second.Principal != "dev" {
		t.Errorf("second call: got Created %v principal %q; want reuse with principal dev", second.Created, second.Principal)
	}
	key2, _ := os.ReadFile(second.PrivateKey)
	if string(key2) != string(key) {
		t.Errorf("second call replaced the key")
	}
	// A deleted allowed_signers is written again from the key.
	os.Remove(first.AllowedSigners)
	if _, err := EnsureDevKeys(dir, "dev"); err != nil {
		t.Fatalf("EnsureDevKeys after removing allowed_signers: %v", err)
	}
	s, err := LoadSigner(first.PrivateKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := LoadReviewers(first.AllowedSigners)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := Verify(r, testFields(), Proof{Signature: mustSign(t, s, mustStatement(t, testFields()))}, testNow); err != nil || v.Principal != "dev" {
		t.Errorf("Verify with the dev key: got %+v, %v; want principal dev", v, err)
	}
	// An allowed_signers that no longer lists the key is an error, not silently rewritten.
	other := allowedLine("mallory", "", newEd25519Signer(t).PublicKey()) + "\n"
	if err := os.WriteFile(first.AllowedSigners, []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureDevKeys(dir, "dev"); err == nil || !strings.Contains(err.Error(), "does not list the key") {
		t.Errorf("allowed_signers without the key: got %v; want an error", err)
	}
}

func TestDefaultPrincipal(t *testing.T) {
	tests := []struct{ user, want string }{
		{"alice", "alice"},
		{"", "reviewer"},
		{"a b", "reviewer"},
		{"*", "reviewer"},
	}
	for _, tt := range tests {
		t.Setenv("USER", tt.user)
		if got := DefaultPrincipal(); got != tt.want {
			t.Errorf("USER=%q: got %q; want %q", tt.user, got, tt.want)
		}
	}
}

// TestAgentSigner signs through an ssh-agent served in-process on a unix socket.
func TestAgentSigner(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	keyring := agent.NewKeyring()
	s := newEd25519Signer(t)
	dev, err := EnsureDevKeys(t.TempDir(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(dev.PrivateKey)
	priv, err := ssh.ParseRawPrivateKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := keyring.Add(agent.AddedKey{PrivateKey: priv}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); agent.ServeAgent(keyring, c) }()
		}
	}()
	pub, err := ReadPublicKeyFile(dev.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []ssh.PublicKey{pub, nil} {
		signer, closer, err := AgentSigner(sock, want)
		if err != nil {
			t.Fatalf("AgentSigner: %v", err)
		}
		sig := mustSign(t, signer, mustStatement(t, testFields()))
		closer.Close()
		r, _ := LoadReviewers(dev.AllowedSigners)
		if v, err := Verify(r, testFields(), Proof{Signature: sig}, testNow); err != nil || v.Principal != "alice" {
			t.Errorf("Verify of the agent's signature: got %+v, %v; want principal alice", v, err)
		}
	}
	if _, _, err := AgentSigner(sock, s.PublicKey()); err == nil || !strings.Contains(err.Error(), "not in the agent") {
		t.Errorf("key not in agent: got %v; want an error saying so", err)
	}
	if _, _, err := AgentSigner("", nil); err == nil {
		t.Errorf("no socket: got no error; want one")
	}
}
