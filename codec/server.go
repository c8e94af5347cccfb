package codec

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sandboxflow/sandboxflow/internal/httpserve"
)

// CodecTokenEnv is the environment variable the worker reads the codec server's token from.
const CodecTokenEnv = "SANDBOXFLOW_CODEC_TOKEN"

// MinTokenLen is the shortest token the codec server accepts.
const MinTokenLen = 16

// SignInCookieName is the cookie the codec server's /login page sets, for browsers that cannot
// send the token as a header (the Temporal UI without OIDC).
const SignInCookieName = "sandboxflow_codec_session"

const (
	defaultMaxRequestBytes  = 4 << 20
	defaultMaxPayloads      = 4096
	defaultMaxResponseBytes = 8 << 20
	defaultMaxConcurrent    = 4
	defaultSignInTTL        = 8 * time.Hour
	defaultMaxSignIns       = 64
	defaultLogInterval      = 10 * time.Second
)

// ServerOptions configure a codec server.
type ServerOptions struct {
	// Token is the shared secret every /encode and /decode request must carry, as
	// "Authorization: Bearer <token>" or as the sign-in cookie /login sets from it. Required: at
	// least MinTokenLen characters, no spaces.
	Token string

	// AllowedOrigins are the browser origins ("http://127.0.0.1:8233", scheme://host[:port], no
	// path) whose pages may call the server: the Temporal UI's. Requests from any other origin are
	// refused. Optional: defaults to none, which serves only clients that send no Origin header
	// (the temporal CLI with --codec-endpoint, Go clients).
	AllowedOrigins []string

	// MaxRequestBytes bounds a request body. Optional: defaults to 4 MiB, Temporal's gRPC message
	// limit, which no history payload exceeds.
	MaxRequestBytes int64

	// MaxPayloads bounds the payloads of one /encode or /decode request, counted before any is
	// decoded. Optional: defaults to 4096.
	MaxPayloads int

	// MaxResponseBytes bounds a response body. Optional: defaults to 8 MiB.
	MaxResponseBytes int64

	// MaxConcurrent bounds the /encode and /decode requests served at once; more are refused with
	// 503 at once. Optional: defaults to 4.
	MaxConcurrent int

	// SignInTTL is how long a sign-in from /login lasts. Optional: defaults to 8 hours.
	SignInTTL time.Duration

	// MaxSignIns bounds the sign-ins held; a login past it ends the oldest. Optional: defaults
	// to 64.
	MaxSignIns int

	// LogInterval is the shortest time between two records of refused requests; refusals in
	// between are counted in the next record. Optional: defaults to 10 seconds.
	LogInterval time.Duration

	// Logger receives one record for each refused request and each payload that cannot be
	// decoded; never a token, key or payload. Optional: defaults to slog.Default().
	Logger *slog.Logger
}

// Server is the codec server: an http.Handler that encrypts and decrypts payloads for Temporal's
// Web UI and the temporal CLI, the remote side of the Codec. See the package documentation for
// the paths and the authentication.
type Server struct {
	codec     *Codec
	tokenHash [sha256.Size]byte
	origins   map[string]bool
	opts      ServerOptions
	logger    *slog.Logger
	signIns   *signIns
	refusals  *refusalLog
	slots     chan struct{}
}

// NewServer returns a codec server over ring. It refuses a missing or short token and a malformed
// origin. A server over an empty ring still answers: /encode returns payloads unchanged and
// /decode reports which key is missing.
func NewServer(ring *KeyRing, opts ServerOptions) (*Server, error) {
	if len(opts.Token) < MinTokenLen {
		return nil, fmt.Errorf("codec server: token must be at least %d characters; set --codec-token or %s", MinTokenLen, CodecTokenEnv)
	}
	if strings.ContainsAny(opts.Token, " \t\r\n") {
		return nil, errors.New("codec server: token must not contain spaces")
	}
	opts = opts.withDefaults()
	s := &Server{
		codec:     NewCodec(ring),
		tokenHash: sha256.Sum256([]byte(opts.Token)),
		origins:   map[string]bool{},
		opts:      opts,
		logger:    opts.Logger,
		signIns:   newSignIns(opts.SignInTTL, opts.MaxSignIns),
		refusals:  &refusalLog{logger: opts.Logger, interval: opts.LogInterval},
		slots:     make(chan struct{}, opts.MaxConcurrent),
	}
	for _, o := range opts.AllowedOrigins {
		norm, err := normalizeOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("codec server: allowed origin %q: %w", o, err)
		}
		s.origins[norm] = true
	}
	return s, nil
}

