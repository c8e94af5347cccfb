package guard

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxEgressPatterns is how many egress patterns one request (or one policy) may hold.
const MaxEgressPatterns = 32

// MaxSecretNames is how many secrets one request may name.
const MaxSecretNames = 16

// Ports a pattern without a port allows.
const (
	DefaultHTTPPort  = 80
	DefaultHTTPSPort = 443
)

// EgressPattern is one parsed, normalized egress pattern: a host name, a wildcard domain, or an
// IP prefix (a single address is a /32 or /128), each with an optional port.
//
// Syntax (see ParseEgressPattern): "api.example.com", "api.example.com:8443", "*.example.com",
// "*.example.com:443", "203.0.113.7", "203.0.113.0/24:443", "2001:db8::1", "[2001:db8::1]:443",
// "[2001:db8::/32]:443".
//
// Names are ASCII only: an internationalized name must be written in its punycode form
// ("xn--bcher-kva.example"); a name with any non-ASCII byte is a ToolUsageError rather than a
// silent conversion, so that what the reviewer reads is exactly what the proxy matches.
//
// A name pattern matches a target written as that name, never an IP literal; a prefix pattern
// matches only a target written as an IP literal. The proxy never resolves a name that no name
// pattern allows, so DNS cannot be used to leak data through names it was not allowed to look up.
type EgressPattern struct {
	// Name is the lower-case host name without a trailing dot, or the domain of a wildcard; empty
	// for a prefix pattern.
	Name string
	// Wildcard makes the pattern match every name strictly under Name ("*.example.com" matches
	// "a.example.com" and "a.b.example.com", not "example.com").
	Wildcard bool
	// Prefix is the masked IP prefix of a prefix pattern; invalid for a name pattern.
	Prefix netip.Prefix
	// Port is the one port allowed; zero means 80 and 443.
	Port uint16
}

// IsPrefix reports whether p is an IP or CIDR pattern.
func (p EgressPattern) IsPrefix() bool { return p.Name == "" }

// Ports returns the ports p allows.
func (p EgressPattern) Ports() []uint16 {
	if p.Port == 0 {
		return []uint16{DefaultHTTPPort, DefaultHTTPSPort}
	}
	return []uint16{p.Port}
}

func (p EgressPattern) allowsPort(port uint16) bool {
	return slices.Contains(p.Ports(), port)
}

// String returns the canonical form of p: what the reviewer reads and what the digest encodes.
// Parsing it again gives p.
func (p EgressPattern) String() string {
	var host string
	switch {
	case p.Name != "" && p.Wildcard:
		host = "*." + p.Name
	case p.Name != "":
		host = p.Name
	case p.Prefix.IsSingleIP() && p.Prefix.Addr().Is4():
		host = p.Prefix.Addr().String()
	case p.Prefix.IsSingleIP():
		host = "[" + p.Prefix.Addr().String() + "]"
	case p.Prefix.Addr().Is4():
		host = p.Prefix.String()
	default:
		host = "[" + p.Prefix.String() + "]"
	}
	if p.Port == 0 {
		return host
	}
	return host + ":" + strconv.Itoa(int(p.Port))
}

// MatchName reports whether p allows a connection to the host name (already normalized with
// NormalizeEgressName) on port.
func (p EgressPattern) MatchName(name string, port uint16) bool {
	if p.Name == "" || !p.allowsPort(port) {
		return false
	}
	if p.Wildcard {
		return strings.HasSuffix(name, "."+p.Name)
	}
	return name == p.Name
}

// MatchAddr reports whether p allows a connection to the IP literal addr on port. An IPv4-mapped
// IPv6 address is matched as its IPv4 form.
func (p EgressPattern) MatchAddr(addr netip.Addr, port uint16) bool {
	if p.Name != "" || !p.allowsPort(port) {
		return false
	}
	return p.Prefix.Contains(addr.Unmap())
}

