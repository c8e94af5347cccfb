package service

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/callable"
	"github.com/sandboxflow/sandboxflow/backends/e2b"
	"github.com/sandboxflow/sandboxflow/guard"
)

// Names of the hosted backends, as --backend takes them.
const (
	backendE2B  = e2b.Name
	backendHTTP = callable.HTTPName
)

// validateHosted checks the hosted backends' flags that need no file or network.
func (c *Options) validateHosted() error {
	if c.Backend == backendHTTP && c.HTTPURL == "" {
		return &guard.ConfigError{Msg: "--backend http needs --http-url"}
	}
	return nil
}

// e2bConfig reads the API key (from --e2b-api-key-file or E2B_API_KEY) and returns the E2B
// backend's configuration. The key lives only in the returned value.
func e2bConfig(cfg *Options, logger *slog.Logger) (e2b.Config, error) {
	key, err := e2b.LoadAPIKey(cfg.E2BAPIKeyFile)
	if err != nil {
		return e2b.Config{}, err
	}
	return e2b.Config{
		APIKey:     key,
		Template:   cfg.E2BTemplate,
		Domain:     cfg.E2BDomain,
		APIURL:     cfg.E2BAPIURL,
		SandboxURL: cfg.E2BSandboxURL,
		Logger:     logger,
	}, nil
}

// httpOptions reads the header file, if any, and returns the HTTP recipe's options.
func httpOptions(cfg *Options) (callable.HTTPOptions, error) {
	var header http.Header
	if cfg.HTTPHeaderFile != "" {
		h, err := callable.LoadHeaderFile(cfg.HTTPHeaderFile)
		if err != nil {
			return callable.HTTPOptions{}, err
		}
		header = h
	}
	return callable.HTTPOptions{URL: cfg.HTTPURL, Header: header}, nil
}

// newHostedBackend builds the e2b or http backend. For e2b it starts the reaper, which kills
// sandboxes this deployment made that outlived any run (a lost worker, a failed kill); the
// returned close stops it.
func newHostedBackend(ctx context.Context, cfg *Options, logger *slog.Logger) (guard.Backend, func(), error) {
	if cfg.Backend == backendHTTP {
		opts, err := httpOptions(cfg)
		if err != nil {
			return nil, nil, err
		}
		b, err := callable.NewHTTP(opts)
		if err != nil {
			return nil, nil, err
		}
		logger.Info("http backend: every run is posted to the service, which must honour network and timeout itself",
			"url", cfg.HTTPURL, "header_names", headerNames(opts.Header))
		return b, func() {}, nil
	}
	ec, err := e2bConfig(cfg, logger)
	if err != nil {
		return nil, nil, err
	}
	b, err := e2b.New(ec)
	if err != nil {
		return nil, nil, err
	}
	reapCtx, stopReaper := context.WithCancel(context.WithoutCancel(ctx))
	reaped := reapEvery(reapCtx, b, cfg.ReapInterval, reapAge(cfg), logger)
	logger.Info("e2b backend ready", "template", cfg.E2BTemplate, "domain", cfg.E2BDomain)
	return b, func() {
		stopReaper()
		<-reaped
	}, nil
}

// headerNames lists the names of h, never its values.
func headerNames(h http.Header) []string {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	return names
}

// hostedChecks are the doctor's lines for the e2b or http backend: settings, reachability and a
// probe run. The lines never hold the key or a header value.
func hostedChecks(ctx context.Context, cfg *Options) []check {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var out []check
	if cfg.Backend == backendHTTP {
		opts, err := httpOptions(cfg)
		if err != nil {
			return []check{{name: "http config", detail: err.Error()}}
		}
		for _, c := range callable.HTTPDoctor(ctx, opts) {
			out = append(out, check{name: c.Name, ok: c.OK, detail: c.Detail})
		}
		return out
	}
	ec, err := e2bConfig(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return []check{{name: "e2b config", detail: err.Error()}}
	}
	for _, c := range e2b.Doctor(ctx, ec) {
		out = append(out, check{name: c.Name, ok: c.OK, detail: c.Detail})
	}
	return out
}
