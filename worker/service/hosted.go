package service

import (
	"context"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/e2b"
	"github.com/sandboxflow/sandboxflow/backends/httpservice"
	"github.com/sandboxflow/sandboxflow/backends/kinds"
	"github.com/sandboxflow/sandboxflow/guard"
)

// HTTPOptions configure the http backend.
type HTTPOptions struct {
	// URL is the service that receives one POST per run. Required with --backend http.
	URL string
	// HeaderFile is a file of "Name: value" headers sent with every request (secrets, never
	// logged). Optional.
	HeaderFile string
}

// E2BOptions configure the e2b backend. The API key is never kept here: it is read from
// APIKeyFile, or the E2B_API_KEY environment variable, when the backend is built.
type E2BOptions struct {
	APIKeyFile string
	Template   string
	Domain     string
	APIURL     string
	SandboxURL string
}

// httpKind is the http backend's entry in backendKinds.
func httpKind() backendKind {
	return backendKind{
		name: kinds.HTTP,
		flags: func(fs *flag.FlagSet, o *Options) {
			fs.StringVar(&o.HTTP.URL, "http-url", "", "--backend http: URL that receives one POST per run")
			fs.StringVar(&o.HTTP.HeaderFile, "http-header-file", "", "--backend http: file of 'Name: value' lines sent with every request (secrets; never logged)")
		},
		validate: func(o *Options) error {
			if o.HTTP.URL == "" {
				return &guard.ConfigError{Msg: "--backend http needs --http-url"}
			}
			return nil
		},
		build:  newHTTPBackend,
		doctor: httpChecks,
	}
}

// e2bKind is the e2b backend's entry in backendKinds. There is no flag for the API key on
// purpose: a key on a command line shows in ps and shell history.
func e2bKind() backendKind {
	return backendKind{
		name: kinds.E2B,
		flags: func(fs *flag.FlagSet, o *Options) {
			e := &o.E2B
			fs.StringVar(&e.APIKeyFile, "e2b-api-key-file", "", "--backend e2b: file holding the API key (default: the "+e2b.EnvAPIKey+" environment variable)")
			fs.StringVar(&e.Template, "e2b-template", e2b.DefaultTemplate, "--backend e2b: template with python3 and sh")
			fs.StringVar(&e.Domain, "e2b-domain", envOr(e2b.EnvDomain, e2b.DefaultDomain), "--backend e2b: E2B domain ["+e2b.EnvDomain+"]")
			fs.StringVar(&e.APIURL, "e2b-api-url", os.Getenv(e2b.EnvAPIURL), "--backend e2b, advanced and tests: API base URL ["+e2b.EnvAPIURL+"] (default https://api.DOMAIN)")
			fs.StringVar(&e.SandboxURL, "e2b-sandbox-url", os.Getenv(e2b.EnvSandboxURL), "--backend e2b, advanced and tests: envd base URL ["+e2b.EnvSandboxURL+"]")
		},
		build:  newE2BBackend,
		doctor: e2bChecks,
		// One E2B sandbox kept for the session (backends/e2b, OpenSession).
		sessions: true,
	}
}

// envOr returns the environment variable name, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// e2bConfig reads the API key (from --e2b-api-key-file or E2B_API_KEY) and returns the E2B
// backend's configuration. The key lives only in the returned value.
func e2bConfig(cfg *Options, logger *slog.Logger) (e2b.Config, error) {
	key, err := e2b.LoadAPIKey(cfg.E2B.APIKeyFile)
	if err != nil {
		return e2b.Config{}, err
	}
	return e2b.Config{
		APIKey:     key,
		Template:   cfg.E2B.Template,
		Domain:     cfg.E2B.Domain,
		APIURL:     cfg.E2B.APIURL,
		SandboxURL: cfg.E2B.SandboxURL,
		Logger:     logger,
	}, nil
}

// httpOptions reads the header file, if any, and returns the HTTP recipe's options.
func httpOptions(cfg *Options) (httpservice.HTTPOptions, error) {
	var header http.Header
	if cfg.HTTP.HeaderFile != "" {
		h, err := httpservice.LoadHeaderFile(cfg.HTTP.HeaderFile)
		if err != nil {
			return httpservice.HTTPOptions{}, err
		}
		header = h
	}
	return httpservice.HTTPOptions{URL: cfg.HTTP.URL, Header: header}, nil
}

// newHTTPBackend builds the http backend.
func newHTTPBackend(_ context.Context, cfg *Options, logger *slog.Logger) (guard.Backend, func(), error) {
	opts, err := httpOptions(cfg)
	if err != nil {
		return nil, nil, err
	}
	b, err := httpservice.NewHTTP(opts)
	if err != nil {
		return nil, nil, err
	}
	logger.Info("http backend: every run is posted to the service, which must honour network and timeout itself",
		"url", cfg.HTTP.URL, "header_names", headerNames(opts.Header))
	return b, func() {}, nil
}

// newE2BBackend builds the e2b backend and starts the reaper, which kills sandboxes this
// deployment made that outlived any run (a lost worker, a failed kill); the returned close stops
// it.
func newE2BBackend(ctx context.Context, cfg *Options, logger *slog.Logger) (guard.Backend, func(), error) {
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
	logger.Info("e2b backend ready", "template", cfg.E2B.Template, "domain", cfg.E2B.Domain)
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

// httpChecks are the doctor's lines for the http backend; they never hold a header value.
func httpChecks(ctx context.Context, cfg *Options) []check {
	opts, err := httpOptions(cfg)
	return probeChecks(ctx, "http config", err, func(ctx context.Context) []guard.Check { return httpservice.HTTPDoctor(ctx, opts) })
}

// e2bChecks are the doctor's lines for the e2b backend: settings, reachability and a probe run.
// The lines never hold the key.
func e2bChecks(ctx context.Context, cfg *Options) []check {
	ec, err := e2bConfig(cfg, slog.New(slog.DiscardHandler))
	return probeChecks(ctx, "e2b config", err, func(ctx context.Context) []guard.Check { return e2b.Doctor(ctx, ec) })
}

// probeChecks is one failed line named config when the settings could not be read (configErr),
// else the lines of doctor, given two minutes for its probe run.
func probeChecks(ctx context.Context, config string, configErr error, doctor func(context.Context) []guard.Check) []check {
	if configErr != nil {
		return []check{{name: config, detail: configErr.Error()}}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return checksOf(doctor(ctx))
}
