package egress

import (
	"bytes"
	"encoding/pem"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// pythonScript fetches each URL in argv with urllib, which takes the proxy from the environment,
// and prints one line per URL: the status and body, or the error.
const pythonScript = `
import sys, urllib.request, urllib.error
for u in sys.argv[1:]:
    try:
        with urllib.request.urlopen(u, timeout=10) as r:
            print("OK", r.status, r.read().decode())
    except urllib.error.HTTPError as e:
        print("HTTP", e.code, e.reason)
    except Exception as e:
        print("ERR", e)
`

// TestPythonUrllibUsesProxyFromEnv proves urllib honours HTTP_PROXY/HTTPS_PROXY and trusts the
// egress CA through SSL_CERT_FILE, as SandboxEnv sets them.
func TestPythonUrllibUsesProxyFromEnv(t *testing.T) {
	need.Need(t, need.Python3)
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal(err)
	}
	up := newUpstream(t)
	res := newResolver(map[string]string{"plain.test": "127.0.0.1", "api.test": "127.0.0.1", "other.test": "127.0.0.1"})
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	rules, _ := testSecrets(t, "gh api.test:"+up.tlsPort+" Authorization: Bearer py-secret\n").Select([]string{"gh"})
	p, pu := startProxy(t, Config{
		Allow:     patterns(t, "plain.test:"+up.plainPort, "api.test:"+up.tlsPort, "other.test:"+up.tlsPort),
		PrivateOK: loopbackOK,
		Resolver:  res,
		Dial:      (&loopbackDialer{}).Dial,
		RootCAs:   up.pool(),
		Secrets:   rules,
		CA:        ca,
	})
	// The bundle the sandbox would get: the image's roots (here the upstream's test CA, standing
	// in for public roots) followed by the egress CA.
	bundle := filepath.Join(dir, "bundle.pem")
	upPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.ca.Certificate().Raw})
	if err := os.WriteFile(bundle, append(upPEM, ca.CertPEM()...), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	if v := os.Getenv("PYENV_ROOT"); v != "" {
		env = append(env, "PYENV_ROOT="+v)
	}
	for k, v := range SandboxEnv(netip.MustParseAddrPort(pu.Host), p.Intercepts(), filepath.Join(dir, CACertFile), bundle) {
		env = append(env, k+"="+v)
	}
	cmd := exec.Command(python, "-c", pythonScript,
		"http://plain.test:"+up.plainPort+"/",
		"https://api.test:"+up.tlsPort+"/",
		"https://other.test:"+up.tlsPort+"/",
		"http://evil.test:"+up.plainPort+"/",
		"https://evil.test:"+up.tlsPort+"/",
	)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{
		"OK 200 hello from plain.test:" + up.plainPort + " tls=false",
		"OK 200 hello from api.test:" + up.tlsPort + " tls=true",
		"OK 200 hello from other.test:" + up.tlsPort + " tls=true",
		"HTTP 403 Forbidden (sandboxflow egress: not in the run's egress allowlist)",
		"Tunnel connection failed: 403 Forbidden (sandboxflow egress: not in the run's egress allowlist)",
	}
	if len(lines) != len(want) {
		t.Fatalf("python printed %q; want %d lines", lines, len(want))
	}
	for i := range want {
		if !strings.Contains(lines[i], want[i]) {
			t.Errorf("line %d: got %q; want %q", i, lines[i], want[i])
		}
	}
	seen := up.requests()
	for _, s := range seen {
		if strings.HasPrefix(s.Host, "api.test") != (s.Auth == "Bearer py-secret") {
			t.Errorf("upstream %s saw Authorization %q; want the secret at api.test only", s.Host, s.Auth)
		}
	}
}
