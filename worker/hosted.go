package main

import (
	"context"
	"flag"
	"log/slog"
	"net/http"
	"os"
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

// hostedFlags adds the flags of the hosted backends. There is no flag for the E2B API key on
// purpose: a key on a command line shows in ps and shell history.
func hostedFlags(fs *flag.FlagSet, c *config) {
	fs.StringVar(&c.httpURL, "http-url", "", "--backend http: URL that receives one POST per run")
	fs.StringVar(&c.httpHeaderFile, "http-header-file", "", "--backend http: file of 'Name: value' lines sent with every request (secrets; never logged)")
	fs.StringVar(&c.e2bKeyFile, "e2b-api-key-file", "", "--backend e2b: file holding the API key (default: the "+e2b.EnvAPIKey+" environment variable)")
	fs.StringVar(&c.e2bTemplate, "e2b-template", e2b.DefaultTemplate, "--backend e2b: template with python3 and sh")
	fs.StringVar(&c.e2bDomain, "e2b-domain", envOr(e2b.EnvDomain, e2b.DefaultDomain), "--backend e2b: E2B domain ["+e2b.EnvDomain+"]")
	fs.StringVar(&c.e2bAPIURL, "e2b-api-url", os.Getenv(e2b.EnvAPIURL), "--backend e2b, advanced and tests: API base URL ["+e2b.EnvAPIURL+"] (default https://api.DOMAIN)")
	fs.StringVar(&c.e2bSandboxURL, "e2b-sandbox-url", os.Getenv(e2b.EnvSandboxURL), "--backend e2b, advanced and tests: envd base URL ["+e2b.EnvSandboxURL+"]")
}

// envOr returns the environment variable name, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// validateHosted checks the hosted backends' flags that need no file or network.
func (c *config) validateHosted() error {
	if c.backend == backendHTTP && c.httpURL == "" {
		return &guard.ConfigError{Msg: "--backend http needs --http-url"}
	}
	return nil
}

// e2bConfig reads the API key (from --e2b-api-key-file or E2B_API_KEY) and returns the E2B
// backend's configuration. The key lives only in the returned value.
func e2bConfig(cfg *config, logger *slog.Logger) (e2b.Config, error) {
	key, err := e2b.LoadAPIKey(cfg.e2bKeyFile)
	if err != nil {
		return e2b.Config{}, err
	}
	return e2b.Config{
		APIKey:     key,
		Template:   cfg.e2bTemplate,
		Domain:     cfg.e2bDomain,
		APIURL:     cfg.e2bAPIURL,
		SandboxURL: cfg.e2bSandboxURL,
		Logger:     logger,
	}, nil
}

// httpOptions reads the header file, if any, and returns the HTTP recipe's options.
func httpOptions(cfg *config) (callable.HTTPOptions, error) {
	var header http.Header
	if cfg.httpHeaderFile != "" {
		h, err := callable.LoadHeaderFile(cfg.httpHeaderFile)
		if err != nil {
			return callable.HTTPOptions{}, err
		}
		header = h
	}
	return callable.HTTPOptions{URL: cfg.httpURL, Header: header}, nil
}

// newHostedBackend builds the e2b or http backend. For e2b it starts the reaper, which kills
// sandboxes this deployment made that outlived any run (a lost worker, a failed kill); the
// returned close stops it.
func newHostedBackend(ctx context.Context, cfg *config, logger *slog.Logger) (guard.Backend, func(), error) {
	if cfg.backend == backendHTTP {
		opts, err := httpOptions(cfg)
		if err != nil {
			return nil, nil, err
		}
		b, err := callable.NewHTTP(opts)
		if err != nil {
			return nil, nil, err
		}
		logger.Info("http backend: every run is posted to the service, which must honour network and timeout itself",
			"url", cfg.httpURL, "header_names", headerNames(opts.Header))
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
	reaped := b.StartReaper(reapCtx, cfg.reapInterval, reapAge(cfg))
	logger.Info("e2b backend ready", "template", cfg.e2bTemplate, "domain", cfg.e2bDomain)
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
func hostedChecks(ctx context.Context, cfg *config) []check {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var out []check
	if cfg.backend == backendHTTP {
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
