package service

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// receiptFiles returns the host key and hosts file the worker uses (issue 31). With Dev, missing
// ones are made in DataDir/host: a host key once, and a hosts file listing it. Otherwise a
// sandbox host without a key signs no receipts, and a workflow worker without a hosts file
// accepts results without them; each is warned of.
func receiptFiles(cfg *Options, logger *slog.Logger) (hostKey, hostName, hosts string, err error) {
	hostKey, hostName, hosts = cfg.HostKey, cfg.HostName, cfg.Hosts
	if hostName == "" {
		if hostName, err = os.Hostname(); err != nil {
			return "", "", "", &guard.ConfigError{Msg: fmt.Sprintf("--host-name: the machine's host name: %v; set one", err)}
		}
	}
	if cfg.Dev && (hostKey == "" || hosts == "") {
		key, file, err := devHostKey(cfg.DataDir, hostName)
		if err != nil {
			return "", "", "", err
		}
		if hostKey == "" {
			hostKey = key
		}
		if hosts == "" {
			hosts = file
		}
		logger.Warn("--dev: a development sandbox host key signs receipts; verify them against "+hosts, "host_key", hostKey, "host_name", hostName, "hosts", hosts)
	}
	if hosts != "" {
		h, err := receipt.LoadHosts(hosts)
		if err != nil {
			return "", "", "", &guard.ConfigError{Msg: fmt.Sprintf("--hosts %s: %v", hosts, err)}
		}
		logger.Info("sandbox hosts", "file", hosts, "keys", h.Len())
	}
	switch {
	case cfg.Role != RoleSandboxes && hosts == "":
		logger.Warn("no --hosts file: results are accepted without a host's receipt; anyone who can write to the namespace can complete a run with output of their own")
	case cfg.Role != RoleWorkflows && hostKey == "":
		logger.Warn("no --host-key: this sandbox host signs no receipts, and workflows with a hosts file refuse its results")
	}
	return hostKey, hostName, hosts, nil
}

// devHostKey makes, once, DATA_DIR/host/id_ed25519 (and its .pub), and writes DATA_DIR/host/hosts
// listing it under name.
func devHostKey(dataDir, name string) (key, hosts string, err error) {
	dir := filepath.Join(dataDir, "host")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("worker: dev host key: %w", err)
	}
	key, hosts = filepath.Join(dir, "id_ed25519"), filepath.Join(dir, "hosts")
	if _, err := os.Stat(key); errors.Is(err, fs.ErrNotExist) {
		if err := approval.CreateKeyFile(key, name); err != nil {
			return "", "", fmt.Errorf("worker: %w", err)
		}
	}
	signer, err := approval.LoadSigner(key, nil)
	if err != nil {
		return "", "", fmt.Errorf("worker: dev host key: %w", err)
	}
	pub := signer.PublicKey()
	if err := os.WriteFile(key+".pub", ssh.MarshalAuthorizedKey(pub), 0o644); err != nil {
		return "", "", fmt.Errorf("worker: dev host key: %w", err)
	}
	if err := os.WriteFile(hosts, []byte(receipt.HostLine(name, pub)), 0o644); err != nil {
		return "", "", fmt.Errorf("worker: dev hosts file: %w", err)
	}
	return key, hosts, nil
}
