//go:build integration

package docker

// Egress through the filtering proxy (issue 13), with real containers under runc and runsc. The
// upstream test servers listen on 127.0.0.1 of the worker's host; the proxy runs in this process
// and is the only way the sandbox (on --network none) can reach them. Names such as allowed.test
// resolve through a test resolver inside the proxy; the sandbox itself has no DNS.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/egress"
	"github.com/sandboxflow/sandboxflow/guard"
)

// mapResolver resolves the test's names only.
type mapResolver map[string]string

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if ip, ok := m[host]; ok {
		return []netip.Addr{netip.MustParseAddr(ip)}, nil
	}
	return nil, fmt.Errorf("test resolver: no such host %q", host)
}

var egressResolver = mapResolver{
	"allowed.test": "127.0.0.1",
	"secret.test":  "127.0.0.1",
	"other.test":   "127.0.0.1",
	"meta.test":    "169.254.169.254",
	"private.test": "10.1.2.3",
}

// upstream is a test server that records the Authorization header of every request.
type upstream struct {
	srv  *httptest.Server
	mu   sync.Mutex
	auth []string
}

func newUpstream(t *testing.T, cert *tls.Certificate) *upstream {
	t.Helper()
	u := &upstream{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.auth = append(u.auth, r.Header.Get("Authorization"))
		u.mu.Unlock()
		if r.URL.Path == "/big" {
			chunk := bytes.Repeat([]byte("x"), 64<<10)
			for i := 0; i < 64; i++ { // 4 MiB
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			return
		}
		fmt.Fprint(w, "hello from upstream")
	})
	u.srv = httptest.NewUnstartedServer(h)
	if cert != nil {
		u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
		u.srv.StartTLS()
	} else {
		u.srv.Start()
	}
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) port() string {
	_, p, _ := net.SplitHostPort(u.srv.Listener.Addr().String())
	return p
}

func (u *upstream) headers() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.auth...)
}

