package egress

import (
	"net/netip"
	"testing"
)

func TestSandboxEnv(t *testing.T) {
	addr := netip.MustParseAddrPort("127.0.0.1:3128")
	env := SandboxEnv(addr, false, SandboxCAFile, SandboxCABundle)
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		if env[k] != "http://127.0.0.1:3128" {
			t.Errorf("%s = %q; want http://127.0.0.1:3128", k, env[k])
		}
	}
	if _, ok := env["SSL_CERT_FILE"]; ok {
		t.Error("SSL_CERT_FILE set without interception; want it unset")
	}
	env = SandboxEnv(addr, true, SandboxCAFile, SandboxCABundle)
	for k, want := range map[string]string{
		"SSL_CERT_FILE": SandboxCABundle, "REQUESTS_CA_BUNDLE": SandboxCABundle, "CURL_CA_BUNDLE": SandboxCABundle,
		"PIP_CERT": SandboxCABundle, "NODE_EXTRA_CA_CERTS": SandboxCAFile,
	} {
		if env[k] != want {
			t.Errorf("%s = %q; want %q", k, env[k], want)
		}
	}
}
