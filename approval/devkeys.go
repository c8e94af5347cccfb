package approval

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/crypto/ssh"
)

// DevKeys are the paths of the development reviewer key (EnsureDevKeys).
type DevKeys struct {
	// PrivateKey is DATA_DIR/reviewer/id_ed25519 (OpenSSH format, mode 0600).
	PrivateKey string
	// PublicKey is DATA_DIR/reviewer/id_ed25519.pub.
	PublicKey string
	// AllowedSigners is DATA_DIR/reviewer/allowed_signers, naming Principal.
	AllowedSigners string
	// Principal is the reviewer name in AllowedSigners.
	Principal string
	// Created is true when this call made the key; false when it reused one.
	Created bool
}

// DefaultPrincipal is the development reviewer's name: $USER, else "reviewer".
func DefaultPrincipal() string {
	if u := os.Getenv("USER"); u != "" && checkPrincipal(u) == nil && !isPattern(u) && !containsComma(u) {
		return u
	}
	return "reviewer"
}

func containsComma(s string) bool {
	for _, c := range s {
		if c == ',' {
			return true
		}
	}
	return false
}

// EnsureDevKeys makes, once, a development reviewer key in dataDir/reviewer: id_ed25519 (an
// unencrypted OpenSSH private key, mode 0600, usable by ssh-keygen -Y sign), id_ed25519.pub and
// allowed_signers naming principal (DefaultPrincipal when empty). Later calls reuse the files
// and report their paths; a missing .pub or allowed_signers is written again from the private
// key. It is for worker --dev only.
func EnsureDevKeys(dataDir, principal string) (DevKeys, error) {
	if principal == "" {
		principal = DefaultPrincipal()
	}
	if err := checkPrincipal(principal); err != nil || isPattern(principal) || containsComma(principal) {
		return DevKeys{}, fmt.Errorf("approval: dev keys: principal %q is not a plain name", printable(principal))
	}
	dir := filepath.Join(dataDir, "reviewer")
	k := DevKeys{
		PrivateKey:     filepath.Join(dir, "id_ed25519"),
		PublicKey:      filepath.Join(dir, "id_ed25519.pub"),
		AllowedSigners: filepath.Join(dir, "allowed_signers"),
		Principal:      principal,
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return DevKeys{}, fmt.Errorf("approval: dev keys: %w", err)
	}
	signer, err := LoadSigner(k.PrivateKey, nil)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := createKey(k.PrivateKey, principal); err != nil {
			return DevKeys{}, err
		}
		k.Created = true
		// Another process may have won the race: read what is there now.
		if signer, err = LoadSigner(k.PrivateKey, nil); err != nil {
			return DevKeys{}, fmt.Errorf("approval: dev keys: %w", err)
		}
	case err != nil:
		return DevKeys{}, fmt.Errorf("approval: dev keys: %w", err)
	}
	pubLine := ssh.MarshalAuthorizedKey(signer.PublicKey()) // "type base64\n"
	if k.Created {
		if err := writeReplace(k.PublicKey, pubLine, 0o644); err != nil {
			return DevKeys{}, err
		}
		line := fmt.Sprintf("%s namespaces=%q %s", principal, Namespace, pubLine)
		if err := writeReplace(k.AllowedSigners, []byte(line), 0o644); err != nil {
			return DevKeys{}, err
		}
		return k, nil
	}
	if _, err := os.Stat(k.PublicKey); errors.Is(err, fs.ErrNotExist) {
		if err := writeReplace(k.PublicKey, pubLine, 0o644); err != nil {
			return DevKeys{}, err
		}
	}
	r, err := LoadReviewers(k.AllowedSigners)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		line := fmt.Sprintf("%s namespaces=%q %s", principal, Namespace, pubLine)
		if err := writeReplace(k.AllowedSigners, []byte(line), 0o644); err != nil {
			return DevKeys{}, err
		}
		return k, nil
	case err != nil:
		return DevKeys{}, fmt.Errorf("approval: dev keys: %w", err)
	}
	for _, key := range r.keys {
		if key.PublicKey+"\n" == string(pubLine) {
			k.Principal = key.Principals[0]
			return k, nil
		}
	}
	return DevKeys{}, fmt.Errorf("approval: dev keys: %s does not list the key in %s; remove %s to start again", k.AllowedSigners, k.PrivateKey, dir)
}

// CreateKeyFile writes a new unencrypted ed25519 OpenSSH private key (mode 0600) with comment to
// path, unless a file is already there (then it leaves that file alone and returns nil). It is for
// development keys (a sandbox host's, with worker --dev).
func CreateKeyFile(path, comment string) error { return createKey(path, comment) }

// createKey writes a new ed25519 key to path unless a file is already there.
func createKey(path, comment string) error {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("approval: dev keys: generate: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return fmt.Errorf("approval: dev keys: encode: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".id_ed25519-*")
	if err != nil {
		return fmt.Errorf("approval: dev keys: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("approval: dev keys: %w", err)
	}
	if _, err := tmp.Write(pem.EncodeToMemory(block)); err != nil {
		tmp.Close()
		return fmt.Errorf("approval: dev keys: write: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("approval: dev keys: write: %w", err)
	}
	// Link fails if path exists, so two processes never replace each other's key.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("approval: dev keys: %w", err)
	}
	return nil
}

// writeReplace writes data to path through a temporary file and a rename.
func writeReplace(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("approval: dev keys: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("approval: dev keys: write %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("approval: dev keys: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("approval: dev keys: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("approval: dev keys: %w", err)
	}
	return nil
}