// upstreamCert returns a self-signed certificate for the test's names, and a pool trusting it.
func upstreamCert(t *testing.T) (*tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sandboxflow test upstream"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		DNSNames:              []string{"allowed.test", "secret.test", "other.test"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// egressChecked checks a request with egress (and secrets) against a policy that allows exactly
// those patterns.
func egressChecked(t *testing.T, code string, allow, secrets []string) guard.Checked {
	t.Helper()
	p := testPolicy
	p.AllowOpenNetwork = false
	p.EgressAllow = allow
	p.SecretNames = secrets
	p.MaxStdoutBytes = 1_200_000
	p.MaxFileBytes, p.MaxTotalFileBytes = 10_000, 10_000
	req := guard.Request{Code: code, Language: guard.Python, Settings: guard.Settings{
		Egress:  allow,
		Secrets: secrets,
		Limits:  guard.Limits{Timeout: 60 * time.Second, MaxStdoutBytes: 1_200_000},
	}}
	c, err := p.Check(req, Name)
	if err != nil {
		t.Fatal(err)
	}
	c.Owner = guard.Owner{WorkflowID: "test-" + randomHex(6), RunID: t.Name(), ActivityID: "1"}
	return c
}

// findAttempt returns the first attempt to host:port.
func findAttempt(rep *guard.EgressReport, host string, port string) (guard.EgressAttempt, bool) {
	if rep == nil {
		return guard.EgressAttempt{}, false
	}
	for _, a := range rep.Attempts {
		if a.Host == host && fmt.Sprint(a.Port) == port {
			return a, true
		}
	}
	return guard.EgressAttempt{}, false
}

const egressProbe = `
import os, socket, ssl, sys, urllib.request, urllib.error
H, T = os.environ["HPORT"], os.environ["TPORT"]
def fetch(url, ctx=None):
    try:
        with urllib.request.urlopen(url, timeout=20, context=ctx) as r:
            return "ok %d %s" % (r.status, r.read(200).decode())
    except urllib.error.HTTPError as e:
        return "http %d" % e.code
    except Exception as e:
        return "error %s" % type(e).__name__
print("allowed=" + fetch("http://allowed.test:%s/" % H))
print("denied=" + fetch("http://denied.test:%s/" % H))
print("meta=" + fetch("http://meta.test/latest/meta-data/"))
print("metaip=" + fetch("http://169.254.169.254/latest/meta-data/"))
print("private=" + fetch("http://private.test/"))
try:
    socket.create_connection(("127.0.0.1", int(H)), timeout=5).close()
    print("direct=connected")
except OSError as e:
    print("direct=refused " + type(e).__name__)
for name in ("allowed.test", "example.com"):
    try:
        socket.getaddrinfo(name, 80)
        print("dns-%s=resolved" % name)
    except OSError as e:
        print("dns-%s=failed" % name)
try:
    s = socket.create_connection(("127.0.0.1", int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1])), timeout=10)
    s.sendall(("CONNECT allowed.test:%s HTTP/1.1\r\nHost: allowed.test:%s\r\n\r\n" % (T, T)).encode())
    head = s.recv(4096).decode("latin-1").split("\r\n")[0]
    ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
    ctx.wrap_socket(s, server_hostname="evil.test").sendall(b"GET / HTTP/1.0\r\n\r\n")
    print("sni=handshake-ok " + head)
except Exception as e:
    print("sni=refused " + type(e).__name__)
try:
    n = 0
    with urllib.request.urlopen("http://allowed.test:%s/big" % H, timeout=30) as r:
        while True:
            b = r.read(65536)
            if not b:
                break
            n += len(b)
    print("big=complete %d" % n)
except Exception as e:
    print("big=cut %s" % type(e).__name__)
`

func TestEgressProxyIntegration(t *testing.T) {
	eachRuntime(t, func(t *testing.T, rt string) {
		cert, _ := upstreamCert(t)
		plain, tlsUp := newUpstream(t, nil), newUpstream(t, cert)
		h, tp := plain.port(), tlsUp.port()
		b := newTestBackend(t, rt, func(c *Config) {
			c.Egress = EgressConfig{
				PrivateOK: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
				MaxBytes:  1 << 20,
				Resolver:  egressResolver,
			}
		})
		allow := []string{"allowed.test:" + h, "allowed.test:" + tp, "meta.test", "private.test", "169.254.169.254"}
		c := egressChecked(t, "import os\nos.environ['HPORT']='"+h+"'\nos.environ['TPORT']='"+tp+"'\n"+egressProbe, allow, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		res, err := b.Run(ctx, c)
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		out := keyValues(res.Stdout)
		defer func() {
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
			}
		}()
		want := map[string]string{
			"allowed":          "ok 200 hello from upstream",
			"denied":           "http 403",
			"meta":             "http 403",
			"metaip":           "http 403",
			"private":          "http 403",
			"dns-allowed.test": "failed",
			"dns-example.com":  "failed",
		}
		for k, v := range want {
			if out[k] != v {
				t.Errorf("%s: got %q; want %q", k, out[k], v)
			}
		}
		if !strings.HasPrefix(out["direct"], "refused") {
			t.Errorf("direct connect to the upstream's 127.0.0.1:%s: got %q; want refused", h, out["direct"])
		}
		if !strings.HasPrefix(out["sni"], "refused") {
			t.Errorf("CONNECT allowed.test with SNI evil.test: got %q; want refused", out["sni"])
		}
		if !strings.HasPrefix(out["big"], "cut") {
			t.Errorf("4 MiB download under a 1 MiB cap: got %q; want cut", out["big"])
		}
		rep := res.Egress
		if rep == nil {
			t.Fatal("result has no egress report")
		}
		checkAttempt := func(host, port string, allowed bool, reason string) {
			t.Helper()
			a, ok := findAttempt(rep, host, port)
			if !ok {
				t.Errorf("no attempt to %s:%s in the report %+v", host, port, rep.Attempts)
				return
			}
			if a.Allowed != allowed || !strings.Contains(a.Reason, reason) {
				t.Errorf("attempt to %s:%s: got allowed=%v reason %q; want allowed=%v reason containing %q", host, port, a.Allowed, a.Reason, allowed, reason)
			}
		}
		checkAttempt("allowed.test", h, true, "")
		checkAttempt("denied.test", h, false, "not in the run's egress allowlist")
		checkAttempt("meta.test", "80", false, "resolves to a refused address")
		checkAttempt("169.254.169.254", "80", false, "")
		checkAttempt("private.test", "80", false, "resolves to a refused address")
		checkAttempt("allowed.test", tp, false, "SNI")
		if a, _ := findAttempt(rep, "meta.test", "80"); a.IP != "169.254.169.254" {
			t.Errorf("meta.test attempt IP: got %q; want 169.254.169.254", a.IP)
		}
		cut := false
		for _, a := range rep.Attempts {
			cut = cut || strings.Contains(a.Reason, "byte cap")
		}
		if !cut {
			t.Errorf("no attempt says the byte cap cut it: %+v", rep.Attempts)
		}
		if !rep.ByteCapReached {
			t.Errorf("report: ByteCapReached false after a 4 MiB download under a 1 MiB cap")
		}
		if got := plain.headers(); len(got) < 1 {
			t.Errorf("the plain upstream saw %d requests; want at least 1", len(got))
		}
	})
}

const secretProbe = `
import os, ssl, urllib.request
T, O = os.environ["TPORT"], os.environ["OPORT"]
def fetch(url, ctx=None):
    try:
        with urllib.request.urlopen(url, timeout=20, context=ctx) as r:
            return "ok %d %s" % (r.status, r.read(200).decode())
    except Exception as e:
        return "error %s %s" % (type(e).__name__, e)
print("secret=" + fetch("https://secret.test:%s/" % T))
unverified = ssl.create_default_context(); unverified.check_hostname = False; unverified.verify_mode = ssl.CERT_NONE
print("other=" + fetch("https://other.test:%s/" % O, unverified))
print("plainsecret=" + fetch("http://secret.test:%s/" % T))
print("ENV " + repr(dict(os.environ)))
def dump(path):
    try:
        with open(path, "rb") as f:
            print("FILE %s %r" % (path, f.read(1 << 20)))
    except OSError as e:
        print("NOFILE %s %s" % (path, type(e).__name__))
dump("/proc/self/environ")
for p in os.listdir("/proc"):
    if p.isdigit():
        dump("/proc/%s/environ" % p)
        dump("/proc/%s/cmdline" % p)
for top in ("/tmp", "/work", "/dev/shm", os.path.dirname(os.environ.get("SSL_CERT_FILE", "/tmp/x"))):
    for root, dirs, files in os.walk(top):
        for f in files:
            dump(os.path.join(root, f))
`

func TestEgressSecretsIntegration(t *testing.T) {
	eachRuntime(t, func(t *testing.T, rt string) {
		const value = "Bearer sfsecret-" + "c0ffee-4242"
		cert, pool := upstreamCert(t)
		secretUp, otherUp := newUpstream(t, cert), newUpstream(t, cert)
		tp, op := secretUp.port(), otherUp.port()
		secrets, err := egress.ParseSecrets(strings.NewReader("gh secret.test:" + tp + " Authorization: " + value + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		ca, err := egress.LoadOrCreateCA(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		b := newTestBackend(t, rt, func(c *Config) {
			c.Egress = EgressConfig{
				PrivateOK: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
				Resolver:  egressResolver,
				Secrets:   secrets,
				CA:        ca,
				RootCAs:   pool,
			}
		})
		allow := []string{"secret.test:" + tp, "other.test:" + op}
		c := egressChecked(t, "import os\nos.environ['TPORT']='"+tp+"'\nos.environ['OPORT']='"+op+"'\n"+secretProbe, allow, []string{"gh"})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		res, err := b.Run(ctx, c)
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		out := keyValues(res.Stdout)
		if !strings.HasPrefix(out["secret"], "ok 200") || !strings.HasPrefix(out["other"], "ok 200") {
			t.Errorf("secret=%q other=%q; want both ok 200\nstderr: %s", out["secret"], out["other"], res.Stderr)
		}
		if res.StdoutTruncated {
			t.Errorf("stdout truncated: the dump is incomplete")
		}
		for _, leak := range []string{"sfsecret-c0ffee-4242", "c0ffee-4242"} {
			if bytes.Contains(res.Stdout, []byte(leak)) || bytes.Contains(res.Stderr, []byte(leak)) {
				t.Errorf("the sandbox saw the secret value %q", leak)
			}
		}
		for _, h := range secretUp.headers() {
			if h != value {
				t.Errorf("secret.test got Authorization %q; want the secret", h)
			}
		}
		if n := len(secretUp.headers()); n < 1 {
			t.Errorf("secret.test saw %d requests; want at least 1", n)
		}
		for _, h := range otherUp.headers() {
			if h != "" {
				t.Errorf("other.test got Authorization %q; want none", h)
			}
		}
		if len(otherUp.headers()) != 1 {
			t.Errorf("other.test saw %d requests; want 1", len(otherUp.headers()))
		}
		if a, ok := findAttempt(res.Egress, "secret.test", tp); !ok || !a.Allowed {
			t.Errorf("report: secret.test attempt %+v (found %v); want allowed", a, ok)
		}
		for _, seen := range []string{"ENV {", "FILE /proc/self/environ", "HTTPS_PROXY", "FILE " + egress.SandboxCAFile} {
			if !bytes.Contains(res.Stdout, []byte(seen)) {
				t.Errorf("the dump has no %q: it did not look everywhere", seen)
			}
		}
		if t.Failed() {
			for _, line := range strings.Split(string(res.Stdout), "\n") {
				t.Logf("%.200s", line)
			}
		}
	})
}

// A run without egress has no listener and no proxy variables; a run with egress whose code
// holds a proxy connection open past its timeout still ends, as a timeout, in bounded time.
func TestEgressOffAndTimeoutIntegration(t *testing.T) {
	eachRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, func(c *Config) { c.Egress.Resolver = egressResolver })
		probe := `
import os, socket
print("proxy_env=%s" % ("HTTP_PROXY" in os.environ))
try:
    socket.create_connection(("127.0.0.1", 3128), timeout=5).close()
    print("listener=yes")
except OSError:
    print("listener=no")
`
		res := mustRun(t, b, checked(t, guard.Python, probe, nil))
		if out := keyValues(res.Stdout); out["proxy_env"] != "False" || out["listener"] != "no" || res.Egress != nil {
			t.Errorf("a run without egress: got %q, egress report %v; want no proxy variables, no listener, no report", res.Stdout, res.Egress)
		}

		hold := `
import socket, time
s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
s.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
print("holding", flush=True)
time.sleep(300)
`
		c := egressChecked(t, hold, []string{"allowed.test"}, nil)
		c.Limits.Timeout = 3 * time.Second
		start := time.Now()
		res, err := b.Run(context.Background(), c)
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		if !res.TimedOut || !bytes.Contains(res.Stdout, []byte("holding")) {
			t.Errorf("got timed out %v, stdout %q; want a timeout after \"holding\"", res.TimedOut, res.Stdout)
		}
		if d := time.Since(start); d > 45*time.Second {
			t.Errorf("the run took %s; want it bounded by its timeout", d)
		}
		if res.Egress == nil {
			t.Errorf("no egress report")
		}
	})
}

// Code that opens far more proxy connections than the caps allow is refused past the cap, and
// the run still ends normally.
func TestEgressConnectionFloodIntegration(t *testing.T) {
	eachRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, func(c *Config) { c.Egress = EgressConfig{Resolver: egressResolver, MaxConns: 8} })
		flood := `
import socket
held, failed = [], 0
for i in range(300):
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=1)
        s.sendall(b"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
        held.append(s)
    except OSError:
        failed += 1
for s in held:
    s.close()
print("held=%d failed=%d" % (len(held), failed))
`
		c := egressChecked(t, flood, []string{"allowed.test"}, nil)
		res, err := b.Run(context.Background(), c)
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		if res.ExitCode != 0 || !bytes.Contains(res.Stdout, []byte("held=")) {
			t.Fatalf("exit %d stdout %q stderr %q; want a normal end", res.ExitCode, res.Stdout, res.Stderr)
		}
		if res.Egress == nil || !res.Egress.ConnCapReached || len(res.Egress.Attempts) > 9 {
			t.Errorf("report %+v; want the connection cap reached and at most cap+1 attempts listed", res.Egress)
		}
	})
}
