package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// fakeResolver maps test names to addresses; a name may answer differently on each call.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	calls   map[string]int
}

func newResolver(m map[string]string) *fakeResolver {
	r := &fakeResolver{answers: map[string][][]netip.Addr{}, calls: map[string]int{}}
	for name, addrs := range m {
		r.add(name, addrs)
	}
	return r
}

// add appends one answer (comma-separated addresses) for name.
func (r *fakeResolver) add(name, addrs string) {
	var as []netip.Addr
	for _, a := range strings.Split(addrs, ",") {
		as = append(as, netip.MustParseAddr(a))
	}
	r.answers[name] = append(r.answers[name], as)
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.calls[host]
	r.calls[host]++
	ans := r.answers[host]
	if len(ans) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return ans[min(n, len(ans)-1)], nil
}

func (r *fakeResolver) callCount(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

// loopbackDialer records every address the proxy dials and connects only to loopback: whatever
// the proxy does, no test packet leaves 127.0.0.0/8 and ::1.
type loopbackDialer struct {
	mu    sync.Mutex
	dials []string
}

func (d *loopbackDialer) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.dials = append(d.dials, address)
	d.mu.Unlock()
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !ap.Addr().IsLoopback() {
		return nil, fmt.Errorf("test dialer: %s is not loopback; not connecting", address)
	}
	return (&net.Dialer{}).DialContext(ctx, network, address)
}

func (d *loopbackDialer) all() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dials...)
}

// upstream is a test server reached only through the proxy: it answers with what it saw.
type upstream struct {
	plain, tls *httptest.Server
	plainPort  string
	tlsPort    string
	ca         *CA
	mu         sync.Mutex
	seen       []seenRequest
}

type seenRequest struct {
	Host, Auth string
	TLS        bool
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	certPEM, keyPEM, err := NewCAPEM(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := parseCA(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{ca: ca}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, seenRequest{Host: r.Host, Auth: r.Header.Get("Authorization"), TLS: r.TLS != nil})
		u.mu.Unlock()
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", strconv.Itoa(1<<20))
			w.Write(make([]byte, 1<<20))
			return
		}
		fmt.Fprintf(w, "hello from %s tls=%v", r.Host, r.TLS != nil)
	})
	u.plain = httptest.NewServer(h)
	u.tls = httptest.NewUnstartedServer(h)
	u.tls.TLS = &tls.Config{GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
		return ca.leaf(hi.ServerName, time.Now())
	}}
	u.tls.StartTLS()
	t.Cleanup(u.plain.Close)
	t.Cleanup(u.tls.Close)
	_, u.plainPort, _ = net.SplitHostPort(u.plain.Listener.Addr().String())
	_, u.tlsPort, _ = net.SplitHostPort(u.tls.Listener.Addr().String())
	return u
}

func (u *upstream) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(u.ca.Certificate())
	return p
}

func (u *upstream) requests() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenRequest(nil), u.seen...)
}

func patterns(t *testing.T, list ...string) []guard.EgressPattern {
	t.Helper()
	ps, err := guard.ParseEgressPatterns(list)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

var loopbackOK = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// startProxy serves cfg on a loopback listener and returns the proxy and its URL.
func startProxy(t *testing.T, cfg Config) (*Proxy, *url.URL) {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(l)
	t.Cleanup(func() {
		l.Close()
		p.Close()
	})
	return p, &url.URL{Scheme: "http", Host: l.Addr().String()}
}

// client is a Go http.Client that uses the proxy and trusts roots (nil: the system's).
func client(proxy *url.URL, roots *x509.CertPool) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			Proxy:             http.ProxyURL(proxy),
			TLSClientConfig:   &tls.Config{RootCAs: roots},
			DisableKeepAlives: true,
		},
	}
}

