package guard

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
)

func TestParseEgressPattern(t *testing.T) {
	tests := []struct {
		in   string
		want string // canonical form; "" means a ToolUsageError
	}{
		{"api.example.com", "api.example.com"},
		{"API.Example.COM.", "api.example.com"},
		{"api.example.com:8443", "api.example.com:8443"},
		{"*.example.com", "*.example.com"},
		{"*.Example.com:443", "*.example.com:443"},
		{"localhost", "localhost"},
		{"xn--bcher-kva.example", "xn--bcher-kva.example"},
		{"_dmarc.example.com", "_dmarc.example.com"},
		{"203.0.113.7", "203.0.113.7"},
		{"203.0.113.7:443", "203.0.113.7:443"},
		{"203.0.113.9/24", "203.0.113.0/24"},
		{"203.0.113.0/24:8080", "203.0.113.0/24:8080"},
		{"0.0.0.0/0", "0.0.0.0/0"},
		{"2001:db8::1", "[2001:db8::1]"},
		{"[2001:DB8::1]", "[2001:db8::1]"},
		{"[2001:db8::1]:443", "[2001:db8::1]:443"},
		{"2001:db8::/32", "[2001:db8::/32]"},
		{"[2001:db8::/32]:443", "[2001:db8::/32]:443"},
		{"", ""},
		{"*", ""},
		{"*.com", ""},
		{"*.*.example.com", ""},
		{"a.*.example.com", ""},
		{"bücher.example", ""},
		{"exa mple.com", ""},
		{"-bad.example.com", ""},
		{"bad-.example.com", ""},
		{"a..example.com", ""},
		{".example.com", ""},
		{"example.com:", ""},
		{"example.com:0", ""},
		{"example.com:65536", ""},
		{"example.com:080", ""},
		{"example.com:http", ""},
		{"example.com:443:1", ""},
		{"1.2.3", ""},
		{"1.2.3.4.5", ""},
		{"example.123", ""},
		{"10.0.0.0/33", ""},
		{"10.0.0.0/", ""},
		{"10.0.0.0/08", ""},
		{"[10.0.0.1]:443", ""},
		{"[example.com]:443", ""},
		{"[2001:db8::1", ""},
		{"[2001:db8::1]x", ""},
		{"fe80::1%eth0", ""},
		{"::ffff:169.254.169.254", ""},
		{"2001:db8::1:443x", ""},
		{"http://example.com", ""},
		{"example.com/path", ""},
		{"user@example.com", ""},
	}
	for _, tt := range tests {
		p, err := ParseEgressPattern(tt.in)
		if tt.want == "" {
			var tu *ToolUsageError
			if !errors.As(err, &tu) {
				t.Errorf("ParseEgressPattern(%q) = %v, %v; want a ToolUsageError", tt.in, p, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseEgressPattern(%q): got error %v; want %q", tt.in, err, tt.want)
			continue
		}
		if got := p.String(); got != tt.want {
			t.Errorf("ParseEgressPattern(%q).String() = %q; want %q", tt.in, got, tt.want)
		}
		again, err := ParseEgressPattern(p.String())
		if err != nil || again != p {
			t.Errorf("ParseEgressPattern(%q) round trip: got %v, %v; want %v", p.String(), again, err, p)
		}
	}
}

func TestParseEgressPatternsCountAndOrder(t *testing.T) {
	got, err := ParseEgressPatterns([]string{"b.example.com", "A.example.com", "a.example.com", "10.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.1", "a.example.com", "b.example.com"}
	if !slices.Equal(EgressStrings(got), want) {
		t.Errorf("got %v; want %v", EgressStrings(got), want)
	}
	many := make([]string, MaxEgressPatterns+1)
	for i := range many {
		many[i] = "example.com"
	}
	if _, err := ParseEgressPatterns(many); err == nil {
		t.Errorf("got nil error for %d patterns; want a ToolUsageError", len(many))
	}
	if _, err := ParseEgressPatterns(many[:MaxEgressPatterns]); err != nil {
		t.Errorf("got %v for %d patterns; want nil", err, MaxEgressPatterns)
	}
}

func mustPatterns(t *testing.T, list ...string) []EgressPattern {
	t.Helper()
	ps, err := ParseEgressPatterns(list)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestEgressMatch(t *testing.T) {
	tests := []struct {
		pattern string
		host    string
		port    uint16
		want    bool
	}{
		{"api.example.com", "api.example.com", 443, true},
		{"api.example.com", "api.example.com", 80, true},
		{"api.example.com", "api.example.com", 8443, false},
		{"api.example.com:8443", "api.example.com", 8443, true},
		{"api.example.com:8443", "api.example.com", 443, false},
		{"api.example.com", "x.api.example.com", 443, false},
		{"*.example.com", "a.example.com", 443, true},
		{"*.example.com", "a.b.example.com", 443, true},
		{"*.example.com", "example.com", 443, false},
		{"*.example.com", "badexample.com", 443, false},
		{"203.0.113.0/24", "203.0.113.9", 443, true},
		{"203.0.113.0/24", "203.0.114.9", 443, false},
		{"203.0.113.0/24", "::ffff:203.0.113.9", 443, true},
		{"[2001:db8::/32]:443", "2001:db8::5", 443, true},
		{"[2001:db8::/32]:443", "2001:db8::5", 80, false},
		{"203.0.113.7", "example.com", 443, false},
		{"example.com", "203.0.113.7", 443, false},
	}
	for _, tt := range tests {
		p := mustPatterns(t, tt.pattern)[0]
		var got bool
		if a, err := netip.ParseAddr(tt.host); err == nil {
			got = p.MatchAddr(a, tt.port)
		} else {
			got = p.MatchName(tt.host, tt.port)
		}
		if got != tt.want {
			t.Errorf("%q matches %s port %d: got %v; want %v", tt.pattern, tt.host, tt.port, got, tt.want)
		}
	}
}

func TestCoversEgress(t *testing.T) {
	tests := []struct {
		policy  []string
		request []string
		want    bool
	}{
		{[]string{"api.example.com"}, []string{"api.example.com"}, true},
		{[]string{"api.example.com"}, []string{"api.example.com:443"}, true},
		{[]string{"api.example.com"}, []string{"api.example.com:8443"}, false},
		{[]string{"api.example.com:443"}, []string{"api.example.com"}, false},
		{[]string{"api.example.com:443", "api.example.com:80"}, []string{"api.example.com"}, true},
		{[]string{"*.example.com"}, []string{"api.example.com"}, true},
		{[]string{"*.example.com"}, []string{"*.api.example.com"}, true},
		{[]string{"*.example.com"}, []string{"*.example.com"}, true},
		{[]string{"*.example.com"}, []string{"example.com"}, false},
		{[]string{"api.example.com"}, []string{"*.api.example.com"}, false},
		{[]string{"*.api.example.com"}, []string{"*.example.com"}, false},
		{[]string{"10.0.0.0/8"}, []string{"10.1.0.0/16"}, true},
		{[]string{"10.0.0.0/8"}, []string{"10.1.2.3"}, true},
		{[]string{"10.0.0.0/16"}, []string{"10.0.0.0/8"}, false},
		{[]string{"10.0.0.0/8"}, []string{"example.com"}, false},
		{[]string{"example.com"}, []string{"10.0.0.1"}, false},
		{[]string{"0.0.0.0/0"}, []string{"2001:db8::1"}, false},
		{[]string{"a.example.com", "b.example.com"}, []string{"b.example.com", "a.example.com"}, true},
		{[]string{"a.example.com"}, []string{"a.example.com", "c.example.com"}, false},
		{nil, nil, true},
		{nil, []string{"example.com"}, false},
	}
	for _, tt := range tests {
		err := CoversEgress(mustPatterns(t, tt.policy...), mustPatterns(t, tt.request...))
		if got := err == nil; got != tt.want {
			t.Errorf("CoversEgress(%v, %v) = %v; want ok=%v", tt.policy, tt.request, err, tt.want)
		}
		var ce *ConfigError
		if err != nil && !errors.As(err, &ce) {
			t.Errorf("CoversEgress(%v, %v) = %T; want a ConfigError", tt.policy, tt.request, err)
		}
	}
}

func TestCheckSecretNames(t *testing.T) {
	tests := []struct {
		names []string
		ok    bool
	}{
		{nil, true},
		{[]string{"github", "pypi-token", "a.b_c"}, true},
		{[]string{""}, false},
		{[]string{"GitHub"}, false},
		{[]string{"-x"}, false},
		{[]string{"a b"}, false},
		{[]string{"github", "github"}, false},
	}
	for _, tt := range tests {
		err := CheckSecretNames(tt.names)
		if got := err == nil; got != tt.ok {
			t.Errorf("CheckSecretNames(%q) = %v; want ok=%v", tt.names, err, tt.ok)
		}
	}
}

func FuzzParseEgressPattern(f *testing.F) {
	for _, s := range []string{"api.example.com:443", "*.example.com", "[2001:db8::/32]:443", "10.0.0.0/8", "::1", "a..b", "[::ffff:1.2.3.4]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseEgressPattern(s)
		if err != nil {
			var tu *ToolUsageError
			if !errors.As(err, &tu) {
				t.Fatalf("ParseEgressPattern(%q) error %T; want a ToolUsageError", s, err)
			}
			return
		}
		again, err := ParseEgressPattern(p.String())
		if err != nil || again != p {
			t.Fatalf("round trip of %q via %q: got %v, %v; want %v", s, p.String(), again, err, p)
		}
		if err := CoversEgress([]EgressPattern{p}, []EgressPattern{p}); err != nil {
			t.Fatalf("%q does not cover itself: %v", p.String(), err)
		}
	})
}

func TestCheckEgress(t *testing.T) {
	allow := mustPatterns(t, "*.example.com", "10.0.0.0/8")
	tests := []struct {
		allow     []EgressPattern
		requested []string
		want      string // "", "ToolUsageError" or "ConfigError"
	}{
		{allow, nil, ""},
		{allow, []string{"api.example.com", "10.1.2.3:443"}, ""},
		{allow, []string{"10.1.2.3:5432"}, TypeConfigError},
		{allow, []string{"api.example.org"}, TypeConfigError},
		{nil, []string{"api.example.com"}, TypeConfigError},
		{nil, nil, ""},
		{allow, []string{"bad pattern"}, TypeToolUsageError},
	}
	for _, tt := range tests {
		_, err := CheckEgress(tt.allow, tt.requested)
		if got := TypeOf(err); got != tt.want {
			t.Errorf("CheckEgress(%v, %q) = %v; want %q", EgressStrings(tt.allow), tt.requested, err, tt.want)
		}
	}
}

func TestAppendEgressDigest(t *testing.T) {
	if got := AppendEgressDigest([]byte("x"), nil, nil); string(got) != "x" {
		t.Errorf("no egress: got %q; want the input unchanged", got)
	}
	a := AppendEgressDigest(nil, mustPatterns(t, "a.example.com"), nil)
	b := AppendEgressDigest(nil, mustPatterns(t, "a.example.com:443"), nil)
	c := AppendEgressDigest(nil, mustPatterns(t, "a.example.com"), []string{"github"})
	if string(a) == string(b) || string(a) == string(c) {
		t.Error("different egress or secrets encode the same; want them distinct")
	}
}

func TestParsePrivateOK(t *testing.T) {
	got, err := ParsePrivateOK([]string{"127.0.0.0/8", " 10.9.1.2/16", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.9.0.0/16"), netip.MustParsePrefix("::1/128")}
	if !slices.Equal(got, want) {
		t.Errorf("got %v; want %v", got, want)
	}
	for _, bad := range []string{"", "example.com", "10.0.0.0/33", "::ffff:10.0.0.1"} {
		if _, err := ParsePrivateOK([]string{bad}); TypeOf(err) != TypeConfigError {
			t.Errorf("ParsePrivateOK(%q) = %v; want a ConfigError", bad, err)
		}
	}
}
