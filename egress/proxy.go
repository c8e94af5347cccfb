package egress

import (
	"bufio"
	"bytes"
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
	"github.com/sandboxflow/sandboxflow/internal/defaults"
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
	defaults.Zero(&cfg, Config{
		MaxBytes: DefaultMaxBytes, MaxConns: DefaultMaxConns, DialTimeout: DefaultDialTimeout,
		HandshakeTimeout: DefaultHandshakeTimeout, IdleTimeout: DefaultIdleTimeout,
	})
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

// handleConnect serves a CONNECT: the policy, then the ClientHello's SNI, then a tunnel, or, for
// a host with a secret, TLS interception.
func (p *Proxy) handleConnect(c net.Conn, br *bufio.Reader, req *http.Request) {
	host, port, err := net.SplitHostPort(req.RequestURI)
	var t target
	if err != nil {
		t, err = target{raw: printable(req.RequestURI, 255)}, fmt.Errorf("CONNECT target must be host:port")
	} else {
		t, err = parseTarget(host, port, 0)
	}
	a := p.begin("connect", t)
	dst, reason := p.decide(a, t, err)
	if reason != "" {
		writeRefusal(c, http.StatusForbidden, reason)
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		p.fail(a, "client went away")
		return
	}
	c.SetReadDeadline(time.Now().Add(p.cfg.HandshakeTimeout))
	sni, hello, err := peekClientHello(br)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		p.refuseLater(a, "not a TLS ClientHello: CONNECT carries TLS only")
		c.Write(tlsAlertAccessDenied)
		return
	}
	switch {
	case t.ip.IsValid() && sni != "":
		p.refuseLater(a, "TLS SNI names a host but the CONNECT target is an IP address")
		c.Write(tlsAlertAccessDenied)
		return
	case t.name != "" && sni == "":
		p.refuseLater(a, "TLS ClientHello has no SNI")
		c.Write(tlsAlertAccessDenied)
		return
	case t.name != "":
		if n, err := guard.NormalizeEgressName(sni); err != nil || n != t.name {
			p.refuseLater(a, fmt.Sprintf("TLS SNI %q does not match the CONNECT host", printable(sni, 255)))
			c.Write(tlsAlertAccessDenied)
			return
		}
	}
	client := &prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(hello), br)}
	if rules := p.secretsFor(t, t.port); len(rules) > 0 {
		p.setTLS(a, "intercepted", rules)
		p.intercept(client, a, t, dst, rules)
		return
	}
	p.tunnel(client, a, dst)
}

// tlsAlertAccessDenied is a fatal TLS alert record (access_denied), sent to a client whose
// ClientHello was refused so its TLS library says why.
var tlsAlertAccessDenied = []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31}

func (p *Proxy) tunnel(client net.Conn, a *Attempt, dst netip.AddrPort) {
	up, err := p.dial(a, dst)
	if err != nil {
		return
	}
	defer p.untrack(up)
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(up, client)
		up.CloseWrite()
	}()
	io.Copy(client, up)
	client.Close()
	up.Close()
	<-done
}

// intercept terminates the client's TLS with a minted certificate, and forwards each request over
// TLS to the upstream with the secrets' headers.
func (p *Proxy) intercept(client net.Conn, a *Attempt, t target, dst netip.AddrPort, rules []SecretRule) {
	leaf, err := p.cfg.CA.leaf(t.name, time.Now())
	if err != nil {
		p.fail(a, "could not mint a certificate")
		return
	}
	tc := tls.Server(client, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.HandshakeTimeout)
	err = tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		p.fail(a, "client TLS handshake failed (does the sandbox trust the egress CA?)")
		return
	}
	defer tc.Close()
	up, err := p.dial(a, dst)
	if err != nil {
		writeRefusal(tc, http.StatusBadGateway, "upstream unreachable")
		return
	}
	defer p.untrack(up)
	utc, err := p.upstreamTLS(a, up, t.name)
	if err != nil {
		writeRefusal(tc, http.StatusBadGateway, "upstream TLS handshake failed")
		return
	}
	lr := &io.LimitedReader{R: tc}
	cbr, ubr := bufio.NewReader(lr), bufio.NewReader(utc)
	for {
		lr.N = maxHeaderBytes
		tc.SetReadDeadline(time.Now().Add(p.cfg.IdleTimeout))
		req, err := http.ReadRequest(cbr)
		if err != nil {
			return
		}
		lr.N = math.MaxInt64
		tc.SetReadDeadline(time.Time{})
		if h, err := requestHost(req.Host); err != nil || h != t.name {
			p.refuseLater(a, fmt.Sprintf("Host header %q does not match the CONNECT host", printable(req.Host, 255)))
			writeRefusal(tc, http.StatusMisdirectedRequest, "Host header does not match the CONNECT host")
			return
		}
		prepareOutgoing(req, rules)
		if !p.exchange(tc, utc, ubr, req, a, false) || req.Close {
			return
		}
	}
}

