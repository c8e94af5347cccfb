package guard

import (
	"strings"
	"testing"
)

func TestCheckNetworkAndEgress(t *testing.T) {
	p := Policy{EgressAllow: []string{"*.example.com", "api.github.com:443"}, SecretNames: []string{"github"}}
	for _, tc := range []struct {
		name    string
		req     Request
		typ     string
		mention string
	}{
		{"open network without the flag", Request{Code: "x", Settings: Settings{Network: true}}, TypeConfigError, "--allow-open-network"},
		{"egress outside the allowlist", Request{Code: "x", Settings: Settings{Egress: []string{"evil.test"}}}, TypeConfigError, "evil.test"},
		{"bad pattern", Request{Code: "x", Settings: Settings{Egress: []string{"http://x"}}}, TypeToolUsageError, ""},
		{"unknown secret", Request{Code: "x", Settings: Settings{Egress: []string{"api.github.com:443"}, Secrets: []string{"aws"}}}, TypeConfigError, "aws"},
		{"secret without egress", Request{Code: "x", Settings: Settings{Secrets: []string{"github"}}}, TypeConfigError, "egress"},
		{"network and egress", Request{Code: "x", Settings: Settings{Network: true, Egress: []string{"a.example.com"}}}, TypeConfigError, ""},
	} {
		pol := p
		if tc.name == "network and egress" {
			pol.AllowOpenNetwork = true
		}
		_, err := pol.Check(tc.req, "fake")
		if TypeOf(err) != tc.typ || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s: got %v; want a %s mentioning %q", tc.name, err, tc.typ, tc.mention)
		}
	}
	ok, err := p.Check(Request{Code: "x", Settings: Settings{Egress: []string{"API.GitHub.com:443", "a.example.com"}, Secrets: []string{"github"}}}, "fake")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ok.Egress, ","); got != "a.example.com,api.github.com:443" {
		t.Errorf("egress: got %s; want the canonical, sorted form", got)
	}
	if err := p.Recheck(ok); err != nil {
		t.Errorf("recheck of a checked request: %v", err)
	}
	other, err := p.Check(Request{Code: "x", Settings: Settings{Egress: []string{"b.example.com", "api.github.com:443"}, Secrets: []string{"github"}}}, "fake")
	if err != nil {
		t.Fatal(err)
	}
	noSecret, _ := p.Check(Request{Code: "x", Settings: Settings{Egress: []string{"API.GitHub.com:443", "a.example.com"}}}, "fake")
	plain, _ := p.Check(Request{Code: "x"}, "fake")
	if ok.Digest == other.Digest || ok.Digest == noSecret.Digest || noSecret.Digest == plain.Digest {
		t.Errorf("egress and secrets must be part of the digest: %s %s %s %s", ok.Digest, other.Digest, noSecret.Digest, plain.Digest)
	}
	if s := ok.Summary(); len(s.Egress) != 2 || len(s.Secrets) != 1 {
		t.Errorf("the reviewer's summary must show egress and secret names: %+v", s)
	}
}
