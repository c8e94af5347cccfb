package egress

import (
	"fmt"
	"net/netip"
)

// Default places of the CA files inside the sandbox (the sandbox's /tmp is a private tmpfs).
const (
	// SandboxCAFile holds the egress CA alone (CA.CertPEM).
	SandboxCAFile = "/tmp/.sandboxflow/egress-ca.pem"
	// SandboxCABundle holds the image's own roots followed by the egress CA, so tunnelled TLS to
	// hosts without a secret still verifies against the public roots.
	SandboxCABundle = "/tmp/.sandboxflow/ca-bundle.pem"
)

// ImageCABundles returns where images keep their system roots, in the order the bundle writer
// should try them; the first that exists is copied into SandboxCABundle before the egress CA.
func ImageCABundles() []string {
	return []string{
		"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine
		"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
		"/etc/ssl/cert.pem",                  // Alpine, others
	}
}

// SandboxEnv returns the environment the sandboxed code needs to use the proxy at addr (the
// supervisor's listener inside the sandbox, such as 127.0.0.1:3128): the proxy variables in both
// cases, and, when intercept is true (the run has secrets), the CA variables pointing at
// caFile (the egress CA alone) and caBundle (image roots plus the egress CA).
//
// NO_PROXY names the sandbox's own loopback, which never leaves the sandbox. ALL_PROXY is not
// set: tools read it as a SOCKS proxy as often as an HTTP one.
func SandboxEnv(addr netip.AddrPort, intercept bool, caFile, caBundle string) map[string]string {
	u := fmt.Sprintf("http://%s", addr)
	env := map[string]string{
		"HTTP_PROXY":  u,
		"HTTPS_PROXY": u,
		"http_proxy":  u,
		"https_proxy": u,
		"NO_PROXY":    "localhost,127.0.0.1,::1",
		"no_proxy":    "localhost,127.0.0.1,::1",
		// npm reads its own names; Node 24+ honours the standard ones with this set.
		"npm_config_proxy":       u,
		"npm_config_https_proxy": u,
		"NODE_USE_ENV_PROXY":     "1",
	}
	if intercept {
		for _, k := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "GIT_SSL_CAINFO", "npm_config_cafile"} {
			env[k] = caBundle
		}
		env["NODE_EXTRA_CA_CERTS"] = caFile
	}
	return env
}