// NewToken returns a random token for the codec server (32 bytes from crypto/rand, base64url).
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("codec server: random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func normalizeOrigin(o string) (string, error) {
	u, err := url.Parse(strings.TrimSuffix(strings.TrimSpace(o), "/"))
	if err != nil {
		return "", fmt.Errorf("parse: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", errors.New("want scheme://host[:port] with scheme http or https")
	}
	if u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", errors.New("want scheme://host[:port] and nothing else")
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

func (o ServerOptions) withDefaults() ServerOptions {
	o.MaxRequestBytes = positiveOr(o.MaxRequestBytes, defaultMaxRequestBytes)
	o.MaxPayloads = positiveOr(o.MaxPayloads, defaultMaxPayloads)
	o.MaxResponseBytes = positiveOr(o.MaxResponseBytes, defaultMaxResponseBytes)
	o.MaxConcurrent = positiveOr(o.MaxConcurrent, defaultMaxConcurrent)
	o.SignInTTL = positiveOr(o.SignInTTL, defaultSignInTTL)
	o.MaxSignIns = positiveOr(o.MaxSignIns, defaultMaxSignIns)
	o.LogInterval = positiveOr(o.LogInterval, defaultLogInterval)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// positiveOr returns v, or def when v is zero or negative (both mean unset).
func positiveOr[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// ServeHTTP answers:
//   - POST .../encode and POST .../decode (any prefix, such as /{namespace}/decode): the Temporal
//     codec protocol, protobuf JSON Payloads in and out; the token or a sign-in is required;
//   - OPTIONS on those paths: the CORS preflight, for allowed origins only;
//   - GET /login: a form that takes the token; POST /login: starts a sign-in and sets its cookie,
//     so that the Temporal UI (with codec includeCredentials) can call the server from a browser;
//   - POST /logout: ends the sign-in of the cookie.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/login":
		s.serveLogin(w, r)
		return
	case "/logout":
		s.serveLogout(w, r)
		return
	}
	op := lastSegment(r.URL.Path)
	if op != "encode" && op != "decode" {
		http.NotFound(w, r)
		return
	}
	if !s.corsAllowed(w, r) {
		return
	}
	switch r.Method {
	case http.MethodOptions:
		s.servePreflight(w, r)
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "POST, OPTIONS")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !s.authorized(r) {
		s.refusals.refuse("codec server: refused request without a valid token", r)
		w.Header().Set("WWW-Authenticate", `Bearer realm="sandboxflow codec"`)
		http.Error(w, "missing or wrong token: send Authorization: Bearer <token>", http.StatusUnauthorized)
		return
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		s.refusals.refuse("codec server: refused request over the concurrency limit", r)
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("busy: %d requests are being served", cap(s.slots)), http.StatusServiceUnavailable)
		return
	}
	s.serveCodec(w, r, op)
}

// corsAllowed checks the Origin header: no origin, or an allowed one (whose CORS headers it
// sets). It answers 403 and returns false for any other.
func (s *Server) corsAllowed(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	norm, err := normalizeOrigin(origin)
	if err != nil || !s.origins[norm] {
		s.refusals.refuse("codec server: refused request from an origin that is not allowed", r)
		http.Error(w, "origin not allowed", http.StatusForbidden)
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Credentials", "true")
	h.Add("Vary", "Origin")
	return true
}

func (s *Server) servePreflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Authorization, Authorization-Extras, Content-Type, X-Namespace")
	h.Set("Access-Control-Max-Age", "600")
	if r.Header.Get("Access-Control-Request-Private-Network") == "true" && r.Header.Get("Origin") != "" {
		h.Set("Access-Control-Allow-Private-Network", "true")
	}
	w.WriteHeader(http.StatusNoContent)
}

// serveCodec encodes or decodes the request's payloads within the server's limits on request
// size, payload count and response size.
func (s *Server) serveCodec(w http.ResponseWriter, r *http.Request, op string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxRequestBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.refusals.refuse("codec server: refused request over the size limit", r)
			http.Error(w, fmt.Sprintf("request body over %d bytes", s.opts.MaxRequestBytes), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "read request body", http.StatusBadRequest)
		return
	}
	if n := countPayloads(body, s.opts.MaxPayloads); n > s.opts.MaxPayloads {
		s.refusals.refuse("codec server: refused request over the payload count limit", r)
		http.Error(w, fmt.Sprintf("request holds over %d payloads", s.opts.MaxPayloads), http.StatusRequestEntityTooLarge)
		return
	}
	var in commonpb.Payloads
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &in); err != nil {
		http.Error(w, "request body is not protobuf JSON of temporal.api.common.v1.Payloads", http.StatusBadRequest)
		return
	}
	body = nil
	var out []*commonpb.Payload
	if op == "encode" {
		out, err = s.codec.Encode(in.Payloads)
	} else {
		out, err = s.codec.Decode(in.Payloads)
	}
	if err != nil {
		s.logger.Warn("codec server: "+op+" failed", slog.String("error", err.Error()), slog.String("namespace", truncateForMessage(r.Header.Get("X-Namespace"))))
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp := &commonpb.Payloads{Payloads: out}
	// protobuf JSON carries bytes as base64: 4/3 of the binary size, plus field names.
	if est := int64(proto.Size(resp))*4/3 + int64(len(out))*64; est > s.opts.MaxResponseBytes {
		s.refusals.refuse("codec server: refused request whose response is over the size limit", r)
		http.Error(w, fmt.Sprintf("response would be over %d bytes; send fewer payloads", s.opts.MaxResponseBytes), http.StatusRequestEntityTooLarge)
		return
	}
	b, err := protojson.Marshal(resp)
	if err != nil {
		http.Error(w, "marshal response", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

func lastSegment(p string) string {
	p = strings.TrimSuffix(p, "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// authorized reports whether r carries the token as a bearer header (compared in constant time)
// or the cookie of a live sign-in started on the port r came in on.
func (s *Server) authorized(r *http.Request) bool {
	if scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		got := sha256.Sum256([]byte(strings.TrimSpace(token)))
		if subtle.ConstantTimeCompare(got[:], s.tokenHash[:]) == 1 {
			return true
		}
	}
	if c, err := r.Cookie(cookieName(r)); err == nil {
		return s.signIns.valid(c.Value, localPort(r))
	}
	return false
}

const loginPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>sandboxflow codec server</title></head>
<body>
<h1>sandboxflow codec server</h1>
<p>%s</p>
<form method="post" action="/login">
<label>Codec token <input type="password" name="token" autocomplete="off" autofocus></label>
<button type="submit">Sign in</button>
</form>
</body></html>
`

// serveLogin lets a browser trade the token for a sign-in: a random id, held by the server with
// an expiry, in a cookie that is HttpOnly and SameSite=Strict and named for the server's port.
func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; form-action 'self'")
	w.Header().Set("X-Frame-Options", "DENY")
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, loginPage, html.EscapeString("Enter the codec token so that the Temporal UI on this host can decode payloads in this browser."))
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 4096)
		token := r.PostFormValue("token")
		got := sha256.Sum256([]byte(token))
		if subtle.ConstantTimeCompare(got[:], s.tokenHash[:]) != 1 {
			s.refusals.refuse("codec server: refused login with a wrong token", r)
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, loginPage, "Wrong token.")
			return
		}
		id, err := s.signIns.start(localPort(r))
		if err != nil {
			http.Error(w, "start a session", http.StatusInternalServerError)
			return
		}
		http.SetCookie(w, &http.Cookie{
			Name:     cookieName(r),
			Value:    id,
			Path:     "/",
			MaxAge:   int(s.opts.SignInTTL / time.Second),
			HttpOnly: true,
			Secure:   r.TLS != nil,
			SameSite: http.SameSiteStrictMode,
		})
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "Signed in. The Temporal UI on this host can now decode payloads in this browser; reload its page.")
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// ListenAndServe listens on addr (use a loopback address such as 127.0.0.1:8234 unless a TLS proxy
// stands in front: the token travels in the clear over plain HTTP) and serves until ctx ends.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("codec server: listen on %s: %w", addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends, then shuts down, giving open requests httpserve.Grace. It
// closes ln. It returns nil after ctx ends, or the error that stopped the server.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if !isLoopback(ln.Addr()) {
		s.logger.Warn("codec server: listening on a non-loopback address over plain HTTP; the token and decoded payloads cross the network unencrypted unless a TLS proxy stands in front", slog.String("addr", ln.Addr().String()))
	}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	if err := httpserve.Serve(ctx, srv, ln); err != nil {
		return fmt.Errorf("codec server: serve: %w", err)
	}
	return nil
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
