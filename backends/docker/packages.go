package docker

import (
	"context"
	"os"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/wheels"
)

// install builds (or finds in the host's cache) the environment of c's lock, before any
// container is taken for c. Nothing of it runs: the sandbox mounts it read-only and the code
// imports from it. nil without packages.
func (b *Backend) install(ctx context.Context, c guard.CheckedSettings) (*wheels.Env, error) {
	if len(c.Packages) == 0 {
		return nil, nil
	}
	if b.cfg.Packages == nil {
		return nil, &guard.ConfigError{Msg: "docker backend: this sandbox host installs no packages: it has no package index (worker --package-index)"}
	}
	inputs := make([]string, len(c.Files))
	for i, f := range c.Files {
		inputs[i] = f.Name
	}
	env, err := b.cfg.Packages.Install(ctx, c.Packages, inputs)
	if err != nil {
		if guard.TypeOf(err) == "" {
			// The host's own failure (its disk): nothing ran, the run may be retried.
			return nil, &guard.IntegrationError{Op: "docker: install packages", Err: err}
		}
		return nil, err
	}
	return &env, nil
}

// withPackages records env in res: what was installed, and the install's fetches in the egress
// audit apart from the code's connections (Phase install), first, as they came first.
func withPackages(res guard.Result, env *wheels.Env) guard.Result {
	if env == nil {
		return res
	}
	report := env.Report
	res.Packages = &report
	if len(env.Fetches) == 0 {
		return res
	}
	eg := guard.EgressReport{}
	if res.Egress != nil {
		eg = *res.Egress
	}
	eg.Attempts = append(append([]guard.EgressAttempt(nil), env.Fetches...), eg.Attempts...)
	for _, a := range env.Fetches {
		eg.BytesIn += a.BytesIn
		eg.BytesOut += a.BytesOut
	}
	res.Egress = &eg
	return res
}

// packagesDir is the host folder a sandbox for env mounts, or "".
func packagesDir(env *wheels.Env) string {
	if env == nil {
		return ""
	}
	return env.Dir
}

// makeSlot gives a warm container sb an empty package folder of its own, mounted read-only, so
// that a run with packages can take it: the folder is removed with the container (its release).
func (b *Backend) makeSlot(sb *sandbox) error {
	if err := os.MkdirAll(b.pkgSlots, 0o755); err != nil {
		return &guard.IntegrationError{Op: "docker: package slots", Err: err}
	}
	dir, err := os.MkdirTemp(b.pkgSlots, "warm-")
	if err != nil {
		return &guard.IntegrationError{Op: "docker: package slot", Err: err}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		_ = os.Remove(dir)
		return &guard.IntegrationError{Op: "docker: package slot", Err: err}
	}
	release := sb.release
	sb.packages, sb.slot = dir, true
	sb.release = func() {
		if err := wheels.RemoveTree(dir); err != nil {
			b.log.Warn("package slot not removed", "dir", dir, "error", err)
		}
		release()
	}
	return nil
}

// linkPackages links the environment env into the slot of w, a warm container taken for a run
// with packages; nothing in it has read the slot yet (its supervisor waits for the request). It
// reports false, with w discarded, when w has no slot or the link failed: the run then takes a
// container created for it.
func (b *Backend) linkPackages(w *warmSandbox, env string) bool {
	if w.sb.slot {
		if err := wheels.LinkEnv(env, w.sb.packages); err == nil {
			return true
		} else {
			b.log.Warn("package environment not linked into a warm sandbox; a fresh one is created", "error", err)
		}
	}
	w.att.Close()
	b.removeLater(w.sb, true)
	b.pool.signal()
	return false
}
