// Package hosttest makes sandbox host keys for tests: a host's signing key file, as worker
// --host-key reads it, and a hosts file that lists it, as worker --hosts and ssh-keygen -Y verify
// read it.
package hosttest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/receipt"
)

// Host is one sandbox host's key.
type Host struct {
	// Name is the host's name, its principal in File.
	Name string
	// Signer signs with the host's key.
	Signer ssh.Signer
	// KeyFile is the private key (OpenSSH format, mode 0600).
	KeyFile string
	// File is a hosts file that lists this host alone.
	File string
}

// New makes an ed25519 host key named name in a temporary folder of t.
func New(t testing.TB, name string) *Host {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, name)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	h := &Host{Name: name, Signer: signer, KeyFile: filepath.Join(dir, "id_ed25519"), File: filepath.Join(dir, "hosts")}
	if err := os.WriteFile(h.KeyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.File, []byte(h.Line()), 0o644); err != nil {
		t.Fatal(err)
	}
	return h
}

// Line is the host's hosts-file line.
func (h *Host) Line() string { return receipt.HostLine(h.Name, h.Signer.PublicKey()) }

// Receipt returns h as a receipt.Host.
func (h *Host) Receipt() receipt.Host {
	pub := h.Signer.PublicKey()
	return receipt.Host{Name: h.Name, PublicKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))), Fingerprint: ssh.FingerprintSHA256(pub)}
}