// covers reports whether p allows everything q allows on port.
func (p EgressPattern) covers(q EgressPattern, port uint16) bool {
	if !p.allowsPort(port) {
		return false
	}
	switch {
	case p.IsPrefix() != q.IsPrefix():
		return false
	case p.IsPrefix():
		return p.Prefix.Bits() <= q.Prefix.Bits() && p.Prefix.Contains(q.Prefix.Addr())
	case q.Wildcard:
		return p.Wildcard && (q.Name == p.Name || strings.HasSuffix(q.Name, "."+p.Name))
	default:
		return p.MatchName(q.Name, port)
	}
}

// ParseEgressPattern parses and normalizes one pattern: host[:port], *.domain[:port], an IP, or a
// CIDR, with IPv6 forms in brackets when a port follows. Bad syntax is a ToolUsageError.
//
// Refused: an empty pattern, a bare "*" or a wildcard over a single label ("*.com"), a name with a
// non-ASCII byte (write punycode), a label over 63 bytes or a name over 253, characters other than
// letters, digits, '-' and '_', a label starting or ending with '-', a name whose last label is
// all digits (resolvers read "1.2.3" as an address), an IPv6 zone, an IPv4-mapped IPv6 form
// (write the IPv4 address), a port outside 1-65535.
func ParseEgressPattern(s string) (EgressPattern, error) {
	var p EgressPattern
	if s == "" {
		return p, toolUsagef("egress pattern is empty")
	}
	if len(s) > 300 {
		return p, toolUsagef("egress pattern %.40q...: longer than 300 bytes", s)
	}
	host, port, err := splitEgressPort(s)
	if err != nil {
		return p, toolUsagef("egress pattern %q: %v", s, err)
	}
	p.Port = port
	bracketed := strings.HasPrefix(host, "[")
	if bracketed {
		if !strings.HasSuffix(host, "]") {
			return p, toolUsagef("egress pattern %q: unclosed '['", s)
		}
		host = host[1 : len(host)-1]
	}
	if pfx, ok, err := parseEgressPrefix(host); ok {
		if err != nil {
			return p, toolUsagef("egress pattern %q: %v", s, err)
		}
		if bracketed && !pfx.Addr().Is6() {
			return p, toolUsagef("egress pattern %q: brackets are only for IPv6", s)
		}
		p.Prefix = pfx
		return p, nil
	}
	if bracketed {
		return p, toolUsagef("egress pattern %q: brackets hold an IPv6 address or prefix", s)
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		p.Wildcard = true
		host = rest
	}
	name, err := NormalizeEgressName(host)
	if err != nil {
		return p, toolUsagef("egress pattern %q: %v", s, err)
	}
	if p.Wildcard && !strings.Contains(name, ".") {
		return p, toolUsagef("egress pattern %q: a wildcard needs a domain of two labels or more", s)
	}
	p.Name = name
	return p, nil
}

// splitEgressPort splits "host:port", "[v6]:port", "v4/len:port" or a bare host (IPv6 without
// brackets included) into host and port (zero when absent).
func splitEgressPort(s string) (string, uint16, error) {
	var host, port string
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.Index(s, "]")
		if end < 0 {
			return "", 0, fmt.Errorf("unclosed '['")
		}
		host = s[:end+1]
		rest := s[end+1:]
		if rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return "", 0, fmt.Errorf("unexpected %q after ']'", rest)
			}
			port = p
			if port == "" {
				return "", 0, fmt.Errorf("empty port")
			}
		}
	case strings.Count(s, ":") == 1:
		host, port, _ = strings.Cut(s, ":")
		if port == "" {
			return "", 0, fmt.Errorf("empty port")
		}
	default:
		host = s // no port, or a bare IPv6 address
	}
	if port == "" {
		return host, 0, nil
	}
	n, err := parsePort(port)
	return host, n, err
}