// requestHost normalizes the host of a Host header, without its port.
func requestHost(hostport string) (string, error) {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return guard.NormalizeEgressName(host)
}

// hopHeaders are dropped from forwarded requests: they belong to one hop, or to the proxy.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authorization", "Proxy-Authenticate",
	"Te", "Trailer", "Upgrade",
}

// prepareOutgoing drops hop-by-hop headers and sets the secrets' headers, replacing any the
// client sent under the same names.
func prepareOutgoing(req *http.Request, rules []SecretRule) {
	for _, f := range req.Header.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			req.Header.Del(strings.TrimSpace(name))
		}
	}
	for _, h := range hopHeaders {
		req.Header.Del(h)
	}
	for _, r := range rules {
		req.Header.Del(r.Header)
	}
	for _, r := range rules {
		req.Header.Add(r.Header, string(r.value))
	}
}

// exchange sends one request upstream and copies the response back; closing makes the response
// tell the client the connection ends. It reports whether both connections may carry another
// request.
func (p *Proxy) exchange(client io.Writer, up io.Writer, ubr *bufio.Reader, req *http.Request, a *Attempt, closing bool) bool {
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		req.Header.Del("Expect")
		if _, err := io.WriteString(client, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return false
		}
	}
	if err := req.Write(up); err != nil {
		p.fail(a, "sending the request upstream failed")
		if !errors.Is(err, errByteCap) {
			writeRefusal(client, http.StatusBadGateway, "sending the request upstream failed")
		}
		return false
	}
	for {
		resp, err := http.ReadResponse(ubr, req)
		if err != nil {
			if !errors.Is(err, errByteCap) {
				p.fail(a, "no valid response from upstream")
				writeRefusal(client, http.StatusBadGateway, "no valid response from upstream")
			}
			return false
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			if err := resp.Write(client); err != nil {
				return false
			}
			continue
		}
		resp.Close = resp.Close || closing
		err = resp.Write(client)
		resp.Body.Close()
		return err == nil && !resp.Close && resp.StatusCode != http.StatusSwitchingProtocols
	}
}

// handleHTTP forwards one absolute-form http:// request. A request to a host with a secret goes
// upstream over TLS (port 80 becomes 443; any other port keeps its number). The client
// connection is closed afterwards.
func (p *Proxy) handleHTTP(c net.Conn, req *http.Request) {
	if !req.URL.IsAbs() || req.URL.Scheme != "http" || req.URL.Host == "" {
		writeRefusal(c, http.StatusBadRequest, "send absolute http:// URLs, or CONNECT for https")
		return
	}
	t, perr := parseTarget(req.URL.Hostname(), req.URL.Port(), 80)
	rules, mode := []SecretRule(nil), ""
	if perr == nil {
		upPort := t.port
		if upPort == 80 {
			upPort = 443
		}
		if rules = p.secretsFor(t, upPort); len(rules) > 0 {
			t.port, mode = upPort, "originated"
		}
	}
	a := p.begin("http", t)
	dst, reason := p.decide(a, t, perr)
	if reason != "" {
		writeRefusal(c, http.StatusForbidden, reason)
		return
	}
	p.setTLS(a, mode, rules)
	cu, err := p.dial(a, dst)
	if err != nil {
		writeRefusal(c, http.StatusBadGateway, "upstream unreachable")
		return
	}
	defer p.untrack(cu)
	var up net.Conn = cu
	if mode == "originated" {
		tc, err := p.upstreamTLS(a, cu, t.name)
		if err != nil {
			writeRefusal(c, http.StatusBadGateway, "upstream TLS handshake failed")
			return
		}
		up = tc
	}
	req.Host = req.URL.Host
	req.Close = true
	prepareOutgoing(req, rules)
	p.exchange(c, up, bufio.NewReader(up), req, a, true)
}

