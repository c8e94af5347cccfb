package service

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/egress"
	"github.com/sandboxflow/sandboxflow/guard"
)

// egressCADir is where, under DataDir, the worker keeps the CA that intercepts TLS to hosts with
// a secret (egress.LoadOrCreateCA: made once, files 0600).
const egressCADir = "egress"

// loadSecrets reads SecretsFile once (Validate calls it); its names become the policy's
// SecretNames. An unreadable or malformed file is a guard.ConfigError naming the flag.
func (o *Options) loadSecrets() error {
	o.secrets = nil
	if o.SecretsFile == "" {
		return nil
	}
	s, err := egress.LoadSecrets(o.SecretsFile)
	if err != nil {
		return &guard.ConfigError{Msg: fmt.Sprintf("--secrets-file %s: %v", o.SecretsFile, err)}
	}
	o.secrets = s
	return nil
}

// secretNames returns the names of the loaded secrets, never their values.
func (o *Options) secretNames() []string {
	if o.secrets == nil {
		return nil
	}
	return o.secrets.Names()
}

// dockerEgress is the Docker backend's egress configuration. The CA is made (once, under
// DataDir/egress) only when withCA is set and the worker has secrets, so that doctor checks
// write nothing.
func dockerEgress(cfg *Options, withCA bool, logger *slog.Logger) (docker.EgressConfig, error) {
	p := cfg.Policy()
	private, err := guard.ParsePrivateOK(p.EgressPrivateOK)
	if err != nil {
		return docker.EgressConfig{}, err
	}
	ec := docker.EgressConfig{PrivateOK: private, MaxBytes: p.EgressMaxBytes, MaxConns: p.EgressMaxConns, Secrets: cfg.secrets}
	if cfg.secrets != nil && withCA {
		dir := filepath.Join(cfg.DataDir, egressCADir)
		if ec.CA, err = egress.LoadOrCreateCA(dir); err != nil {
			return docker.EgressConfig{}, &guard.ConfigError{Msg: fmt.Sprintf("--secrets-file needs the egress CA in %s: %v", dir, err)}
		}
		logger.Info("egress secrets", "names", cfg.secretNames(), "ca", filepath.Join(dir, egress.CACertFile))
	}
	return ec, nil
}