func parsePort(s string) (uint16, error) {
	if s == "" || len(s) > 5 || strings.TrimLeft(s, "0123456789") != "" || s[0] == '0' {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	return uint16(n), nil
}

// parseEgressPrefix reads an IP or CIDR. ok is false when s does not look like one (so it is a
// name); err says why an address-like s is refused.
func parseEgressPrefix(s string) (netip.Prefix, bool, error) {
	addrPart, bits, hasBits := strings.Cut(s, "/")
	if strings.Contains(addrPart, "%") {
		return netip.Prefix{}, true, fmt.Errorf("an IPv6 zone is not allowed")
	}
	addr, err := netip.ParseAddr(addrPart)
	if err != nil {
		if strings.Contains(s, ":") || hasBits {
			return netip.Prefix{}, true, fmt.Errorf("not an IP address or CIDR")
		}
		return netip.Prefix{}, false, nil
	}
	if addr.Is4In6() {
		return netip.Prefix{}, true, fmt.Errorf("write the IPv4 form %s, not the IPv4-mapped one", addr.Unmap())
	}
	if !hasBits {
		return netip.PrefixFrom(addr, addr.BitLen()), true, nil
	}
	if bits == "" || strings.TrimLeft(bits, "0123456789") != "" || (len(bits) > 1 && bits[0] == '0') {
		return netip.Prefix{}, true, fmt.Errorf("prefix length %q is not a number", bits)
	}
	n, err := strconv.Atoi(bits)
	if err != nil || n < 0 || n > addr.BitLen() {
		return netip.Prefix{}, true, fmt.Errorf("prefix length %q is out of range", bits)
	}
	return netip.PrefixFrom(addr, n).Masked(), true, nil
}

// NormalizeEgressName lower-cases a host name, drops one trailing dot and checks its syntax: ASCII
// letters, digits, '-' and '_' in dot-separated labels of 1 to 63 bytes, 253 bytes in all, no
// label starting or ending with '-', and a last label that is not all digits. A non-ASCII name is
// refused: write its punycode ("xn--") form. The proxy uses it on CONNECT targets and URL hosts.
func NormalizeEgressName(s string) (string, error) {
	s = strings.TrimSuffix(s, ".")
	if s == "" {
		return "", fmt.Errorf("host name is empty")
	}
	if len(s) > 253 {
		return "", fmt.Errorf("host name is longer than 253 bytes")
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return "", fmt.Errorf("host name %q is not ASCII: write its punycode (xn--) form", s)
		}
	}
	s = strings.ToLower(s)
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", fmt.Errorf("host name %q has an empty label or one longer than 63 bytes", s)
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", fmt.Errorf("host name %q has a label that starts or ends with '-'", s)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("host name %q holds %q", s, c)
			}
		}
	}
	if strings.TrimLeft(labels[len(labels)-1], "0123456789") == "" {
		return "", fmt.Errorf("host name %q ends in a numeric label", s)
	}
	return s, nil
}

// ParsePrivateOK parses the worker's --egress-private-ok list of CIDRs (or single addresses):
// prefixes the egress proxy lets through although they are loopback, private, link-local and so
// on. A bad entry is a ConfigError. Prefixes are masked; IPv4-mapped forms are refused.
func ParsePrivateOK(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		pfx, ok, err := parseEgressPrefix(strings.TrimSpace(s))
		if !ok || err != nil {
			return nil, configf("--egress-private-ok %q: want an IP address or CIDR", s)
		}
		out = append(out, pfx)
	}
	return out, nil
}

