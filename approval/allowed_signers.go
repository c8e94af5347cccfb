package approval

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandboxflow/sandboxflow/internal/smallfile"
)

// Namespace is the SSHSIG namespace of every approval signature (ssh-keygen -Y sign -n).
const Namespace = "sandboxflow-approval"

// maxAllowedSignersBytes bounds the reviewers file.
const maxAllowedSignersBytes = 1 << 20

// Key is one reviewer key: a line of the reviewers file. Its JSON form is what the workflow
// records in history.
type Key struct {
	// Principals are the names (or ssh_config patterns such as *@example.com) the key may sign
	// for. At least one.
	Principals []string `json:"principals"`
	// KeyType is the SSH key type, one of the KeyType* constants.
	KeyType string `json:"key_type"`
	// PublicKey is the key in authorized_keys form: "type base64".
	PublicKey string `json:"public_key"`
	// Fingerprint is OpenSSH's SHA256 fingerprint ("SHA256:..."), as ssh-keygen -l prints it.
	Fingerprint string `json:"fingerprint"`
	// Namespaces is the namespaces= pattern list, if the line had one; the key then signs
	// approvals only if it matches Namespace.
	Namespaces string `json:"namespaces,omitempty"`

	ValidAfter  time.Time `json:"valid_after,omitzero"`  // valid-after=, if set: the key is refused before this time
	ValidBefore time.Time `json:"valid_before,omitzero"` // valid-before=, if set: the key is refused after this time
	// Comment is the text after the key, if any.
	Comment string `json:"comment,omitempty"`

	pub *publicKey
}

// Reviewers is the set of keys whose signatures approve or deny runs. Parse it from an OpenSSH
// allowed_signers file with ParseAllowedSigners or LoadReviewers; it marshals to JSON and back
// (the keys are parsed again and their fingerprints checked), so a workflow can record the keys
// it verified against. The zero value holds no keys and verifies nothing.
type Reviewers struct {
	keys []Key
	// passkeyOrigin is the one web origin passkey assertions are accepted from (the inbox's,
	// WithPasskeyOrigin); empty refuses every passkey assertion, unless anyOrigin.
	passkeyOrigin string
	// anyOrigin accepts a passkey assertion from any origin of its relying party: the rule of
	// version 1 records (histories recorded before origins were pinned), kept so they replay.
	anyOrigin bool
}

// reviewersJSON is the recorded form of Reviewers. Version 1 (recorded before issue 27) has no
// passkey origin and accepts passkey assertions from any origin of their relying party; version 2
// records the origin they must come from, and none refuses them.
type reviewersJSON struct {
	Version       int    `json:"version"`
	Keys          []Key  `json:"keys"`
	PasskeyOrigin string `json:"passkey_origin,omitempty"`
}

const (
	reviewersJSONVersion1 = 1
	reviewersJSONVersion  = 2
)

// WithPasskeyOrigin returns a copy of r that accepts passkey assertions made on the page of
// origin only, scheme://host[:port] exactly as a browser writes it in the client data (no
// default port, no path): https, or http for localhost. The inbox is served at one origin, and
// an assertion made on any other page (another port of the same host, plain http beside https)
// is refused. Without it, a Reviewers refuses every passkey assertion. An empty origin returns
// such a copy.
func (r *Reviewers) WithPasskeyOrigin(origin string) (*Reviewers, error) {
	out := &Reviewers{}
	if r != nil {
		out.keys = r.keys
	}
	if origin == "" {
		return out, nil
	}
	canon, err := CanonicalOrigin(origin)
	if err != nil {
		return nil, err
	}
	out.passkeyOrigin = canon
	return out, nil
}

// PasskeyOrigin returns the origin passkey assertions must come from ("" when none is set).
func (r *Reviewers) PasskeyOrigin() string {
	if r == nil {
		return ""
	}
	return r.passkeyOrigin
}

// CanonicalOrigin checks a web origin a passkey may be used from and returns it as a browser
// serializes it: lower-case scheme and host, the port only when it is not the scheme's default.
// It must be https, or http on localhost, and its host a name (a relying party id), not an IP
// address.
func CanonicalOrigin(origin string) (string, error) {
	u, err := url.Parse(strings.TrimSuffix(origin, "/"))
	if err != nil || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("approval: passkey origin %q: want scheme://host[:port]", printable(origin))
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if net.ParseIP(host) != nil {
		return "", fmt.Errorf("approval: passkey origin %q: the host must be a name (a relying party id), not an IP address", printable(origin))
	}
	switch {
	case scheme == "https":
		if port == "443" {
			port = ""
		}
	case scheme == "http" && host == "localhost":
		if port == "80" {
			port = ""
		}
	default:
		return "", fmt.Errorf("approval: passkey origin %q: want https (http only for localhost)", printable(origin))
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	}
	return scheme + "://" + host, nil
}

