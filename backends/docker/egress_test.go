package docker

import (
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/egress"
	"github.com/sandboxflow/sandboxflow/guard"
)

func TestEgressRequestDocument(t *testing.T) {
	b := fakeBackend(t, newFake(), Config{})
	c := testChecked("print(1)")
	if b.egressPlan(c) != nil {
		t.Fatalf("a request without egress got an egress plan")
	}
	c.Egress = []string{"api.example.com"}
	c.Env = []guard.EnvVar{{Name: "HTTP_PROXY", Value: "http://evil:1"}}
	frame, err := encodeRequest(c, 1000, b.egressPlan(c))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(frame[frameHeaderBytes:])
	if !strings.Contains(doc, `"egress_port":3128`) || strings.Contains(doc, `"egress_ca"`) {
		t.Errorf("request document: got %s; want egress_port 3128 and no CA (no secrets)", doc)
	}
	// The proxy's variables come after the request's own, so the supervisor keeps the proxy's.
	env := b.egressPlan(c).env
	if env["HTTP_PROXY"] != "http://127.0.0.1:3128" {
		t.Errorf("HTTP_PROXY: got %q; want http://127.0.0.1:3128", env["HTTP_PROXY"])
	}
}

func TestEgressProxyConfigRefusals(t *testing.T) {
	secrets, err := egress.ParseSecrets(strings.NewReader("gh api.example.com Authorization: Bearer x\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := testChecked("print(1)")
	c.Egress, c.Secrets = []string{"api.example.com"}, []string{"gh"}
	for _, tc := range []struct {
		name string
		cfg  EgressConfig
	}{
		{"no secrets file", EgressConfig{}},
		{"no CA", EgressConfig{Secrets: secrets}},
	} {
		b := fakeBackend(t, newFake(), Config{Egress: tc.cfg})
		if _, err := b.proxyConfig(c); guard.TypeOf(err) != guard.TypeConfigError {
			t.Errorf("%s: got %v; want a ConfigError", tc.name, err)
		}
	}
	c.Secrets = []string{"nosuch"}
	b := fakeBackend(t, newFake(), Config{Egress: EgressConfig{Secrets: secrets}})
	if _, err := b.proxyConfig(c); guard.TypeOf(err) != guard.TypeConfigError {
		t.Errorf("an unknown secret name: got %v; want a ConfigError", err)
	}
}

func TestReportTunnelFramesNeedEgress(t *testing.T) {
	r := newReport(testChecked("x").Limits, nil)
	if _, err := r.Write(encodeFrame(frameTunnelOpen, 1, nil)); err == nil {
		t.Errorf("a tunnel frame in a run without egress was accepted")
	}
}