// ParseEgressPatterns parses a list of patterns (at most MaxEgressPatterns) and returns them
// normalized, without duplicates, sorted by canonical form. Any bad pattern is a ToolUsageError.
func ParseEgressPatterns(list []string) ([]EgressPattern, error) {
	if len(list) > MaxEgressPatterns {
		return nil, toolUsagef("%d egress patterns; at most %d are allowed", len(list), MaxEgressPatterns)
	}
	out := make([]EgressPattern, 0, len(list))
	for _, s := range list {
		p, err := ParseEgressPattern(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return SortEgressPatterns(out), nil
}

// SortEgressPatterns sorts patterns by canonical form and drops duplicates, in place.
func SortEgressPatterns(ps []EgressPattern) []EgressPattern {
	slices.SortFunc(ps, func(a, b EgressPattern) int { return strings.Compare(a.String(), b.String()) })
	return slices.CompactFunc(ps, func(a, b EgressPattern) bool { return a.String() == b.String() })
}

// EgressStrings returns the canonical forms of patterns, in order: the list a reviewer reads and
// the digest encodes.
func EgressStrings(patterns []EgressPattern) []string {
	out := make([]string, len(patterns))
	for i, p := range patterns {
		out[i] = p.String()
	}
	return out
}

// CoversEgress reports a ConfigError naming the first request pattern that the policy patterns
// (the worker's --egress-allow) do not allow in full. A request pattern without a port needs both
// 80 and 443 allowed; those may come from two policy patterns.
func CoversEgress(policy, request []EgressPattern) error {
	for _, q := range request {
		for _, port := range q.Ports() {
			if !slices.ContainsFunc(policy, func(p EgressPattern) bool { return p.covers(q, port) }) {
				return configf("egress %q (port %d) is outside the worker's --egress-allow %s",
					q.String(), port, strings.Join(EgressStrings(policy), ","))
			}
		}
	}
	return nil
}

// CheckSecretNames reports a ToolUsageError for a list of secret names that is too long, has a
// duplicate, or holds a name that is not 1 to 64 of [a-z0-9_.-] starting with a letter or digit.
// Whether each name exists is the worker's to say (the secrets file is the operator's).
func CheckSecretNames(names []string) error {
	if len(names) > MaxSecretNames {
		return toolUsagef("%d secrets named; at most %d are allowed", len(names), MaxSecretNames)
	}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if err := CheckSecretName(n); err != nil {
			return &ToolUsageError{Msg: err.Error()}
		}
		if seen[n] {
			return toolUsagef("secret %q is named twice", n)
		}
		seen[n] = true
	}
	return nil
}

// CheckSecretName reports an error for a secret name that is not 1 to 64 of [a-z0-9_.-] starting
// with a letter or digit.
func CheckSecretName(n string) error {
	if n == "" || len(n) > 64 {
		return fmt.Errorf("secret name %.70q must be 1 to 64 bytes", n)
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '_' || c == '.' || c == '-')
		if !ok {
			return fmt.Errorf("secret name %q: use lower-case letters, digits, '_', '.', '-', starting with a letter or digit", n)
		}
	}
	return nil
}

// CheckEgress parses a request's egress patterns (a ToolUsageError when one is bad or there are
// more than MaxEgressPatterns) and checks that the worker's allowlist covers them (a ConfigError
// otherwise; an empty allowlist means the worker offers no egress and says which flag to set).
// It returns the patterns normalized and sorted, ready for the digest.
func CheckEgress(allow []EgressPattern, requested []string) ([]EgressPattern, error) {
	ps, err := ParseEgressPatterns(requested)
	if err != nil {
		return nil, err
	}
	if len(ps) > 0 && len(allow) == 0 {
		return nil, configf("the request asks for egress %s but the worker offers none: set its --egress-allow",
			strings.Join(EgressStrings(ps), ","))
	}
	if err := CoversEgress(allow, ps); err != nil {
		return nil, err
	}
	return ps, nil
}

// AppendEgressDigest appends the egress part of the canonical encoding: nothing at all when the
// request has neither egress nor secrets (so digests of requests without them are unchanged),
// otherwise a marker, the count and canonical form of each pattern, then the count and each
// secret name. egress must be sorted as ParseEgressPatterns leaves it, secrets sorted.
func AppendEgressDigest(b []byte, egress []EgressPattern, secrets []string) []byte {
	if len(egress) == 0 && len(secrets) == 0 {
		return b
	}
	b = appendString(b, "egress/v1")
	b = binary.BigEndian.AppendUint64(b, uint64(len(egress)))
	for _, p := range egress {
		b = appendString(b, p.String())
	}
	b = binary.BigEndian.AppendUint64(b, uint64(len(secrets)))
	for _, s := range secrets {
		b = appendString(b, s)
	}
	return b
}