// Keys returns a copy of the keys, in file order.
func (r *Reviewers) Keys() []Key {
	if r == nil {
		return nil
	}
	return append([]Key(nil), r.keys...)
}

// Len returns how many keys r holds.
func (r *Reviewers) Len() int {
	if r == nil {
		return 0
	}
	return len(r.keys)
}

// MarshalJSON encodes r as {"version":2,"keys":[...],"passkey_origin":"..."} (version 1, without
// an origin, for what was decoded from version 1).
func (r Reviewers) MarshalJSON() ([]byte, error) {
	keys := r.keys
	if keys == nil {
		keys = []Key{}
	}
	if r.anyOrigin {
		return json.Marshal(reviewersJSON{Version: reviewersJSONVersion1, Keys: keys})
	}
	return json.Marshal(reviewersJSON{Version: reviewersJSONVersion, Keys: keys, PasskeyOrigin: r.passkeyOrigin})
}

// UnmarshalJSON decodes what MarshalJSON wrote. Every key is parsed again from public_key and
// must match its recorded key type and fingerprint.
func (r *Reviewers) UnmarshalJSON(b []byte) error {
	var v reviewersJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("approval: reviewers json: %w", err)
	}
	var origin string
	switch v.Version {
	case reviewersJSONVersion1:
		if v.PasskeyOrigin != "" {
			return fmt.Errorf("approval: reviewers json: version %d has no passkey origin", v.Version)
		}
	case reviewersJSONVersion:
		if v.PasskeyOrigin != "" {
			canon, err := CanonicalOrigin(v.PasskeyOrigin)
			if err != nil || canon != v.PasskeyOrigin {
				return fmt.Errorf("approval: reviewers json: passkey origin %q is not a canonical origin", printable(v.PasskeyOrigin))
			}
			origin = canon
		}
	default:
		return fmt.Errorf("approval: reviewers json: version %d; want %d or %d", v.Version, reviewersJSONVersion1, reviewersJSONVersion)
	}
	keys := make([]Key, 0, len(v.Keys))
	for i, k := range v.Keys {
		pub, err := parseAuthorized(k.PublicKey)
		if err != nil {
			return fmt.Errorf("approval: reviewers json: key %d: %w", i, err)
		}
		if pub.typ != k.KeyType || pub.fingerprint() != k.Fingerprint {
			return fmt.Errorf("approval: reviewers json: key %d: recorded %s %s; the key is %s %s",
				i, k.KeyType, k.Fingerprint, pub.typ, pub.fingerprint())
		}
		if len(k.Principals) == 0 {
			return fmt.Errorf("approval: reviewers json: key %d (%s): no principals", i, k.Fingerprint)
		}
		for _, p := range k.Principals {
			if err := checkPrincipal(p); err != nil {
				return fmt.Errorf("approval: reviewers json: key %d (%s): %w", i, k.Fingerprint, err)
			}
		}
		k.Principals = append([]string(nil), k.Principals...)
		k.pub = pub
		keys = append(keys, k)
	}
	r.keys = keys
	r.passkeyOrigin = origin
	r.anyOrigin = v.Version == reviewersJSONVersion1
	return nil
}

// parseAuthorized parses "type base64" and checks that the blob's type is the named one.
func parseAuthorized(s string) (*publicKey, error) {
	typ, b64, ok := strings.Cut(s, " ")
	if !ok {
		return nil, errors.New("public key: want \"type base64\"")
	}
	blob, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("public key: base64: %w", err)
	}
	pub, err := parsePublicKey(blob)
	if err != nil {
		return nil, err
	}
	if pub.typ != typ {
		return nil, fmt.Errorf("key type field %q but the key is %s", printable(typ), pub.typ)
	}
	return pub, nil
}

