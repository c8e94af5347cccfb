package egress

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"os"
	"slices"
	"strings"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/smallfile"
)

// SecretRule is one line of the worker's secrets file: the secret's name, the host pattern it is
// for, and the header the proxy adds. The value is unexported and prints as "<hidden>".
type SecretRule struct {
	// Name is what a request names ("github").
	Name string
	// Pattern is the host (or *.domain) the header is sent to, with an optional port. It is
	// never an IP pattern.
	Pattern guard.EgressPattern
	// Header is the canonical header name ("Authorization").
	Header string
	value  secretValue
}

// String shows the rule without its value.
func (r SecretRule) String() string {
	return r.Name + " " + r.Pattern.String() + " " + r.Header + ": <hidden>"
}

// GoString shows the rule without its value.
func (r SecretRule) GoString() string { return "egress.SecretRule{" + r.String() + "}" }

type secretValue string

func (secretValue) String() string               { return "<hidden>" }
func (secretValue) GoString() string             { return "<hidden>" }
func (secretValue) MarshalText() ([]byte, error) { return []byte("<hidden>"), nil }

// Secrets is the worker's parsed secrets file.
type Secrets struct {
	rules []SecretRule
}

// refusedSecretHeaders may not be set by a secret: they frame the request or belong to the proxy.
var refusedSecretHeaders = []string{
	"Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Te", "Trailer",
	"Upgrade", "Expect", "Proxy-Authorization", "Proxy-Connection", "Proxy-Authenticate",
}

// ParseSecrets reads a secrets file. Each line that is not blank or a '#' comment is
//
//	NAME HOSTPATTERN Header-Name: value
//
// NAME is a secret name (guard.CheckSecretName), HOSTPATTERN a host or *.domain egress pattern
// with an optional port (not an IP), then one HTTP header. The value is everything after the
// colon, trimmed; it may hold spaces ("Authorization: Bearer abc"). A name may appear on several
// lines (several hosts or headers for one secret). Errors name the line, never its value.
func ParseSecrets(r io.Reader) (*Secrets, error) {
	s := &Secrets{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rule, err := parseSecretLine(line)
		if err != nil {
			return nil, fmt.Errorf("egress secrets: line %d: %w", n, err)
		}
		s.rules = append(s.rules, rule)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("egress secrets: read: %w", err)
	}
	return s, nil
}

func parseSecretLine(line string) (SecretRule, error) {
	var r SecretRule
	name, rest := cutSpace(line)
	if err := guard.CheckSecretName(name); err != nil {
		return r, err
	}
	pattern, header := cutSpace(rest)
	if pattern == "" || header == "" {
		return r, fmt.Errorf("want NAME HOSTPATTERN Header-Name: value")
	}
	p, err := guard.ParseEgressPattern(pattern)
	if err != nil {
		return r, err
	}
	if p.IsPrefix() {
		return r, fmt.Errorf("secret %q: the host pattern must be a name, not an IP or CIDR", name)
	}
	hname, value, ok := strings.Cut(strings.TrimSpace(header), ":")
	if !ok {
		return r, fmt.Errorf("secret %q: want Header-Name: value after the host pattern", name)
	}
	if hname == "" || strings.ContainsFunc(hname, func(c rune) bool { return !isTokenChar(c) }) {
		return r, fmt.Errorf("secret %q: header name %q is not an HTTP token", name, hname)
	}
	hname = textproto.CanonicalMIMEHeaderKey(hname)
	if slices.Contains(refusedSecretHeaders, hname) {
		return r, fmt.Errorf("secret %q: header %s may not be set by a secret", name, hname)
	}
	value = strings.TrimSpace(value)
	if value == "" {
		return r, fmt.Errorf("secret %q: empty header value", name)
	}
	if strings.ContainsFunc(value, func(c rune) bool { return c < 0x20 && c != '\t' || c == 0x7f }) {
		return r, fmt.Errorf("secret %q: the header value holds a control character", name)
	}
	return SecretRule{Name: name, Pattern: p, Header: hname, value: secretValue(value)}, nil
}

// cutSpace splits s at its first run of spaces or tabs.
func cutSpace(s string) (string, string) {
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeft(s[i:], " \t")
}

func isTokenChar(c rune) bool {
	return c < 0x7f && c > 0x20 && !strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c)
}

// maxSecretsFileBytes caps the secrets file: a wrong path (a log, a device) is refused, not read.
const maxSecretsFileBytes = 1 << 20

// LoadSecrets reads the secrets file at path. A file that others (not owner or group) may read
// or write is refused: chmod 600 or 640 it.
func LoadSecrets(path string) (*Secrets, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("egress secrets: %w", err)
	}
	if fi.Mode().Perm()&0o007 != 0 {
		return nil, fmt.Errorf("egress secrets: %s has mode %v; others may not read it: chmod 600 or 640", path, fi.Mode().Perm())
	}
	data, err := smallfile.Read(path, maxSecretsFileBytes)
	if err != nil {
		return nil, fmt.Errorf("egress secrets: %w", err)
	}
	return ParseSecrets(bytes.NewReader(data))
}

// Names returns the secret names the file defines, sorted, each once. Reviewers see these; a
// request may name them.
func (s *Secrets) Names() []string {
	var names []string
	for _, r := range s.rules {
		names = append(names, r.Name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// HeadersFor returns the headers of every secret whose host pattern matches host:port, and
// those secrets' names (sorted, each once): what the sandbox host sends to a private package
// index. The values never leave the worker.
func (s *Secrets) HeadersFor(host string, port uint16) (http.Header, []string) {
	h := http.Header{}
	var names []string
	for _, r := range s.rules {
		if r.Pattern.MatchName(host, port) {
			h.Add(r.Header, string(r.value))
			names = append(names, r.Name)
		}
	}
	slices.Sort(names)
	return h, slices.Compact(names)
}

// Select returns the rules of the named secrets, for one run's Config.Secrets. A name the file
// does not define is a guard.ConfigError.
func (s *Secrets) Select(names []string) ([]SecretRule, error) {
	var out []SecretRule
	for _, n := range names {
		found := false
		for _, r := range s.rules {
			if r.Name == n {
				out = append(out, r)
				found = true
			}
		}
		if !found {
			return nil, &guard.ConfigError{Msg: fmt.Sprintf("secret %q is not in the worker's secrets file", n)}
		}
	}
	return out, nil
}
