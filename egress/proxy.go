package egress

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Defaults of Config.
const (
	DefaultMaxBytes         = 64 << 20
	DefaultMaxConns         = 64
	DefaultDialTimeout      = 10 * time.Second
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultIdleTimeout      = 2 * time.Minute
)

// RefusedHeader is the response header that carries the reason of a refusal, beside the reason
// phrase of the status line and the plain-text body.
const RefusedHeader = "X-Sandboxflow-Egress-Refused"

// Resolver looks names up for the proxy. *net.Resolver implements it; tests inject a fake so no
// real name is ever looked up.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc opens a TCP connection to address, always an IP and port ("203.0.113.7:443").
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Config is the egress policy of one run, with the worker's shared pieces.
type Config struct {
	// Allow is the run's checked allowlist (the request's egress, already covered by the worker's
	// --egress-allow). Empty refuses everything.
	Allow []guard.EgressPattern
	// PrivateOK are prefixes the operator lets through although they are loopback, private,
	// link-local and so on (--egress-private-ok). Unspecified, multicast and broadcast addresses
	// are refused whatever it says.
	PrivateOK []netip.Prefix
	// Secrets are the rules of the secrets the run named (Secrets.Select). A request to a host one
	// of them matches gets its header, over TLS to the upstream. Optional.
	Secrets []SecretRule
	// CA mints the certificates of intercepted hosts. Required when Secrets is not empty.
	CA *CA
	// RootCAs verifies upstream servers of intercepted and originated TLS. Optional: nil means
	// the worker's system roots.
	RootCAs *x509.CertPool
	// Resolver looks up allowed names. Optional: nil means net.DefaultResolver.
	Resolver Resolver
	// Dial connects to the checked IP. Optional: nil means a net.Dialer.
	Dial DialFunc
	// MaxBytes caps the bytes exchanged with upstreams, out and in together, over the whole run.
	// Optional: zero means DefaultMaxBytes (64 MiB).
	MaxBytes int64
	// MaxConns caps connection attempts over the whole run, refused ones included. Optional: zero
	// means DefaultMaxConns.
	MaxConns int
	// DialTimeout bounds one lookup and connect. Optional: zero means DefaultDialTimeout.
	DialTimeout time.Duration
	// HandshakeTimeout bounds reading a ClientHello and each TLS handshake. Optional: zero means
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a client connection. Optional: zero
	// means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Logger receives one record per attempt, without payloads or secret values. Optional: nil
	// discards.
	Logger *slog.Logger
}

// Attempt is one connection attempt in the audit (defined in guard so that guard.Result can
// carry it).
type Attempt = guard.EgressAttempt

// Report is the audit of one run.
type Report = guard.EgressReport

// Proxy is the filtering forward proxy of one run. Make it with New, feed it connections with
// Serve, and read its audit with Report once the run is over.
type Proxy struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	attempts []*Attempt
	dropped  int
	unlisted *Attempt // the latest attempt past the audit's bound
	tried    int
	used     int64
	report   Report
	conns    map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// New checks cfg, fills in its defaults and returns a proxy for one run.
func New(cfg Config) (*Proxy, error) {
	switch {
	case cfg.MaxBytes < 0:
		return nil, fmt.Errorf("egress: MaxBytes %d is negative", cfg.MaxBytes)
	case cfg.MaxConns < 0:
		return nil, fmt.Errorf("egress: MaxConns %d is negative", cfg.MaxConns)
	case len(cfg.Secrets) > 0 && cfg.CA == nil:
		return nil, fmt.Errorf("egress: secrets need a CA to intercept TLS")
	}
	for _, r := range cfg.Secrets {
		if r.value == "" {
			return nil, fmt.Errorf("egress: secret %q has no value; take rules from Secrets.Select", r.Name)
		}
	}
	cfg.MaxBytes = cmp.Or(cfg.MaxBytes, DefaultMaxBytes)
	cfg.MaxConns = cmp.Or(cfg.MaxConns, DefaultMaxConns)
	cfg.DialTimeout = cmp.Or(cfg.DialTimeout, DefaultDialTimeout)
	cfg.HandshakeTimeout = cmp.Or(cfg.HandshakeTimeout, DefaultHandshakeTimeout)
	cfg.IdleTimeout = cmp.Or(cfg.IdleTimeout, DefaultIdleTimeout)
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Dial == nil {
		cfg.Dial = (&net.Dialer{}).DialContext
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Proxy{cfg: cfg, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}, nil
}

// Intercepts reports whether the run has secrets, so the sandbox must trust the CA (see
// SandboxEnv and CA.CertPEM).
func (p *Proxy) Intercepts() bool { return len(p.cfg.Secrets) > 0 }

// Serve accepts connections from l and serves each as an HTTP proxy client until l fails or is
// closed. It returns nil when l was closed (net.ErrClosed) or the proxy was. Serve does not close
// l; Close ends the connections it started.
func (p *Proxy) Serve(l net.Listener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || p.isClosed() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("egress: accept: %w", err)
		}
		if !p.track(c, true) {
			c.Close()
			return nil
		}
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			p.serveClient(c)
		}()
	}
}