func get(t *testing.T, c *http.Client, rawURL string, header ...string) (int, string, http.Header, error) {
	t.Helper()
	req, err := http.NewRequest("GET", rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header, err
}

func TestAllowedHostsAnswer(t *testing.T) {
	up := newUpstream(t)
	res := newResolver(map[string]string{"plain.test": "127.0.0.1", "api.test": "127.0.0.1"})
	dialer := &loopbackDialer{}
	p, pu := startProxy(t, Config{
		Allow:     patterns(t, "plain.test:"+up.plainPort, "api.test:"+up.tlsPort),
		PrivateOK: loopbackOK,
		Resolver:  res,
		Dial:      dialer.Dial,
		RootCAs:   up.pool(),
	})
	c := client(pu, up.pool())
	code, body, _, err := get(t, c, "http://plain.test:"+up.plainPort+"/")
	if err != nil || code != 200 || body != "hello from plain.test:"+up.plainPort+" tls=false" {
		t.Errorf("http GET: got %d %q %v; want 200 and the upstream's greeting", code, body, err)
	}
	code, body, _, err = get(t, c, "https://api.test:"+up.tlsPort+"/")
	if err != nil || code != 200 || !strings.Contains(body, "tls=true") {
		t.Errorf("https GET: got %d %q %v; want 200 over TLS", code, body, err)
	}
	rep := p.Report()
	if len(rep.Attempts) != 2 {
		t.Fatalf("got %d attempts; want 2: %+v", len(rep.Attempts), rep.Attempts)
	}
	for _, a := range rep.Attempts {
		if !a.Allowed || a.IP != "127.0.0.1" || a.BytesIn == 0 || a.BytesOut == 0 || a.Reason != "" {
			t.Errorf("attempt %+v; want allowed to 127.0.0.1 with bytes both ways", a)
		}
	}
	if rep.Attempts[0].Kind != "http" || rep.Attempts[1].Kind != "connect" || rep.Attempts[1].TLS != "" {
		t.Errorf("got kinds %q/%q tls %q; want http, then a connect tunnelled as is", rep.Attempts[0].Kind, rep.Attempts[1].Kind, rep.Attempts[1].TLS)
	}
	if rep.BytesIn != rep.Attempts[0].BytesIn+rep.Attempts[1].BytesIn {
		t.Errorf("report BytesIn %d; want the sum of the attempts", rep.BytesIn)
	}
}

func TestRefusedOutsideAllowlist(t *testing.T) {
	up := newUpstream(t)
	res := newResolver(map[string]string{"plain.test": "127.0.0.1", "evil.test": "127.0.0.1"})
	dialer := &loopbackDialer{}
	p, pu := startProxy(t, Config{
		Allow:     patterns(t, "plain.test:"+up.plainPort),
		PrivateOK: loopbackOK,
		Resolver:  res,
		Dial:      dialer.Dial,
	})
	c := client(pu, up.pool())
	code, body, h, err := get(t, c, "http://evil.test:"+up.plainPort+"/")
	if err != nil || code != 403 || !strings.Contains(body, "not in the run's egress allowlist") || h.Get(RefusedHeader) == "" {
		t.Errorf("http GET evil.test: got %d %q %v; want 403 that says why", code, body, err)
	}
	_, _, _, err = get(t, c, "https://evil.test:"+up.tlsPort+"/")
	if err == nil || !strings.Contains(err.Error(), "egress allowlist") {
		t.Errorf("https GET evil.test: got %v; want the CONNECT refused, saying why", err)
	}
	// The allowed name on another port is outside the allowlist too.
	if code, _, _, _ := get(t, c, "http://plain.test:1/"); code != 403 {
		t.Errorf("allowed name, other port: got %d; want 403", code)
	}
	if n := res.callCount("evil.test"); n != 0 {
		t.Errorf("evil.test was looked up %d times; want 0 (no lookups outside the allowlist)", n)
	}
	if d := dialer.all(); len(d) != 0 {
		t.Errorf("dialled %v; want nothing", d)
	}
	rep := p.Report()
	if len(rep.Attempts) != 3 {
		t.Fatalf("got %d attempts; want 3", len(rep.Attempts))
	}
	for _, a := range rep.Attempts {
		if a.Allowed || a.Reason == "" {
			t.Errorf("attempt %+v; want refused with a reason", a)
		}
	}
}

func TestRefusedAddressesAfterResolution(t *testing.T) {
	res := newResolver(map[string]string{
		"meta.test":    "169.254.169.254",
		"meta6.test":   "fd00:ec2::254",
		"private.test": "10.1.2.3",
		"mapped.test":  "::ffff:169.254.169.254",
		"loop.test":    "127.0.0.1",
		"alibaba.test": "100.100.100.200",
	})
	dialer := &loopbackDialer{}
	p, pu := startProxy(t, Config{
		Allow: patterns(t, "meta.test", "meta6.test", "private.test", "mapped.test", "loop.test",
			"alibaba.test", "169.254.169.254", "10.0.0.0/8"),
		Resolver: res,
		Dial:     dialer.Dial,
	})
	c := client(pu, nil)
	tests := []struct{ url, reason string }{
		{"http://meta.test/latest/meta-data/", "cloud metadata"},
		{"http://meta6.test/", "cloud metadata"},
		{"http://private.test/", "private"},
		{"http://mapped.test/", "cloud metadata"},
		{"http://loop.test/", "loopback"},
		{"http://alibaba.test/", "cloud metadata"},
		{"http://169.254.169.254/latest/meta-data/", "cloud metadata"},
		{"http://10.1.2.3/", "private"},
		{"http://[::ffff:10.1.2.3]/", "private"},
		{"https://private.test/", "private"},
		{"https://10.1.2.3/", "private"},
	}
	for _, tt := range tests {
		code, body, _, err := get(t, c, tt.url)
		got := body
		if err != nil {
			got = err.Error()
		}
		if (err == nil && code != 403) || !strings.Contains(got, tt.reason) {
			t.Errorf("GET %s: got %d %q; want refused (%s)", tt.url, code, got, tt.reason)
		}
	}
	if d := dialer.all(); len(d) != 0 {
		t.Errorf("dialled %v; want nothing: refusals come before any connect", d)
	}
	for _, a := range p.Report().Attempts {
		if a.Allowed || a.IP == "" {
			t.Errorf("attempt %+v; want refused with the address it resolved to", a)
		}
	}
}

// rawConnect opens a CONNECT to target through the proxy and returns the connection once the
// proxy answered 200, or the status line.
func rawConnect(t *testing.T, pu *url.URL, target string) (net.Conn, string) {
	t.Helper()
	conn, err := net.Dial("tcp", pu.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		t.Fatal(err)
	}
	if br.Buffered() > 0 {
		t.Fatalf("proxy sent %d bytes after its CONNECT answer", br.Buffered())
	}
	return conn, resp.Status
}

func TestConnectSNIMustMatch(t *testing.T) {
	up := newUpstream(t)
	res := newResolver(map[string]string{"api.test": "127.0.0.1", "other.test": "127.0.0.1"})
	dialer := &loopbackDialer{}
	p, pu := startProxy(t, Config{
		Allow:     patterns(t, "api.test:"+up.tlsPort),
		PrivateOK: loopbackOK,
		Resolver:  res,
		Dial:      dialer.Dial,
	})
	tests := []struct {
		name   string
		sni    string
		reason string
	}{
		{"other name", "other.test", "does not match"},
		{"no SNI", "", "no SNI"},
	}
	for _, tt := range tests {
		conn, status := rawConnect(t, pu, "api.test:"+up.tlsPort)
		if !strings.HasPrefix(status, "200") {
			t.Fatalf("%s: CONNECT got %q; want 200", tt.name, status)
		}
		tc := tls.Client(conn, &tls.Config{ServerName: tt.sni, InsecureSkipVerify: tt.sni == "", RootCAs: up.pool()})
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		err := tc.Handshake()
		if err == nil || !strings.Contains(err.Error(), "access denied") {
			t.Errorf("%s: handshake got %v; want a TLS access_denied alert", tt.name, err)
		}
	}
	conn, _ := rawConnect(t, pu, "api.test:"+up.tlsPort)
	io.WriteString(conn, "SSH-2.0-OpenSSH_9.2\r\n")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.ReadAll(conn)

	waitFor(t, func() bool { return len(p.Report().Attempts) == 3 && p.Report().Attempts[2].Reason != "" })
	rep := p.Report()
	for i, want := range []string{"does not match", "no SNI", "not a TLS ClientHello"} {
		a := rep.Attempts[i]
		if a.Allowed || !strings.Contains(a.Reason, want) {
			t.Errorf("attempt %d: %+v; want refused: %s", i, a, want)
		}
	}
	if d := dialer.all(); len(d) != 0 {
		t.Errorf("the proxy dialled %v; want nothing: SNI is checked before any connect", d)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestByteCapCutsDownload(t *testing.T) {
	up := newUpstream(t)
	res := newResolver(map[string]string{"plain.test": "127.0.0.1", "api.test": "127.0.0.1"})
	const limit = 100 << 10
	p, pu := startProxy(t, Config{
		Allow:     patterns(t, "plain.test:"+up.plainPort, "api.test:"+up.tlsPort),
		PrivateOK: loopbackOK,
		Resolver:  res,
		Dial:      (&loopbackDialer{}).Dial,
		MaxBytes:  limit,
	})
	c := client(pu, up.pool())
	code, body, _, err := get(t, c, "http://plain.test:"+up.plainPort+"/big")
	if err == nil || len(body) >= 1<<20 {
		t.Errorf("GET /big: got %d, %d bytes, %v; want a cut transfer", code, len(body), err)
	}
	rep := p.Report()
	if !rep.ByteCapReached || !strings.Contains(rep.Attempts[0].Reason, "byte cap") {
		t.Errorf("report %+v; want the byte cap reached and the attempt saying so", rep)
	}
	if total := rep.BytesIn + rep.BytesOut; total > limit {
		t.Errorf("moved %d bytes; want at most %d", total, limit)
	}
	code, body, _, _ = get(t, c, "http://plain.test:"+up.plainPort+"/")
	if code != 403 || !strings.Contains(body, "byte cap") {
		t.Errorf("after the cap: got %d %q; want 403 byte cap", code, body)
	}
	if _, _, _, err := get(t, c, "https://api.test:"+up.tlsPort+"/big"); err == nil {
		t.Errorf("https after the cap: got no error; want refused")
	}
}

func TestByteCapCutsTunnel(t *testing.T) {
	up := newUpstream(t)
	res := newResolver(map[string]string{"api.test": "127.0.0.1"})
	const limit = 200 << 10
	p, pu := startProxy(t, Config{
		Allow:     patterns(t, "api.test:"+up.tlsPort),
		PrivateOK: loopbackOK,
		Resolver:  res,
		Dial:      (&loopbackDialer{}).Dial,
		MaxBytes:  limit,
	})
	_, body, _, err := get(t, client(pu, up.pool()), "https://api.test:"+up.tlsPort+"/big")
	if err == nil || len(body) >= 1<<20 {
		t.Errorf("https GET /big: got %d bytes, %v; want a cut transfer", len(body), err)
	}
	rep := p.Report()
	if !rep.ByteCapReached || rep.BytesIn+rep.BytesOut > limit || !strings.Contains(rep.Attempts[0].Reason, "byte cap") {
		t.Errorf("report %+v; want the cap reached, at most %d bytes, the attempt saying so", rep, limit)
	}
}

// lockedBuffer is a bytes.Buffer safe for the proxy's concurrent log writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestConnectionCap(t *testing.T) {
	up := newUpstream(t)
	res := newResolver(map[string]string{"plain.test": "127.0.0.1"})
	p, pu := startProxy(t, Config{
		Allow:     patterns(t, "plain.test:"+up.plainPort),
		PrivateOK: loopbackOK,
		Resolver:  res,
		Dial:      (&loopbackDialer{}).Dial,
		MaxConns:  2,
	})
	c := client(pu, nil)
	for i := range 5 {
		code, body, _, err := get(t, c, "http://plain.test:"+up.plainPort+"/")
		want := 200
		if i >= 2 {
			want = 403
		}
		if err != nil || code != want || (want == 403 && !strings.Contains(body, "connection cap")) {
			t.Errorf("request %d: got %d %q %v; want %d", i, code, body, err, want)
		}
	}
	rep := p.Report()
	if !rep.ConnCapReached || len(rep.Attempts) != 3 || rep.Dropped != 2 {
		t.Errorf("report: cap %v, %d attempts, %d dropped; want cap reached, 3 listed, 2 dropped", rep.ConnCapReached, len(rep.Attempts), rep.Dropped)
	}
}

func TestRebindingGetsNothing(t *testing.T) {
	up := newUpstream(t)
	res := newResolver(nil)
	res.add("rebind.test", "203.0.113.7") // public-looking (TEST-NET-3): checked and dialled
	res.add("rebind.test", "127.0.0.1")   // the rebinding answer
	dialer := &loopbackDialer{}
	p, pu := startProxy(t, Config{
		Allow:    patterns(t, "rebind.test:"+up.plainPort),
		Resolver: res,
		Dial:     dialer.Dial,
	})
	c := client(pu, nil)
	for i := range 2 {
		code, body, _, err := get(t, c, "http://rebind.test:"+up.plainPort+"/")
		if err != nil || code == 200 || strings.Contains(body, "hello") {
			t.Errorf("request %d: got %d %q %v; want no answer from the loopback upstream", i, code, body, err)
		}
	}
	want := "203.0.113.7:" + up.plainPort
	if d := dialer.all(); len(d) != 1 || d[0] != want {
		t.Errorf("dialled %v; want only [%s], the address that was checked", d, want)
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("upstream got %d requests; want 0", n)
	}
	rep := p.Report()
	if len(rep.Attempts) != 2 || !strings.Contains(rep.Attempts[1].Reason, "loopback") {
		t.Errorf("attempts %+v; want the second refused as loopback", rep.Attempts)
	}
}

func testSecrets(t *testing.T, text string) *Secrets {
	t.Helper()
	s, err := ParseSecrets(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSecretHeaderReachesOnlyItsHost(t *testing.T) {
	const value = "Bearer s3cret-value-42"
	up := newUpstream(t)
	res := newResolver(map[string]string{"api.test": "127.0.0.1", "other.test": "127.0.0.1"})
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	secrets := testSecrets(t, "# test\ngh api.test:"+up.tlsPort+" Authorization: "+value+"\nunused other.test X-Other: nope\n")
	rules, err := secrets.Select([]string{"gh"})
	if err != nil {
		t.Fatal(err)
	}
	p, pu := startProxy(t, Config{
		Allow:     patterns(t, "api.test:"+up.tlsPort, "other.test:"+up.tlsPort, "other.test:"+up.plainPort),
		PrivateOK: loopbackOK,
		Resolver:  res,
		Dial:      (&loopbackDialer{}).Dial,
		RootCAs:   up.pool(),
		Secrets:   rules,
		CA:        ca,
		Logger:    slog.New(slog.NewTextHandler(logs, nil)),
	})
	if !p.Intercepts() {
		t.Fatal("Intercepts() = false; want true with a secret")
	}
	roots := up.pool()
	roots.AddCert(ca.Certificate())
	c := client(pu, roots)
	// Intercepted CONNECT: the client's own Authorization is replaced.
	code, body, _, err := get(t, c, "https://api.test:"+up.tlsPort+"/", "Authorization", "Bearer forged")
	if err != nil || code != 200 {
		t.Fatalf("https api.test: got %d %q %v; want 200", code, body, err)
	}
	// Plain http:// to the secret host: TLS originated to the upstream.
	code, body, _, err = get(t, c, "http://api.test:"+up.tlsPort+"/")
	if err != nil || code != 200 || !strings.Contains(body, "tls=true") {
		t.Errorf("http api.test: got %d %q %v; want 200 over TLS upstream", code, body, err)
	}
	// Another allowed host gets no secret, by CONNECT or plain http.
	if code, _, _, err := get(t, c, "https://other.test:"+up.tlsPort+"/", "Authorization", "Bearer mine"); err != nil || code != 200 {
		t.Errorf("https other.test: got %d %v; want 200", code, err)
	}
	if code, _, _, err := get(t, c, "http://other.test:"+up.plainPort+"/"); err != nil || code != 200 {
		t.Errorf("http other.test: got %d %v; want 200", code, err)
	}
	seen := up.requests()
	if len(seen) != 4 {
		t.Fatalf("upstream saw %d requests; want 4: %+v", len(seen), seen)
	}
	for _, s := range seen {
		isAPI := strings.HasPrefix(s.Host, "api.test")
		if isAPI && (s.Auth != value || !s.TLS) {
			t.Errorf("api.test got Authorization %q tls=%v; want the secret over TLS", s.Auth, s.TLS)
		}
		if !isAPI && s.Auth == value {
			t.Errorf("%s got the secret; want it only at api.test", s.Host)
		}
	}
	rep := p.Report()
	data, _ := json.Marshal(rep)
	if strings.Contains(string(data), "s3cret") {
		t.Errorf("the report holds the secret value: %s", data)
	}
	if l := logs.String(); !strings.Contains(l, "api.test") || strings.Contains(l, "s3cret") {
		t.Errorf("logs %q; want records of api.test without the secret value", l)
	}
	if rep.Attempts[0].TLS != "intercepted" || rep.Attempts[1].TLS != "originated" || len(rep.Attempts[0].Secrets) != 1 || rep.Attempts[0].Secrets[0] != "gh" {
		t.Errorf("attempts %+v; want intercepted and originated, naming gh", rep.Attempts[:2])
	}
	if len(rep.Attempts[2].Secrets) != 0 || rep.Attempts[2].TLS != "" {
		t.Errorf("other.test attempt %+v; want no secret, tunnelled as is", rep.Attempts[2])
	}
}

func TestInterceptedHostHeaderMustMatch(t *testing.T) {
	up := newUpstream(t)
	res := newResolver(map[string]string{"api.test": "127.0.0.1"})
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rules, _ := testSecrets(t, "gh api.test:"+up.tlsPort+" Authorization: Bearer x\n").Select([]string{"gh"})
	p, pu := startProxy(t, Config{
		Allow: patterns(t, "api.test:"+up.tlsPort), PrivateOK: loopbackOK, Resolver: res,
		Dial: (&loopbackDialer{}).Dial, RootCAs: up.pool(), Secrets: rules, CA: ca,
	})
	conn, _ := rawConnect(t, pu, "api.test:"+up.tlsPort)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	tc := tls.Client(conn, &tls.Config{ServerName: "api.test", RootCAs: pool})
	tc.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("got %v %v; want 421", resp, err)
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("upstream got %d requests; want 0", n)
	}
	if a := p.Report().Attempts[0]; a.Allowed || !strings.Contains(a.Reason, "Host header") {
		t.Errorf("attempt %+v; want refused for its Host header", a)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	rules, _ := testSecrets(t, "gh api.test Authorization: Bearer x\n").Select([]string{"gh"})
	for _, cfg := range []Config{{MaxBytes: -1}, {MaxConns: -1}, {Secrets: rules}, {Secrets: []SecretRule{{Name: "x"}}}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) = nil error; want one", cfg)
		}
	}
}

func TestCloseEndsTunnels(t *testing.T) {
	up := newUpstream(t)
	res := newResolver(map[string]string{"api.test": "127.0.0.1"})
	p, pu := startProxy(t, Config{
		Allow: patterns(t, "api.test:"+up.tlsPort), PrivateOK: loopbackOK, Resolver: res,
		Dial: (&loopbackDialer{}).Dial,
	})
	conn, _ := rawConnect(t, pu, "api.test:"+up.tlsPort)
	tc := tls.Client(conn, &tls.Config{ServerName: "api.test", RootCAs: up.pool()})
	tc.SetDeadline(time.Now().Add(5 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := tc.Read(make([]byte, 1)); done <- err }()
	p.Close()
	select {
	case err := <-done:
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("read after Close: got %v; want the tunnel closed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("tunnel still open 5s after Close")
	}
}

func TestBadProxyRequests(t *testing.T) {
	_, pu := startProxy(t, Config{Resolver: newResolver(nil), Dial: (&loopbackDialer{}).Dial})
	tests := []struct {
		name, request string
		want          int
	}{
		{"origin form", "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", 400},
		{"https absolute form", "GET https://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 400},
		{"garbage", "\x16\x03\x01 hello\r\n\r\n", 400},
		{"huge head", "GET http://a.test/ HTTP/1.1\r\nX-Big: " + strings.Repeat("a", 100<<10) + "\r\n\r\n", 431},
		{"CONNECT without port", "CONNECT a.test HTTP/1.1\r\nHost: a.test\r\n\r\n", 403},
		{"CONNECT bad host", "CONNECT a..test:443 HTTP/1.1\r\nHost: a.test\r\n\r\n", 403},
	}
	for _, tt := range tests {
		conn, err := net.Dial("tcp", pu.Host)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		go io.WriteString(conn, tt.request)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != tt.want {
			t.Errorf("%s: got %v %v; want %d", tt.name, resp, err, tt.want)
		}
		conn.Close()
	}
}
