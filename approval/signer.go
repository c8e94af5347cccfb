package approval

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/sandboxflow/sandboxflow/internal/smallfile"
)

// maxKeyFileBytes bounds a key file read.
const maxKeyFileBytes = 64 << 10

// LoadSigner reads an OpenSSH private key file (as ssh-keygen writes it) for Sign. An encrypted
// key needs its passphrase; without one the error wraps *ssh.PassphraseMissingError (match it
// with errors.As). Security-key (sk-) private keys need the hardware: sign those through
// ssh-agent (AgentSigner) or ssh-keygen.
func LoadSigner(path string, passphrase []byte) (ssh.Signer, error) {
	data, err := smallfile.Read(path, maxKeyFileBytes)
	if err != nil {
		return nil, fmt.Errorf("approval: reviewer key: %w", err)
	}
	var raw any
	if len(passphrase) > 0 {
		raw, err = ssh.ParseRawPrivateKeyWithPassphrase(data, passphrase)
	} else {
		raw, err = ssh.ParseRawPrivateKey(data)
	}
	if err != nil {
		return nil, fmt.Errorf("approval: reviewer key %s: %w", path, err)
	}
	signer, err := ssh.NewSignerFromKey(raw)
	if err != nil {
		return nil, fmt.Errorf("approval: reviewer key %s: %w", path, err)
	}
	if _, err := parsePublicKey(signer.PublicKey().Marshal()); err != nil {
		return nil, fmt.Errorf("approval: reviewer key %s: %w", path, err)
	}
	return signer, nil
}

// AgentSigner connects to the ssh-agent at socket (usually $SSH_AUTH_SOCK) and returns a
// signer for the agent's key equal to pub, like ssh-keygen -Y sign -f key.pub. With pub nil it
// takes the agent's only key of a supported type and fails if there are several. Close the
// returned closer when done signing.
func AgentSigner(socket string, pub ssh.PublicKey) (ssh.Signer, io.Closer, error) {
	if socket == "" {
		return nil, nil, errors.New("approval: ssh-agent: no socket (SSH_AUTH_SOCK is empty)")
	}
	conn, err := net.Dial("unix", socket)
	if err != nil {
		return nil, nil, fmt.Errorf("approval: ssh-agent: %w", err)
	}
	signers, err := agent.NewClient(conn).Signers()
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("approval: ssh-agent: list keys: %w", err)
	}
	var found []ssh.Signer
	for _, s := range signers {
		if _, err := parsePublicKey(s.PublicKey().Marshal()); err != nil {
			continue
		}
		if pub == nil || bytes.Equal(s.PublicKey().Marshal(), pub.Marshal()) {
			found = append(found, s)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], conn, nil
	case pub != nil:
		conn.Close()
		return nil, nil, fmt.Errorf("approval: ssh-agent: key %s is not in the agent (ssh-add it)", ssh.FingerprintSHA256(pub))
	case len(found) == 0:
		conn.Close()
		return nil, nil, errors.New("approval: ssh-agent: no ed25519 or ecdsa-p256 key in the agent")
	default:
		conn.Close()
		return nil, nil, fmt.Errorf("approval: ssh-agent: %d usable keys; name one with its public key file", len(found))
	}
}

// ReadPublicKeyFile reads a public key file such as id_ed25519.pub.
func ReadPublicKeyFile(path string) (ssh.PublicKey, error) {
	data, err := smallfile.Read(path, maxKeyFileBytes)
	if err != nil {
		return nil, fmt.Errorf("approval: public key: %w", err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(data)
	if err != nil {
		return nil, fmt.Errorf("approval: public key %s: %w", path, err)
	}
	return pub, nil
}
