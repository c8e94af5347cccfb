package inbox

import (
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/internal/defaults"
	"github.com/sandboxflow/sandboxflow/receipt"
)

//go:embed assets templates
var embedded embed.FS

// Defaults of Config.
const (
	DefaultListen       = "127.0.0.1:8235"
	DefaultSignInTTL    = 12 * time.Hour
	DefaultIdleTTL      = time.Hour
	DefaultDecisionTTL  = 15 * time.Minute
	defaultMaxSignIns   = 10000
	maxRequestBodyBytes = 64 << 10
)

// Config configures a Server.
type Config struct {
	// Temporal is a connected Temporal client. Required.
	Temporal tclient.Client
	// DataConverter decodes payloads read from history (input file previews). Optional:
	// Temporal's default.
	DataConverter converter.DataConverter
	// Namespace is Temporal's namespace (client.Options.Namespace): a run's start is then read
	// as its one event. Optional.
	Namespace string
	// TaskQueue is the task queue of RunCode workflows. Optional: defaults to
	// contract.DefaultTaskQueue.
	TaskQueue string
	// SandboxTaskQueue is the sandbox task queue a statement names when the run's status does
	// not say. Optional: defaults to TaskQueue.
	SandboxTaskQueue string
	// ReviewersPath is the reviewers file (OpenSSH allowed_signers). Required; it may not exist
	// yet (then nobody can sign in, but a passkey can be registered).
	ReviewersPath string
	// Origin is the inbox's origin as the browser sees it, such as "https://inbox.example.com"
	// or "http://localhost:8235". Required. Its host is the WebAuthn relying party id, which
	// cannot be an IP address: serve 127.0.0.1 as http://localhost:PORT.
	Origin string
	// PasskeyCountersPath is the file where the inbox keeps the last signature counter it
	// accepted from each passkey (approval.Counters), at sign-in and for decisions: an
	// assertion whose counter did not grow (a replay, a cloned authenticator) is refused.
	// Optional: empty keeps them in memory, forgotten when the process ends.
	PasskeyCountersPath string
	// SignInTTL is how long a browser's sign-in lives at most. Optional: defaults to 12 h.
	SignInTTL time.Duration
	// IdleTTL ends a sign-in unused this long. Optional: defaults to 1 h.
	IdleTTL time.Duration
	// DecisionTTL is how long a signed statement stays valid. Optional: defaults to 15 min.
	DecisionTTL time.Duration
	// Hosts are the sandbox hosts' keys every result and cell the inbox shows is verified
	// against (the same hosts file the workers sign with, --hosts). Optional: nil verifies
	// against the hosts each run's check recorded, which a namespace writer's worker can write.
	Hosts *receipt.Hosts
	// Logger logs refusals and decisions. Optional: slog.Default().
	Logger *slog.Logger
	// Now returns the time. Optional: time.Now.
	Now func() time.Time
}

// Server is the inbox's http.Handler. Create it with New.
type Server struct {
	cfg       Config
	rpID      string
	secure    bool
	runs      *client.Client
	door      sessionDoor
	signIns   *signIns
	reviewers *reviewersFile
	counters  *approval.Counters
	pages     map[string]*template.Template
	mux       *http.ServeMux
	log       *slog.Logger
	// shown is what the live reads handed each page (live.go).
	shown liveShown
}

// New checks cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Temporal == nil {
		return nil, errors.New("inbox: Config.Temporal is required")
	}
	if cfg.ReviewersPath == "" {
		return nil, errors.New("inbox: Config.ReviewersPath is required (the reviewers file, --reviewers or SANDBOXFLOW_REVIEWERS)")
	}
	origin, rpID, secure, err := parseOrigin(cfg.Origin)
	if err != nil {
		return nil, err
	}
	// As a browser writes it (no default port), in the Origin header and in a passkey's client
	// data alike.
	if origin, err = approval.CanonicalOrigin(origin); err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	cfg.Origin = origin
	setDefaults(&cfg)
	runs, err := client.New(client.Options{Temporal: cfg.Temporal, TaskQueue: cfg.TaskQueue, DataConverter: cfg.DataConverter, Namespace: cfg.Namespace})
	if err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	// A conversation's previous run is shown as decided only once its signature verified
	// against the reviewers file the inbox reads.
	runs = runs.WithReviewersFile(cfg.ReviewersPath, cfg.Origin)
	if cfg.Hosts != nil {
		runs = runs.WithHosts(cfg.Hosts)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:       cfg,
		rpID:      rpID,
		secure:    secure,
		runs:      runs,
		door:      clientSessions{c: runs},
		signIns:   newSignIns(cfg.SignInTTL, cfg.IdleTTL, defaultMaxSignIns, cfg.Now),
		reviewers: &reviewersFile{path: cfg.ReviewersPath, origin: origin},
		counters:  approval.NewCounters(cfg.PasskeyCountersPath),
		pages:     pages,
		log:       cfg.Logger,
	}
	s.signIns.nameFor(origin)
	if s.secure {
		s.signIns.useSecureCookies()
	}
	s.routes()
	return s, nil
}

func setDefaults(cfg *Config) {
	if cfg.TaskQueue == "" {
		cfg.TaskQueue = contract.DefaultTaskQueue
	}
	if cfg.SandboxTaskQueue == "" {
		cfg.SandboxTaskQueue = cfg.TaskQueue
	}
	defaults.NotPositive(cfg, Config{
		SignInTTL: DefaultSignInTTL, IdleTTL: DefaultIdleTTL, DecisionTTL: DefaultDecisionTTL,
		Logger: slog.Default(), Now: time.Now,
	})
	if cfg.DataConverter == nil {
		cfg.DataConverter = converter.GetDefaultDataConverter()
	}
}

