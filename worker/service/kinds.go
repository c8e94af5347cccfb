package service

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/metrics"
)

// backendKind is everything the worker's assembly knows about one kind of backend. Each entry
// lives beside its wiring (docker.go, hosted.go, local.go); backendKinds lists them once, and
// nothing else in the assembly names a backend.
type backendKind struct {
	// name is what --backend takes and what runs record (kinds.NAME, the backend's Name).
	name string
	// usage is how --backend's help lists it. Optional: the name.
	usage string
	// flags registers this kind's flags, which fill its part of Options (Options.Docker, ...).
	flags func(fs *flag.FlagSet, o *Options)
	// emptyOK lists this kind's flags that may be set to an empty value on purpose.
	emptyOK []string
	// validate checks this kind's settings that need no file or network, when it is the one
	// chosen. Optional.
	validate func(o *Options) error
	// build makes the backend and starts its reaper when it has one; closeBackend releases it
	// when the worker stops.
	build func(ctx context.Context, o *Options, logger *slog.Logger) (b guard.Backend, closeBackend func(), err error)
	// observe feeds m with what only this kind knows (the warm pool), once b is built. Optional.
	observe func(b guard.Backend, m *metrics.Metrics, o *Options)
	// doctor returns the doctor's lines for this kind (settings, reachability, a probe run).
	doctor func(ctx context.Context, o *Options) []check
	// reapExtra is added to the age past which the reaper takes a sandbox for an orphan (the
	// Docker warm pool's longest wait). Optional: nothing.
	reapExtra func(o *Options) time.Duration
	// egress says whether this kind runs the filtering egress proxy, which --egress-allow needs.
	egress bool
	// packages says whether this kind installs a request's packages (--package-index needs it).
	packages bool
	// metricsLabel is the runtime label of the sandbox metrics. Optional: the name.
	metricsLabel func(o *Options) string
	// sessions says whether this kind keeps a sandbox for a session (issue 28: its backend is a
	// guard.SessionBackend). A worker that runs sandboxes asks its backend itself; a worker
	// that only runs workflows reads this to refuse sessions at the check.
	sessions bool
}

// backendKinds is the table of backend kinds, in the order --backend's help lists them. Adding
// a backend is its package plus one entry here.
func backendKinds() []backendKind {
	return []backendKind{dockerKind(), e2bKind(), httpKind(), localKind()}
}

// kindNamed returns the entry for --backend name.
func kindNamed(name string) (backendKind, bool) {
	for _, k := range backendKinds() {
		if k.name == name {
			return k, true
		}
	}
	return backendKind{}, false
}

// kind returns the entry of the configured backend; Validate has checked that there is one.
func (o *Options) kind() backendKind {
	k, _ := kindNamed(o.Backend)
	return k
}

// kindList lists the backend kinds for a message: "docker, e2b, http or local", each as usage
// gives it.
func kindList(usage bool) string {
	var names []string
	for _, k := range backendKinds() {
		n := k.name
		if usage && k.usage != "" {
			n = k.usage
		}
		names = append(names, n)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// BackendFlags registers --backend and every kind's flags on fs; emptyOK lists the flags that
// may be set to an empty value on purpose (for cli.Parse).
func BackendFlags(fs *flag.FlagSet, o *Options) (emptyOK []string) {
	fs.StringVar(&o.Backend, "backend", backendKinds()[0].name, "where code runs: "+kindList(true))
	for _, k := range backendKinds() {
		k.flags(fs, o)
		emptyOK = append(emptyOK, k.emptyOK...)
	}
	return emptyOK
}

// validateBackend checks --backend and the chosen kind's own settings.
func (o *Options) validateBackend() error {
	k, ok := kindNamed(o.Backend)
	if !ok {
		return &guard.ConfigError{Msg: fmt.Sprintf("--backend %q: want %s", o.Backend, kindList(false))}
	}
	if k.validate != nil {
		if err := k.validate(o); err != nil {
			return err
		}
	}
	if strings.TrimSpace(o.EgressAllow) != "" && !k.egress {
		// Only a backend with the filtering proxy can give a request the egress it was approved
		// with; elsewhere the reviewer would be shown egress the code then does not get.
		return &guard.ConfigError{Msg: fmt.Sprintf("--egress-allow needs a backend with an egress proxy (%s); the %s backend has none", egressKinds(), o.Backend)}
	}
	if o.PackageIndex != "" && !k.packages {
		// Elsewhere a reviewer would approve packages the code then runs without.
		return &guard.ConfigError{Msg: fmt.Sprintf("--package-index needs a backend that installs packages (--backend docker); the %s backend installs none", o.Backend)}
	}
	return nil
}

// egressKinds lists the kinds that run the egress proxy.
func egressKinds() string {
	var names []string
	for _, k := range backendKinds() {
		if k.egress {
			names = append(names, "--backend "+k.name)
		}
	}
	return strings.Join(names, ", ")
}

// NewBackend builds the configured backend (and starts its reaper); closeBackend releases it when
// the worker stops.
func NewBackend(ctx context.Context, cfg *Options, logger *slog.Logger) (b guard.Backend, closeBackend func(), err error) {
	k, ok := kindNamed(cfg.Backend)
	if !ok {
		return nil, nil, &guard.ConfigError{Msg: fmt.Sprintf("--backend %q: want %s", cfg.Backend, kindList(false))}
	}
	return k.build(ctx, cfg, logger)
}

// observeBackend lets the configured kind feed m (nil: no metrics) with what only it knows.
func observeBackend(cfg *Options, b guard.Backend, m *metrics.Metrics) {
	if k := cfg.kind(); k.observe != nil && m != nil {
		k.observe(b, m, cfg)
	}
}

// reapAge is how old a sandbox must be before the reaper takes it for an orphan: older than any
// run the policy allows (plus what the kind adds, such as the warm pool's longest wait), so a
// live run on another worker of the same deployment is left alone.
func reapAge(cfg *Options) time.Duration {
	p := cfg.Policy()
	age := p.MaxTimeout + p.Grace + time.Minute
	if k := cfg.kind(); k.reapExtra != nil {
		age += k.reapExtra(cfg)
	}
	return age
}

// sessionKinds lists the kinds that keep a sandbox for a session.
func sessionKinds() string {
	var names []string
	for _, k := range backendKinds() {
		if k.sessions {
			names = append(names, k.name)
		}
	}
	return strings.Join(names, ", ")
}

// metricsLabel is the runtime label of the configured backend's sandbox metrics.
func metricsLabel(cfg *Options) string {
	if k := cfg.kind(); k.metricsLabel != nil {
		return k.metricsLabel(cfg)
	}
	return cfg.Backend
}
