package service

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

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

// checkReceipts is doctor's receipts line: the host key loads, and when a hosts file is given
// too, a receipt the key signs under the host's name verifies against it. ok is false when
// neither is configured (the line is then left out).
func checkReceipts(cfg *Options) (detail string, ok bool, err error) {
	if cfg.HostKey == "" && cfg.Hosts == "" {
		return "", false, nil
	}
	name := cfg.HostName
	if name == "" {
		if name, err = os.Hostname(); err != nil {
			return "", true, fmt.Errorf("--host-name: %v", err)
		}
	}
	var hosts *receipt.Hosts
	if cfg.Hosts != "" {
		if hosts, err = receipt.LoadHosts(cfg.Hosts); err != nil {
			return "", true, fmt.Errorf("--hosts %s: %v", cfg.Hosts, err)
		}
	}
	if cfg.HostKey == "" {
		return fmt.Sprintf("results verified against %d host keys in %s (this worker signs none)", hosts.Len(), cfg.Hosts), true, nil
	}
	signer, err := approval.LoadSigner(cfg.HostKey, nil)
	if err != nil {
		return "", true, fmt.Errorf("--host-key: %v", err)
	}
	pub := signer.PublicKey()
	fp := ssh.FingerprintSHA256(pub)
	if hosts == nil {
		return fmt.Sprintf("host %s signs receipts with %s (no --hosts here to check them)", name, fp), true, nil
	}
	now := time.Now()
	rec, err := receipt.Sign(signer, receipt.New(receipt.Run{WorkflowID: "doctor", RunID: "doctor", Started: now, Ended: now,
		Host: receipt.Host{Name: name, PublicKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))), Fingerprint: fp}}, guard.Result{}))
	if err != nil {
		return "", true, err
	}
	if _, err := receipt.Verify(hosts, &rec); err != nil {
		return "", true, fmt.Errorf("a receipt by host %s (%s) does not verify against %s: %v; add its line: %s", name, fp, cfg.Hosts, err,
			strings.TrimSpace(receipt.HostLine(name, pub)))
	}
	return fmt.Sprintf("host %s signs receipts with %s, listed in %s", name, fp, cfg.Hosts), true, nil
}
