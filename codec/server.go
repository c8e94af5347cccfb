package codec

import (
	"context"
	"crypto/hmac"
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
)

// CodecTokenEnv is the environment variable the worker reads the codec server's token from.
const CodecTokenEnv = "SANDBOXFLOW_CODEC_TOKEN"

// MinTokenLen is the shortest token the codec server accepts.
const MinTokenLen = 16

// SessionCookieName is the cookie the codec server's /login page sets, for browsers that cannot
// send the token as a header (the Temporal UI without OIDC).
const SessionCookieName = "sandboxflow_codec_session"

const (
	defaultMaxRequestBytes = 16 << 20
	sessionMaxAge          = 12 * time.Hour
	shutdownGrace          = 5 * time.Second
)

// ServerOptions configure a codec server.
type ServerOptions struct {
	// Token is the shared secret every /encode and /decode request must carry, as
	// "Authorization: Bearer <token>" or as the session cookie /login sets from it. Required: at
	// least MinTokenLen characters, no spaces.
	Token string

	// AllowedOrigins are the browser origins ("http://127.0.0.1:8233", scheme://host[:port], no
	// path) whose pages may call the server: the Temporal UI's. Requests from any other origin are
	// refused. Optional: defaults to none, which serves only clients that send no Origin header
	// (the temporal CLI with --codec-endpoint, Go clients).
	AllowedOrigins []string

	// MaxRequestBytes bounds a request body. Optional: defaults to 16 MiB.
	MaxRequestBytes int64

	// Logger receives one record for each refused request and each payload that cannot be
	// decoded; never a token, key or payload. Optional: defaults to slog.Default().
	Logger *slog.Logger
}

// Server is the codec server: an http.Handler that encrypts and decrypts payloads for Temporal's
// Web UI and the temporal CLI, the remote side of the Codec. See the package documentation for
// the paths and the authentication.
type Server struct {
	codec           *Codec
	tokenHash       [sha256.Size]byte
	sessionValue    string
	origins         map[string]bool
	maxRequestBytes int64
	logger          *slog.Logger
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
	s := &Server{
		codec:           NewCodec(ring),
		tokenHash:       sha256.Sum256([]byte(opts.Token)),
		sessionValue:    sessionValue(opts.Token),
		origins:         map[string]bool{},
		maxRequestBytes: opts.MaxRequestBytes,
		logger:          opts.Logger,
	}
	if s.maxRequestBytes <= 0 {
		s.maxRequestBytes = defaultMaxRequestBytes
	}
	if s.logger == nil {
		s.logger = slog.Default()
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

func sessionValue(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("sandboxflow codec session v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// ServeHTTP answers:
//   - POST .../encode and POST .../decode (any prefix, such as /{namespace}/decode): the Temporal
//     codec protocol, protobuf JSON Payloads in and out; the token is required;
//   - OPTIONS on those paths: the CORS preflight, for allowed origins only;
//   - GET /login: a form that takes the token; POST /login: sets the session cookie, so that the
//     Temporal UI (with codec includeCredentials) can call the server from a browser.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/login" {
		s.serveLogin(w, r)
		return
	}
	op := lastSegment(r.URL.Path)
	if op != "encode" && op != "decode" {
		http.NotFound(w, r)
		return
	}

	origin := r.Header.Get("Origin")
	if origin != "" {
		norm, err := normalizeOrigin(origin)
		if err != nil || !s.origins[norm] {
			s.logger.Warn("codec server: refused request from an origin that is not allowed", slog.String("origin", truncateForMessage(origin)), slog.String("path", r.URL.Path))
			http.Error(w, "origin not allowed", http.StatusForbidden)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Add("Vary", "Origin")
	}

	switch r.Method {
	case http.MethodOptions:
		h := w.Header()
		h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Authorization, Authorization-Extras, Content-Type, X-Namespace")
		h.Set("Access-Control-Max-Age", "600")
		if r.Header.Get("Access-Control-Request-Private-Network") == "true" && origin != "" {
			h.Set("Access-Control-Allow-Private-Network", "true")
		}
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "POST, OPTIONS")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}

	if !s.authorized(r) {
		s.logger.Warn("codec server: refused request without a valid token", slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr))
		w.Header().Set("WWW-Authenticate", `Bearer realm="sandboxflow codec"`)
		http.Error(w, "missing or wrong token: send Authorization: Bearer <token>", http.StatusUnauthorized)
		return
	}

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxRequestBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("request body over %d bytes", s.maxRequestBytes), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "read request body", http.StatusBadRequest)
		return
	}
	var in commonpb.Payloads
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &in); err != nil {
		http.Error(w, "request body is not protobuf JSON of temporal.api.common.v1.Payloads", http.StatusBadRequest)
		return
	}

	var out []*commonpb.Payload
	if op == "encode" {
		out, err = s.codec.Encode(in.Payloads)
	} else {
		out, err = s.codec.Decode(in.Payloads)
	}
	if err != nil {
		s.logger.Warn("codec server: "+op+" failed", slog.String("error", err.Error()), slog.String("namespace", r.Header.Get("X-Namespace")))
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := protojson.Marshal(&commonpb.Payloads{Payloads: out})
	if err != nil {
		http.Error(w, "marshal response", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(resp)
}

func lastSegment(p string) string {
	p = strings.TrimSuffix(p, "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// authorized reports whether r carries the token as a bearer header or the session cookie. Both
// comparisons take the same time whatever the guess.
func (s *Server) authorized(r *http.Request) bool {
	if scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		got := sha256.Sum256([]byte(strings.TrimSpace(token)))
		if subtle.ConstantTimeCompare(got[:], s.tokenHash[:]) == 1 {
			return true
		}
	}
	if c, err := r.Cookie(SessionCookieName); err == nil {
		return hmac.Equal([]byte(c.Value), []byte(s.sessionValue))
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

// serveLogin lets a browser trade the token for a session cookie. The cookie is HttpOnly and
// SameSite=Strict, so only same-site pages (the Temporal UI served from the same host) send it.
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
			s.logger.Warn("codec server: refused login with a wrong token", slog.String("remote", r.RemoteAddr))
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, loginPage, "Wrong token.")
			return
		}
		http.SetCookie(w, &http.Cookie{
			Name:     SessionCookieName,
			Value:    s.sessionValue,
			Path:     "/",
			MaxAge:   int(sessionMaxAge / time.Second),
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

// Serve serves on ln until ctx ends, then shuts down, giving open requests a few seconds. It
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
	}()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		<-stopped
		return nil
	}
	cancel()
	<-stopped
	return fmt.Errorf("codec server: serve: %w", err)
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