// writeRefusal writes a complete error response that says why: in the status line's reason
// phrase (what urllib and curl print), in RefusedHeader and in the body.
func writeRefusal(w io.Writer, code int, reason string) {
	reason = printable(reason, 300)
	body := "sandboxflow egress: " + reason + "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s (sandboxflow egress: %s)\r\n"+
		"Content-Type: text/plain; charset=utf-8\r\n%s: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		code, http.StatusText(code), reason, RefusedHeader, reason, len(body), body)
}

// errByteCap is returned by a counting connection once the run's byte cap is spent.
var errByteCap = errors.New("egress: byte cap reached")

// countingConn counts an upstream connection's bytes against the run's cap and the attempt, and
// cuts it when the cap is spent.
type countingConn struct {
	net.Conn
	p *Proxy
	a *Attempt
}

// take reserves up to n bytes of the budget and returns how many it may move; settle returns
// what was reserved but not moved, so concurrent connections never overshoot the cap.
func (c *countingConn) take(n int) int {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	left := c.p.cfg.MaxBytes - c.p.used
	if left <= 0 {
		return 0
	}
	if int64(n) > left {
		n = int(left)
	}
	c.p.used += int64(n)
	return n
}

func (c *countingConn) settle(reserved, out, in int) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	c.p.used -= int64(reserved - out - in)
	c.a.BytesOut += int64(out)
	c.a.BytesIn += int64(in)
	c.p.report.BytesOut += int64(out)
	c.p.report.BytesIn += int64(in)
}

func (c *countingConn) cut() error {
	c.p.mu.Lock()
	c.p.report.ByteCapReached = true
	if c.a.Reason == "" {
		c.a.Reason = fmt.Sprintf("cut: byte cap reached (%d bytes per run)", c.p.cfg.MaxBytes)
	}
	c.p.mu.Unlock()
	c.p.cfg.Logger.Warn("egress cut", "host", c.a.Host, "port", c.a.Port, "reason", "byte cap")
	c.Conn.Close()
	return errByteCap
}

func (c *countingConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return c.Conn.Read(b)
	}
	allow := c.take(len(b))
	if allow == 0 {
		return 0, c.cut()
	}
	n, err := c.Conn.Read(b[:allow])
	c.settle(allow, 0, n)
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	written := 0
	for written < len(b) {
		allow := c.take(len(b) - written)
		if allow == 0 {
			return written, c.cut()
		}
		n, err := c.Conn.Write(b[written : written+allow])
		c.settle(allow, n, 0)
		written += n
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// CloseWrite half-closes the upstream connection when it can.
func (c *countingConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// prefixConn reads from r (bytes already read from Conn, then the rest) and writes to Conn.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// peekClientHello reads a TLS ClientHello from r and returns its SNI (as sent) and every byte it
// read, to be replayed. crypto/tls does the parsing; the handshake is abandoned at once.
func peekClientHello(r io.Reader) (string, []byte, error) {
	rec := &recordingConn{r: r}
	var sni string
	seen := false
	err := tls.Server(rec, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni, seen = h.ServerName, true
			return nil, errHelloRead
		},
	}).Handshake()
	if !seen {
		return "", rec.buf.Bytes(), fmt.Errorf("egress: read ClientHello: %w", err)
	}
	return sni, rec.buf.Bytes(), nil
}

var errHelloRead = errors.New("egress: ClientHello read")

// recordingConn is a read-only net.Conn that keeps what it reads and drops what is written.
type recordingConn struct {
	r   io.Reader
	buf bytes.Buffer
}

func (c *recordingConn) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.buf.Write(b[:n])
	return n, err
}
func (c *recordingConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c *recordingConn) Close() error                     { return nil }
func (c *recordingConn) LocalAddr() net.Addr              { return stubAddr{} }
func (c *recordingConn) RemoteAddr() net.Addr             { return stubAddr{} }
func (c *recordingConn) SetDeadline(time.Time) error      { return nil }
func (c *recordingConn) SetReadDeadline(time.Time) error  { return nil }
func (c *recordingConn) SetWriteDeadline(time.Time) error { return nil }

type stubAddr struct{}

func (stubAddr) Network() string { return "egress" }
func (stubAddr) String() string  { return "egress" }
