package e2b

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/kinds"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/defaults"
	"github.com/sandboxflow/sandboxflow/internal/httpcall"
	"github.com/sandboxflow/sandboxflow/internal/smallfile"
)

// Name is the backend's name, part of every digest it runs.
const Name = kinds.E2B

// Defaults of Config. A zero field of a Config takes these values.
const (
	// DefaultTemplate is E2B's own default template (the SDKs' "base"): Debian with python3 and sh.
	DefaultTemplate = "base"
	// DefaultDomain is the domain of E2B's hosted service.
	DefaultDomain = "e2b.app"
	// EnvdPort is the port envd, E2B's in-sandbox daemon, listens on.
	EnvdPort = 49983
	// DefaultUser is the sandbox user that runs the code (the SDKs' default).
	DefaultUser           = "user"
	DefaultWorkDir        = "/home/user/work"
	DefaultRequestTimeout = 60 * time.Second
	DefaultTTLSlack       = 60 * time.Second
	DefaultKillTimeout    = 30 * time.Second
	DefaultMaxRetryAfter  = 60 * time.Second
	// DefaultSessionTTL and DefaultSessionKeepAlive: a session's sandbox lives 5 minutes past
	// the keeper's last word, which comes every 30 s.
	DefaultSessionTTL       = 5 * time.Minute
	DefaultSessionKeepAlive = 30 * time.Second
	// EnvAPIKey, EnvDomain, EnvAPIURL and EnvSandboxURL are the environment variables E2B's SDKs
	// read the key, the domain and the two URL overrides from; the worker's flags fall back to
	// them.
	EnvAPIKey     = "E2B_API_KEY"
	EnvDomain     = "E2B_DOMAIN"
	EnvAPIURL     = "E2B_API_URL"
	EnvSandboxURL = "E2B_SANDBOX_URL"
)

// Metadata keys every sandbox carries. MetaManaged marks the sandboxes this package owns: the
// reaper kills only sandboxes that carry it and the backend's own Labels.
// MetaPrefix starts each of them; Config.Labels may not use it.
const MetaPrefix = "sandboxflow."

const (
	MetaManaged    = "sandboxflow.managed"
	MetaWorkflowID = "sandboxflow.workflow_id"
	MetaRunID      = "sandboxflow.run_id"
	MetaActivityID = "sandboxflow.activity_id"
	MetaDigest     = "sandboxflow.digest"
)

// Config configures the E2B backend. Only APIKey is required; New validates it once.
type Config struct {
	// APIKey authenticates every call to E2B's API (sent as X-API-Key). Required. It is never
	// logged and never appears in an error or a result. LoadAPIKey reads it from a file or
	// E2B_API_KEY.
	APIKey string
	// Template is the E2B template every sandbox starts from; it must have python3 and sh.
	// Optional: defaults to "base".
	Template string
	// Domain is E2B's domain. Optional: defaults to "e2b.app".
	Domain string
	// APIURL is the API's base URL. Optional: defaults to "https://api." + Domain.
	APIURL string
	// SandboxURL, when set, is the base URL of every sandbox's envd (the SDKs' E2B_SANDBOX_URL);
	// the sandbox is then chosen by the E2b-Sandbox-Id header. Optional: defaults to
	// "https://sandbox." + domain for E2B's own domains, and "https://49983-<id>." + domain for
	// any other (a self-hosted E2B).
	SandboxURL string
	// HTTPClient sends every request. Optional: defaults to a client without a timeout of its
	// own; RequestTimeout bounds each call and the run's timeout bounds the code.
	HTTPClient *http.Client
	// RequestTimeout bounds each API and envd call other than the run itself (create, upload,
	// list, download, kill). Optional: defaults to 60 s.
	RequestTimeout time.Duration
	// TTLSlack is added to a run's timeout to make the sandbox's own time to live, after which
	// E2B kills it even if the worker is gone. Optional: defaults to 60 s.
	TTLSlack time.Duration
	// KillTimeout bounds the kill call made after every run. Optional: defaults to 30 s.
	KillTimeout time.Duration
	// MaxRetryAfter bounds the Retry-After of a 429 reported in RateLimitError. Optional:
	// defaults to 60 s.
	MaxRetryAfter time.Duration
	// SessionTTL is the time to live a session's sandbox is given at creation and then, every
	// SessionKeepAlive, again from that moment (POST /sandboxes/{id}/timeout), never past the
	// session's lifetime plus TTLSlack: a worker that is gone stops extending it, and E2B ends it
	// within SessionTTL. It must be within E2B's own cap on a sandbox's timeout (1 h on the
	// Hobby tier). Optional: defaults to 5 min.
	SessionTTL time.Duration
	// SessionKeepAlive is how often a session's keeper extends its sandbox's time to live and
	// so learns whether E2B still has it (Done). Optional: defaults to 30 s; it must be shorter
	// than SessionTTL.
	SessionKeepAlive time.Duration
	// User runs the code inside the sandbox. Optional: defaults to "user".
	User string
	// WorkDir is the code's working folder; produced files are collected from it. Optional:
	// defaults to "/home/user/work".
	WorkDir string
	// Labels are extra metadata put on every sandbox; the reaper kills only sandboxes that carry
	// them, so deployments sharing an E2B team can keep apart. Optional.
	Labels map[string]string
	// Logger receives one line per sandbox created and killed (ids, never the key). Optional:
	// defaults to slog.Default().
	Logger *slog.Logger
	// Created, when set, is called with the run's context and each sandbox id as soon as the
	// sandbox exists, for example to record the id in an activity heartbeat. Optional.
	Created func(ctx context.Context, sandboxID string)
}