// Close ends every connection the proxy holds, refuses new ones and waits for its goroutines.
// The report stays readable.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return nil
}

// Report returns the audit so far: every attempt (up to the connection cap and one more), byte
// totals and which caps were reached. It never holds payloads or secret values.
func (p *Proxy) Report() Report {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.report
	r.Dropped = p.dropped
	r.Attempts = make([]Attempt, len(p.attempts))
	for i, a := range p.attempts {
		r.Attempts[i] = *a
		r.Attempts[i].Secrets = slices.Clone(a.Secrets)
	}
	return r
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// track adds c to the connections Close closes, unless the proxy is closed. With goroutine set it
// also counts c's goroutine, under the same lock, so Close never waits while a new one is being
// added.
func (p *Proxy) track(c net.Conn, goroutine bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	if goroutine {
		p.wg.Add(1)
	}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// maxHeaderBytes bounds a request's head (request line and headers) read from the sandbox.
const maxHeaderBytes = 64 << 10

// serveClient reads one request from a client connection, CONNECT or absolute-form http://, and
// serves it. A plain http:// request closes the connection afterwards.
func (p *Proxy) serveClient(c net.Conn) {
	lr := &io.LimitedReader{R: c, N: maxHeaderBytes}
	br := bufio.NewReader(lr)
	c.SetReadDeadline(time.Now().Add(p.cfg.IdleTimeout))
	req, err := http.ReadRequest(br)
	if err != nil {
		var ne net.Error
		if lr.N <= 0 {
			writeRefusal(c, http.StatusRequestHeaderFieldsTooLarge, "request head too large")
		} else if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, net.ErrClosed) && !(errors.As(err, &ne) && ne.Timeout()) {
			writeRefusal(c, http.StatusBadRequest, "malformed proxy request")
		}
		return
	}
	lr.N = math.MaxInt64
	c.SetReadDeadline(time.Time{})
	if req.Method == http.MethodConnect {
		p.handleConnect(c, br, req)
		return
	}
	p.handleHTTP(c, req)
}

// target is a parsed destination: a normalized name or an IP literal, and a port.
type target struct {
	name string
	ip   netip.Addr
	port uint16
	raw  string
}

func (t target) host() string {
	if t.name != "" {
		return t.name
	}
	if t.ip.IsValid() {
		return t.ip.String()
	}
	return t.raw
}

func parseTarget(host, port string, defPort uint16) (target, error) {
	t := target{raw: printable(host, 255)}
	if port == "" {
		t.port = defPort
	} else {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return t, fmt.Errorf("bad port %q", printable(port, 8))
		}
		t.port = uint16(n)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return t, fmt.Errorf("an IPv6 zone is not allowed")
		}
		t.ip = a.Unmap()
		return t, nil
	}
	name, err := guard.NormalizeEgressName(host)
	if err != nil {
		return t, fmt.Errorf("bad host: %w", err)
	}
	t.name = name
	return t, nil
}

// printable keeps at most n bytes of s and replaces anything but printable ASCII with '?', so a
// client's text can go into a status line, a header or a log.
func printable(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}

// secretsFor returns the rules that apply to a name on port.
func (p *Proxy) secretsFor(t target, port uint16) []SecretRule {
	if t.name == "" {
		return nil
	}
	var out []SecretRule
	for _, r := range p.cfg.Secrets {
		if r.Pattern.MatchName(t.name, port) {
			out = append(out, r)
		}
	}
	return out
}