// EgressAttempt is one connection attempt through the egress proxy, as the result and events
// carry it: one CONNECT, or one plain http:// request. It never holds payloads or secret values.
type EgressAttempt struct {
	Time time.Time `json:"time"`
	// Kind is "connect" or "http".
	Kind string `json:"kind"`
	Host string `json:"host"`
	Port uint16 `json:"port"`
	// IP is the address dialled (or the one refused); empty when none was resolved.
	IP string `json:"ip,omitempty"`
	// Allowed says the policy let the attempt through.
	Allowed bool `json:"allowed"`
	// Reason says why the attempt was refused, or why an allowed one failed or was cut.
	Reason   string `json:"reason,omitempty"`
	BytesOut int64  `json:"bytes_out"`
	BytesIn  int64  `json:"bytes_in"`
	// Secrets names the secrets whose headers the proxy added.
	Secrets []string `json:"secrets,omitempty"`
	// TLS says how the proxy handled TLS: "" (plain http, or a CONNECT tunnelled as is),
	// "intercepted" (a CONNECT to a secret's host) or "originated" (http:// to a secret's host).
	TLS string `json:"tls,omitempty"`
	// Phase is EgressPhaseInstall for the sandbox host's fetches from the package index before
	// the code ran; "" for the code's own connections.
	Phase string `json:"phase,omitempty"`
}

// EgressPhaseInstall is the Phase of the package install's fetches.
const EgressPhaseInstall = "install"

// EgressReport is the egress audit of one run.
type EgressReport struct {
	Attempts []EgressAttempt `json:"attempts"`
	// Dropped counts attempts past the connection cap that were refused but not listed.
	Dropped  int   `json:"dropped,omitempty"`
	BytesOut int64 `json:"bytes_out"`
	BytesIn  int64 `json:"bytes_in"`
	// ByteCapReached says the byte cap cut a transfer or refused an attempt.
	ByteCapReached bool `json:"byte_cap_reached,omitempty"`
	// ConnCapReached says the connection cap refused an attempt.
	ConnCapReached bool `json:"conn_cap_reached,omitempty"`
	// Lost says the egress proxy that carried the run's connections ran in a worker that died
	// while the code ran (another worker adopted the run): the attempts it saw are not listed,
	// and the code's connections failed from then on.
	Lost bool `json:"lost,omitempty"`
}

// MaxEgressConns bounds a policy's EgressMaxConns, so that the audit of one run (each attempt well
// under 1 KB of JSON) stays far below Temporal's payload limit.
const MaxEgressConns = 1024

// checkNetwork applies the policy to a checked request's network, egress and secrets: open
// network only with AllowOpenNetwork and never together with egress; egress patterns within
// EgressAllow, in canonical form (Check leaves them so); secrets only by names the worker has,
// sorted, and only with egress.
func (p Policy) checkNetwork(c *Checked) error {
	if c.Network && !p.AllowOpenNetwork {
		return configf("network=true asks for an open network (open egress: the host's services and cloud metadata included), which this worker refuses; ask for egress to named hosts instead, or start the worker with --allow-open-network")
	}
	if c.Network && len(c.Egress) > 0 {
		return configf("a request asks for either network=true or egress, not both")
	}
	allow, err := ParseEgressPatterns(p.EgressAllow)
	if err != nil {
		return configf("policy: --egress-allow: %v", err)
	}
	ps, err := CheckEgress(allow, c.Egress)
	if err != nil {
		return err
	}
	if canon := EgressStrings(ps); !slices.Equal(canon, c.Egress) && len(c.Egress) > 0 {
		c.Egress = canon
	}
	if err := CheckSecretNames(c.Secrets); err != nil {
		return err
	}
	if !slices.IsSorted(c.Secrets) {
		return toolUsagef("secret names must be sorted")
	}
	for _, s := range c.Secrets {
		if !slices.Contains(p.SecretNames, s) {
			return configf("secret %q is not one of this worker's secrets", s)
		}
	}
	if len(c.Secrets) > 0 && len(c.Egress) == 0 {
		return configf("secrets are added to egress requests only: name the hosts in egress too")
	}
	return nil
}
