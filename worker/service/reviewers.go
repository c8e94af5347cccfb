package service

import (
	"fmt"
	"log/slog"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/guard"
)

// ReviewersFile returns the reviewers file the worker verifies decisions against, checked once
// at start-up. Without --reviewers the worker refuses to start, except with --dev: then it
// makes (once) a development reviewer key in DATA_DIR/reviewer and prints where it is. There is
// no way to run without signatures.
func ReviewersFile(cfg *Options, logger *slog.Logger) (string, error) {
	path := cfg.Reviewers
	if path == "" {
		if !cfg.Dev {
			return "", noReviewersError()
		}
		keys, err := approval.EnsureDevKeys(cfg.DataDir, approval.DefaultPrincipal())
		if err != nil {
			return "", fmt.Errorf("worker: %w", err)
		}
		verb := "reusing"
		if keys.Created {
			verb = "created"
		}
		logger.Warn("--dev: "+verb+" a development reviewer key; sign decisions with it (starter approve --key "+keys.PrivateKey+" --reviewer "+keys.Principal+")",
			"private_key", keys.PrivateKey, "public_key", keys.PublicKey, "allowed_signers", keys.AllowedSigners, "principal", keys.Principal)
		path = keys.AllowedSigners
	}
	reviewers, err := approval.LoadReviewers(path)
	if err != nil {
		return "", &guard.ConfigError{Msg: fmt.Sprintf("--reviewers %s: %v", path, err)}
	}
	logger.Info("reviewers", "file", path, "keys", reviewers.Len())
	return path, nil
}