// LoadReviewers reads and parses the allowed_signers file at path (ParseAllowedSigners).
func LoadReviewers(path string) (*Reviewers, error) {
	data, err := smallfile.Read(path, maxAllowedSignersBytes)
	if err != nil {
		return nil, fmt.Errorf("approval: reviewers file: %w", err)
	}
	r, err := ParseAllowedSigners(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return r, nil
}

// ParseAllowedSigners parses an OpenSSH allowed_signers file (ssh-keygen(1), ALLOWED SIGNERS):
// one key a line, "principals [options] keytype base64 [comment]", blank lines and lines
// starting with # ignored. Principals are a comma-separated pattern list, quoted if it holds
// spaces. Options are comma-separated, case-insensitive, values in double quotes:
// namespaces="list" (the key then signs approvals only if the list matches Namespace),
// valid-after="time" and valid-before="time" (YYYYMMDD[Z] or YYYYMMDDHHMM[SS][Z]; local time
// unless Z). cert-authority is refused: certificates are not supported, list each reviewer's
// key instead. Key types other than the KeyType* constants are refused. An error names the
// line. A file with no key is an error.
func ParseAllowedSigners(data []byte) (*Reviewers, error) {
	if len(data) > maxAllowedSignersBytes {
		return nil, fmt.Errorf("approval: allowed_signers: larger than %d bytes", maxAllowedSignersBytes)
	}
	if !utf8.Valid(data) {
		return nil, errors.New("approval: allowed_signers: not valid UTF-8")
	}
	r := &Reviewers{}
	for i, line := range bytes.Split(data, []byte("\n")) {
		s := strings.TrimSpace(strings.TrimSuffix(string(line), "\r"))
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		k, err := parseSignerLine(s)
		if err != nil {
			return nil, fmt.Errorf("approval: allowed_signers line %d: %w", i+1, err)
		}
		r.keys = append(r.keys, k)
	}
	if len(r.keys) == 0 {
		return nil, errors.New("approval: allowed_signers: no reviewer keys")
	}
	return r, nil
}

func parseSignerLine(s string) (Key, error) {
	var k Key
	principals, rest, err := nextField(s)
	if err != nil {
		return k, fmt.Errorf("principals: %w", err)
	}
	if principals == "" {
		return k, errors.New("no principals")
	}
	for _, p := range strings.Split(principals, ",") {
		if err := checkPrincipal(p); err != nil {
			return k, err
		}
		k.Principals = append(k.Principals, p)
	}
	first, after, err := nextField(rest)
	if err != nil {
		return k, err
	}
	if first == "" {
		return k, errors.New("no key after the principals")
	}
	if !looksLikeKey(first, after) {
		if err := parseOptions(first, &k); err != nil {
			return k, err
		}
		if first, after, err = nextField(after); err != nil {
			return k, err
		}
		if first == "" {
			return k, errors.New("no key after the options")
		}
	}
	b64, comment := after, ""
	if i := strings.IndexAny(after, " \t"); i >= 0 {
		b64, comment = after[:i], after[i+1:]
	}
	if b64 == "" {
		return k, fmt.Errorf("key type %q without a key", printable(first))
	}
	pub, err := parseAuthorized(first + " " + b64)
	if err != nil {
		return k, err
	}
	k.pub = pub
	k.KeyType = pub.typ
	k.PublicKey = pub.authorized()
	k.Fingerprint = pub.fingerprint()
	k.Comment = strings.TrimSpace(comment)
	if !k.ValidAfter.IsZero() && !k.ValidBefore.IsZero() && !k.ValidAfter.Before(k.ValidBefore) {
		return k, errors.New("valid-after is not before valid-before")
	}
	return k, nil
}

// looksLikeKey reports whether tok is followed by a base64 SSH key blob, so tok is the key
// type field and not options (options never contain a space outside quotes).
func looksLikeKey(tok, rest string) bool {
	if strings.ContainsAny(tok, "=\",") {
		return false
	}
	b64 := strings.TrimLeft(rest, " \t")
	if i := strings.IndexAny(b64, " \t"); i >= 0 {
		b64 = b64[:i]
	}
	blob, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return false
	}
	r := &wireReader{b: blob}
	typ, err := r.string()
	return err == nil && len(typ) > 0
}

// nextField returns the first space-separated field of s (double quotes keep spaces inside a
// field; the quotes are removed when they enclose the whole field) and the rest, trimmed.
func nextField(s string) (field, rest string, err error) {
	s = strings.TrimLeft(s, " \t")
	i, open := unquotedIndex(s, " \t")
	if open {
		return "", "", errors.New("unterminated quote")
	}
	field, rest = s[:i], strings.TrimLeft(s[i:], " \t")
	if len(field) >= 2 && field[0] == '"' && field[len(field)-1] == '"' && !strings.Contains(field[1:len(field)-1], "\"") {
		field = field[1 : len(field)-1]
	}
	return field, rest, nil
}

