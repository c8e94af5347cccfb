package inbox

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/sandboxflow/sandboxflow/internal/httpserve"
	"github.com/sandboxflow/sandboxflow/internal/loopback"
)

// Listen says where and how the inbox is served.
type Listen struct {
	// Addr is host:port. Required. A host other than loopback (127.0.0.0/8, ::1, localhost)
	// needs TLS.
	Addr string
	// CertFile and KeyFile are a TLS certificate and key (PEM). Optional on loopback.
	CertFile, KeyFile string
	// Origin is the URL reviewers open. Optional: http://localhost:PORT on loopback without
	// TLS; with TLS, https://HOST:PORT when HOST is a name (an IP address needs Origin).
	Origin string
}

// Check validates l and returns the origin to serve.
func (l Listen) Check() (string, error) {
	host, port, err := net.SplitHostPort(l.Addr)
	if err != nil {
		return "", fmt.Errorf("inbox: --listen %q: %w", l.Addr, err)
	}
	useTLS := l.CertFile != "" || l.KeyFile != ""
	switch {
	case (l.CertFile == "") != (l.KeyFile == ""):
		return "", errors.New("inbox: give both --tls-cert and --tls-key")
	case !loopback.Host(host) && !useTLS:
		return "", fmt.Errorf("inbox: --listen %s is not a loopback address: serve it over TLS with --tls-cert and --tls-key", l.Addr)
	case l.Origin != "":
		return l.Origin, nil
	case !useTLS:
		return "http://localhost:" + port, nil
	case host == "" || net.ParseIP(host) != nil:
		return "", fmt.Errorf("inbox: --listen %s: give --origin https://NAME:%s, the name in the certificate (a passkey needs a host name)", l.Addr, port)
	}
	return "https://" + net.JoinHostPort(host, port), nil
}

// parseOrigin checks the URL reviewers open (Config.Origin) and returns it as scheme://host[:port],
// with the passkeys' relying party id (its host, a name) and whether it is https. Plain http is
// only for localhost, the one name browsers treat as a secure context.
func parseOrigin(s string) (origin, rpID string, secure bool, err error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") {
		return "", "", false, fmt.Errorf("inbox: origin %q: want scheme://host[:port]", s)
	}
	origin, rpID = u.Scheme+"://"+u.Host, u.Hostname()
	if net.ParseIP(rpID) != nil {
		return "", "", false, fmt.Errorf("inbox: origin %s: a passkey's relying party cannot be an IP address; use a host name (http://localhost:%s for loopback)", origin, u.Port())
	}
	if u.Scheme == "http" && rpID != "localhost" {
		return "", "", false, fmt.Errorf("inbox: origin %s: http is only for localhost; serve TLS", origin)
	}
	return origin, rpID, u.Scheme == "https", nil
}

// Serve serves h on l until ctx ends, then shuts down (httpserve.Grace).
func Serve(ctx context.Context, l Listen, h http.Handler, ready func(addr string)) error {
	ln, err := net.Listen("tcp", l.Addr)
	if err != nil {
		return fmt.Errorf("inbox: listen on %s: %w", l.Addr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	if l.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(l.CertFile, l.KeyFile)
		if err != nil {
			ln.Close()
			return fmt.Errorf("inbox: TLS: %w", err)
		}
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	}
	if ready != nil {
		ready(ln.Addr().String())
	}
	if err := httpserve.Serve(ctx, srv, ln); err != nil {
		return fmt.Errorf("inbox: serve: %w", err)
	}
	return nil
}