// RPID returns the WebAuthn relying party id: the origin's host.
func (s *Server) RPID() string { return s.rpID }

func (s *Server) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(embedded, "assets")
	m.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	m.HandleFunc("GET /{$}", s.reviewer(s.handleList))
	m.HandleFunc("GET /pending", s.reviewer(s.handlePendingRows))
	m.HandleFunc("GET /next", s.reviewer(s.handleNext))
	m.HandleFunc("GET /run/{id}", s.reviewer(s.handleRun))
	m.HandleFunc("GET /run/{id}/download/{what}", s.reviewer(s.download("no RunCode run ", s.runDownloads)))
	m.HandleFunc("POST /run/{id}/decide", s.reviewer(s.handleDecide))
	m.HandleFunc("POST /run/{id}/cancel", s.reviewer(s.handleCancel))
	m.HandleFunc("GET /run/{id}/live", s.reviewer(s.handleLive))
	m.HandleFunc("POST /run/{id}/edit-statement", s.reviewer(s.handleEditStatement))
	m.HandleFunc("GET /session/{id}", s.reviewer(s.handleSession))
	m.HandleFunc("GET /session/{id}/download/{what}", s.reviewer(s.download("no Session workflow ", s.sessionDownloads)))
	m.HandleFunc("POST /session/{id}/decide", s.reviewer(s.handleCellDecide))
	m.HandleFunc("GET /session/{id}/live", s.reviewer(s.handleSessionLive))
	m.HandleFunc("GET /signin", s.handleSignInPage)
	m.HandleFunc("POST /passkey/register/begin", s.withSignIn(s.handleRegisterBegin))
	m.HandleFunc("POST /passkey/register/finish", s.withChallenge(challengeRegister, "registration", s.handleRegisterFinish))
	m.HandleFunc("POST /passkey/login/begin", s.withSignIn(s.handleLoginBegin))
	m.HandleFunc("POST /passkey/login/finish", s.withChallenge(challengeLogin, "sign-in", s.handleLoginFinish))
	m.HandleFunc("POST /signout", s.handleSignOut)
	s.mux = m
}

// ServeHTTP serves the inbox: security headers on every response, the origin and CSRF check on
// every request that is not GET or HEAD, then the page.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "+
		"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), publickey-credentials-get=(self), publickey-credentials-create=(self)")
	h.Set("Cache-Control", "no-store")
	if s.secure {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		r.Body = http.MaxBytesReader(w, r.Body, maxRequestBodyBytes)
		if err := s.checkSameOrigin(r); err != nil {
			s.log.Warn("inbox: refused a cross-site request", "path", r.URL.Path, "error", err)
			// The page's fetches read a JSON refusal and show its words, not a bare status.
			if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
				writeRefusal(w, http.StatusForbidden, err.Error())
				return
			}
			http.Error(w, "forbidden: "+err.Error(), http.StatusForbidden)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// checkSameOrigin refuses a state-changing request from another origin, or without the
// sign-in's CSRF token (header X-CSRF-Token, or form field csrf). Each refusal says why and what
// to do: the reviewer reads it on the page.
func (s *Server) checkSameOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin != s.cfg.Origin {
		return s.wrongOrigin(origin)
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return fmt.Errorf("the request came from another site (Sec-Fetch-Site %q): act from the inbox's own pages at %s", site, s.cfg.Origin)
	}
	who := s.signIns.get(r)
	if who == nil {
		return fmt.Errorf("no sign-in goes with this request (it ended, or cookies are off): reload %s/signin and try again", s.cfg.Origin)
	}
	token := r.Header.Get("X-CSRF-Token")
	if token == "" {
		token = r.PostFormValue("csrf")
	}
	if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(who.csrf)) != 1 {
		return errors.New("the page's CSRF token is missing or out of date (the sign-in changed since the page was read): reload the page and try again")
	}
	return nil
}

// wrongOrigin says why a request from origin (its Origin header) is refused: passkeys are bound
// to the inbox's configured origin, which a browser must open it at.
func (s *Server) wrongOrigin(origin string) error {
	if origin == "" {
		return fmt.Errorf("the request names no origin (no Origin header): open the inbox at %s and act from its pages", s.cfg.Origin)
	}
	return fmt.Errorf("open the inbox at %s: this page's origin is %s, and the inbox's passkeys belong to %s only "+
		"(a passkey is bound to its origin; 127.0.0.1 and localhost are different origins)", s.cfg.Origin, origin, s.cfg.Origin)
}

// reviewer wraps a page that only a signed-in, listed reviewer may see. Anyone else is sent to
// the sign-in page and sees nothing of any run.
func (s *Server) reviewer(h func(http.ResponseWriter, *http.Request, *signIn)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who := s.signIns.get(r)
		if who == nil || who.principal == "" {
			s.denyAccess(w, r, "")
			return
		}
		if !s.reviewers.lists(who.principal, who.fingerprint) {
			s.log.Warn("inbox: session of a key no longer in the reviewers file", "principal", who.principal, "fingerprint", who.fingerprint)
			s.signIns.signOut(who)
			s.denyAccess(w, r, "Your passkey is no longer in the reviewers file.")
			return
		}
		h(w, r, who)
	}
}

func (s *Server) denyAccess(w http.ResponseWriter, r *http.Request, msg string) {
	if r.Method == http.MethodGet && !strings.Contains(r.URL.Path, "/download/") && r.URL.Path != "/pending" && !strings.HasSuffix(r.URL.Path, "/live") {
		http.Redirect(w, r, "/signin", http.StatusSeeOther)
		return
	}
	if msg == "" {
		msg = "sign in with a reviewer's passkey at " + s.cfg.Origin + "/signin, then reload this page"
	}
	http.Error(w, "unauthorized: "+msg, http.StatusUnauthorized)
}