var (
	templateRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_./:-]{0,127}$`)
	domainRE   = regexp.MustCompile(`^[A-Za-z0-9.-]+(:[0-9]+)?$`)
	labelRE    = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,63}$`)
)

// e2bDomains are the domains where E2B routes envd by header on sandbox.<domain> (the SDKs'
// list).
var e2bDomains = []string{"e2b.app", "e2b.dev", "e2b.pro", "e2b-staging.dev"}

// WithDefaults returns cfg with every zero field set to its default.
func (cfg Config) WithDefaults() Config {
	defaults.NotPositive(&cfg, Config{
		Template: DefaultTemplate, Domain: DefaultDomain, HTTPClient: &http.Client{},
		RequestTimeout: DefaultRequestTimeout, TTLSlack: DefaultTTLSlack, KillTimeout: DefaultKillTimeout,
		MaxRetryAfter: DefaultMaxRetryAfter, SessionTTL: DefaultSessionTTL, SessionKeepAlive: DefaultSessionKeepAlive, User: DefaultUser, WorkDir: DefaultWorkDir, Logger: slog.Default(),
	})
	if cfg.APIURL == "" {
		cfg.APIURL = "https://api." + cfg.Domain
	}
	cfg.APIURL = strings.TrimRight(cfg.APIURL, "/")
	cfg.SandboxURL = strings.TrimRight(cfg.SandboxURL, "/")
	return cfg
}

// Validate reports the first bad setting as a guard.ConfigError. It never quotes the key.
func (cfg Config) Validate() error {
	bad := func(format string, args ...any) error {
		return &guard.ConfigError{Msg: "e2b backend: " + fmt.Sprintf(format, args...)}
	}
	c := cfg.WithDefaults()
	switch {
	case strings.TrimSpace(cfg.APIKey) == "":
		return bad("no API key: set %s or give a key file (--e2b-api-key-file)", EnvAPIKey)
	case strings.ContainsAny(cfg.APIKey, "\r\n\x00 "):
		return bad("the API key holds spaces or control characters")
	case !templateRE.MatchString(c.Template):
		return bad("template %q is not a template id or alias", c.Template)
	case !domainRE.MatchString(c.Domain):
		return bad("domain %q is not a host name", c.Domain)
	case !strings.HasPrefix(c.WorkDir, "/") || strings.Contains(c.WorkDir, ".."):
		return bad("work dir %q must be an absolute path without ..", c.WorkDir)
	case c.SessionKeepAlive >= c.SessionTTL:
		return bad("session keep-alive %s must be shorter than the session time to live %s", c.SessionKeepAlive, c.SessionTTL)
	case within(codeDir, c.WorkDir) || within(c.WorkDir, codeDir):
		// Input files would land beside the code (or in its HOME) and could replace it.
		return bad("work dir %q must neither hold nor lie in %s, where the code and its HOME go", c.WorkDir, codeDir)
	}
	for _, u := range []string{c.APIURL, c.SandboxURL} {
		if u == "" {
			continue
		}
		p, err := httpcall.ParseURL(u)
		if err != nil {
			return bad("%v", err)
		}
		if p.User != nil {
			return bad("URL %q must not hold credentials (the API key is the credential)", httpcall.RedactURL(p))
		}
	}
	for k, v := range c.Labels {
		if !labelRE.MatchString(k) || strings.HasPrefix(k, MetaPrefix) || len(v) > 256 {
			return bad("label %q: keys match %s and do not start with %q; values are at most 256 bytes", k, labelRE, MetaPrefix)
		}
	}
	return nil
}

// maxAPIKeyFileBytes caps the API key file: a wrong path (a log, a device) is refused, not read.
const maxAPIKeyFileBytes = 64 << 10

// LoadAPIKey returns the API key from file when it is not empty (the first line, trimmed), or
// else from the E2B_API_KEY environment variable. A missing key is a guard.ConfigError. Errors
// name the file, never its content.
func LoadAPIKey(file string) (string, error) {
	if file != "" {
		raw, err := smallfile.Read(file, maxAPIKeyFileBytes)
		if err != nil {
			return "", &guard.ConfigError{Msg: fmt.Sprintf("e2b backend: read API key file %s: %v", file, err)}
		}
		key, _, _ := strings.Cut(string(raw), "\n")
		key = strings.TrimSpace(key)
		if key == "" {
			return "", &guard.ConfigError{Msg: fmt.Sprintf("e2b backend: API key file %s is empty", file)}
		}
		return key, nil
	}
	if key := strings.TrimSpace(os.Getenv(EnvAPIKey)); key != "" {
		return key, nil
	}
	return "", &guard.ConfigError{Msg: "e2b backend: no API key: set " + EnvAPIKey + " or give --e2b-api-key-file"}
}

// envdBase returns the base URL of a sandbox's envd and whether E2B routes it by header.
func (cfg Config) envdBase(sandboxID, sandboxDomain string) string {
	if cfg.SandboxURL != "" {
		return cfg.SandboxURL
	}
	domain := sandboxDomain
	if domain == "" {
		domain = cfg.Domain
	}
	for _, d := range e2bDomains {
		if d == domain {
			return "https://sandbox." + domain
		}
	}
	return fmt.Sprintf("https://%d-%s.%s", EnvdPort, sandboxID, domain)
}

// within reports whether path is dir or lies under it.
func within(path, dir string) bool {
	path, dir = strings.TrimRight(path, "/"), strings.TrimRight(dir, "/")
	return path == dir || strings.HasPrefix(path, dir+"/") || dir == ""
}