// unquotedIndex returns the index of the first byte of s that is one of stops and stands outside
// double quotes (len(s) when there is none), and whether a quote was left open. Inside quotes a
// backslash escapes the next byte.
func unquotedIndex(s, stops string) (i int, open bool) {
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && open && i+1 < len(s):
			i++
		case c == '"':
			open = !open
		case !open && strings.IndexByte(stops, c) >= 0:
			return i, false
		}
	}
	return i, open
}

// parseOptions parses the comma-separated options field into k.
func parseOptions(s string, k *Key) error {
	seen := map[string]bool{}
	for len(s) > 0 {
		end, _ := unquotedIndex(s, ",")
		opt := s[:end]
		if end < len(s) {
			s = s[end+1:]
			if s == "" {
				return errors.New("options: trailing comma")
			}
		} else {
			s = ""
		}
		name, value, hasValue := strings.Cut(opt, "=")
		name = strings.ToLower(name)
		if seen[name] {
			return fmt.Errorf("option %s given twice", printable(name))
		}
		seen[name] = true
		if hasValue {
			if len(value) < 2 || value[0] != '"' || value[len(value)-1] != '"' {
				return fmt.Errorf("option %s: the value must be in double quotes", printable(name))
			}
			value = strings.ReplaceAll(value[1:len(value)-1], `\"`, `"`)
		}
		switch name {
		case "cert-authority":
			return errors.New("cert-authority is not supported: list each reviewer's own key instead of a certificate authority")
		case "namespaces":
			if !hasValue || value == "" {
				return errors.New("namespaces: want namespaces=\"list\"")
			}
			if err := checkText(value); err != nil {
				return fmt.Errorf("namespaces: %w", err)
			}
			k.Namespaces = value
		case "valid-after", "valid-before":
			if !hasValue {
				return fmt.Errorf("%s: want %s=\"YYYYMMDD[HHMM[SS]][Z]\"", name, name)
			}
			t, err := parseKeyTime(value)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if name == "valid-after" {
				k.ValidAfter = t
			} else {
				k.ValidBefore = t
			}
		default:
			return fmt.Errorf("option %q is not supported (supported: namespaces, valid-after, valid-before)", printable(name))
		}
	}
	return nil
}

// parseKeyTime parses ssh-keygen's YYYYMMDD[Z] and YYYYMMDDHHMM[SS][Z]; without Z the time is
// in the local time zone, as ssh-keygen reads it.
func parseKeyTime(s string) (time.Time, error) {
	loc := time.Local
	v := s
	if strings.HasSuffix(v, "Z") {
		loc = time.UTC
		v = strings.TrimSuffix(v, "Z")
	}
	var layout string
	switch len(v) {
	case 8:
		layout = "20060102"
	case 12:
		layout = "200601021504"
	case 14:
		layout = "20060102150405"
	default:
		return time.Time{}, fmt.Errorf("%q: want YYYYMMDD[Z] or YYYYMMDDHHMM[SS][Z]", printable(s))
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return time.Time{}, fmt.Errorf("%q: want digits", printable(s))
		}
	}
	t, err := time.ParseInLocation(layout, v, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: %w", printable(s), err)
	}
	return t.UTC(), nil
}

func checkPrincipal(p string) error {
	if p == "" || p == "!" {
		return errors.New("empty principal")
	}
	if err := checkText(p); err != nil {
		return fmt.Errorf("principal %q: %w", printable(p), err)
	}
	if strings.ContainsAny(p, "\" ") {
		return fmt.Errorf("principal %q: no spaces or quotes", printable(p))
	}
	return nil
}

// matchPatternList matches s against a comma-separated ssh_config pattern list: * and ?
// wildcards, a leading ! negates; a negated match refuses, else any match accepts.
func matchPatternList(s, list string) bool {
	matched := false
	for _, p := range strings.Split(list, ",") {
		neg := strings.HasPrefix(p, "!")
		if neg {
			p = p[1:]
		}
		if matchPattern(s, p) {
			if neg {
				return false
			}
			matched = true
		}
	}
	return matched
}

// matchPattern matches s against one pattern with * (any run) and ? (any one character).
func matchPattern(s, p string) bool {
	sr, pr := []rune(s), []rune(p)
	si, pi := 0, 0
	star, mark := -1, 0
	for si < len(sr) {
		switch {
		case pi < len(pr) && (pr[pi] == '?' || pr[pi] == sr[si]):
			si++
			pi++
		case pi < len(pr) && pr[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(pr) && pr[pi] == '*' {
		pi++
	}
	return pi == len(pr)
}

func isPattern(p string) bool { return strings.ContainsAny(p, "*?!") }