func secretNames(rules []SecretRule) []string {
	var names []string
	for _, r := range rules {
		names = append(names, r.Name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// begin records a new attempt, or returns a detached one when the audit is full.
func (p *Proxy) begin(kind string, t target) *Attempt {
	a := &Attempt{Time: time.Now().UTC(), Kind: kind, Host: t.host(), Port: t.port}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tried++
	if len(p.attempts) <= p.cfg.MaxConns {
		p.attempts = append(p.attempts, a)
	} else {
		p.dropped++
		p.unlisted = a
	}
	return a
}

// decide applies the policy to t. It returns the address to dial, or a refusal reason, which it
// also records.
func (p *Proxy) decide(a *Attempt, t target, parseErr error) (netip.AddrPort, string) {
	refuse := func(reason string) (netip.AddrPort, string) {
		p.mu.Lock()
		a.Reason = reason
		unlisted := p.unlisted == a
		p.mu.Unlock()
		if unlisted {
			return netip.AddrPort{}, reason // past the cap: neither listed nor logged
		}
		p.cfg.Logger.Warn("egress refused", "kind", a.Kind, "host", a.Host, "port", a.Port, "ip", a.IP, "reason", reason)
		return netip.AddrPort{}, reason
	}
	p.mu.Lock()
	tried, closed, used := p.tried, p.closed, p.used
	if tried > p.cfg.MaxConns {
		p.report.ConnCapReached = true
	}
	if used >= p.cfg.MaxBytes {
		p.report.ByteCapReached = true
	}
	p.mu.Unlock()
	switch {
	case closed:
		return refuse("the run has ended")
	case tried > p.cfg.MaxConns:
		return refuse(fmt.Sprintf("connection cap reached (%d per run)", p.cfg.MaxConns))
	case used >= p.cfg.MaxBytes:
		return refuse(fmt.Sprintf("byte cap reached (%d bytes per run)", p.cfg.MaxBytes))
	case parseErr != nil:
		return refuse(printable(parseErr.Error(), 200))
	}
	var addrs []netip.Addr
	if t.ip.IsValid() {
		if !slices.ContainsFunc(p.cfg.Allow, func(g guard.EgressPattern) bool { return g.MatchAddr(t.ip, t.port) }) {
			return refuse("not in the run's egress allowlist")
		}
		addrs = []netip.Addr{t.ip}
	} else {
		if !slices.ContainsFunc(p.cfg.Allow, func(g guard.EgressPattern) bool { return g.MatchName(t.name, t.port) }) {
			return refuse("not in the run's egress allowlist")
		}
		ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
		found, err := p.cfg.Resolver.LookupNetIP(ctx, "ip", t.name)
		cancel()
		if err != nil || len(found) == 0 {
			return refuse("the name did not resolve")
		}
		addrs = found
	}
	first := ""
	for _, addr := range addrs {
		addr = addr.Unmap()
		why := classify(addr, p.cfg.PrivateOK)
		if why == "" {
			p.mu.Lock()
			a.IP, a.Allowed = addr.String(), true
			p.mu.Unlock()
			p.cfg.Logger.Info("egress allowed", "kind", a.Kind, "host", a.Host, "port", a.Port, "ip", a.IP)
			return netip.AddrPortFrom(addr, t.port), ""
		}
		if first == "" {
			first = why
			p.mu.Lock()
			a.IP = addr.String()
			p.mu.Unlock()
		}
	}
	return refuse("resolves to a refused address: " + first)
}

// fail records why an allowed attempt failed later, keeping the first reason.
func (p *Proxy) fail(a *Attempt, reason string) {
	p.mu.Lock()
	if a.Reason == "" {
		a.Reason = reason
	}
	p.mu.Unlock()
	p.cfg.Logger.Warn("egress failed", "kind", a.Kind, "host", a.Host, "port", a.Port, "ip", a.IP, "reason", reason)
}

// refuseLater marks an attempt refused after the first check (SNI, Host header).
func (p *Proxy) refuseLater(a *Attempt, reason string) {
	p.mu.Lock()
	a.Allowed = false
	a.Reason = reason
	p.mu.Unlock()
	p.cfg.Logger.Warn("egress refused", "kind", a.Kind, "host", a.Host, "port", a.Port, "ip", a.IP, "reason", reason)
}

func (p *Proxy) setTLS(a *Attempt, mode string, rules []SecretRule) {
	p.mu.Lock()
	a.TLS = mode
	a.Secrets = secretNames(rules)
	p.mu.Unlock()
}

// dial connects to dst and wraps the connection so its bytes count against the cap.
func (p *Proxy) dial(a *Attempt, dst netip.AddrPort) (*countingConn, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
	defer cancel()
	c, err := p.cfg.Dial(ctx, "tcp", dst.String())
	if err != nil {
		p.fail(a, "upstream unreachable")
		return nil, fmt.Errorf("egress: dial %s: %w", dst, err)
	}
	cc := &countingConn{Conn: c, p: p, a: a}
	if !p.track(cc, false) {
		c.Close()
		return nil, fmt.Errorf("egress: the run has ended")
	}
	return cc, nil
}

func (p *Proxy) upstreamTLS(a *Attempt, up net.Conn, name string) (*tls.Conn, error) {
	tc := tls.Client(up, &tls.Config{
		ServerName: name,
		RootCAs:    p.cfg.RootCAs,
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.HandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		p.fail(a, "upstream TLS handshake failed")
		return nil, fmt.Errorf("egress: upstream tls %s: %w", name, err)
	}
	return tc, nil
}
