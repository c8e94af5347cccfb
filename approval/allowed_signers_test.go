package approval

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func TestParseAllowedSigners(t *testing.T) {
	ed := newEd25519Signer(t).PublicKey()
	ec := newECDSASigner(t).PublicKey()
	sk := newSKSigner(t, KeyTypeSKEd25519, 1).PublicKey()
	file := strings.Join([]string{
		"# reviewers",
		"",
		allowedLine("alice@example.com,al", "", ed) + "\talice's laptop",
		allowedLine(`"bob"`, `namespaces="sandboxflow-approval,git",valid-after="20260101",VALID-BEFORE="203001021530Z"`, ec),
		"   " + allowedLine("carol", "", sk) + "\r",
	}, "\n")
	r, err := ParseAllowedSigners([]byte(file))
	if err != nil {
		t.Fatalf("ParseAllowedSigners: %v", err)
	}
	keys := r.Keys()
	if len(keys) != 3 {
		t.Fatalf("got %d keys; want 3", len(keys))
	}
	tests := []struct {
		i           int
		principals  string
		typ         string
		fingerprint string
		namespaces  string
		comment     string
	}{
		{0, "alice@example.com,al", KeyTypeEd25519, ssh.FingerprintSHA256(ed), "", "alice's laptop"},
		{1, "bob", KeyTypeECDSAP256, ssh.FingerprintSHA256(ec), "sandboxflow-approval,git", ""},
		{2, "carol", KeyTypeSKEd25519, ssh.FingerprintSHA256(sk), "", ""},
	}
	for _, tt := range tests {
		k := keys[tt.i]
		if got := strings.Join(k.Principals, ","); got != tt.principals {
			t.Errorf("key %d principals: got %q; want %q", tt.i, got, tt.principals)
		}
		if k.KeyType != tt.typ || k.Fingerprint != tt.fingerprint {
			t.Errorf("key %d: got %s %s; want %s %s", tt.i, k.KeyType, k.Fingerprint, tt.typ, tt.fingerprint)
		}
		if k.Namespaces != tt.namespaces || k.Comment != tt.comment {
			t.Errorf("key %d: got namespaces %q comment %q; want %q %q", tt.i, k.Namespaces, k.Comment, tt.namespaces, tt.comment)
		}
	}
	if want := time.Date(2030, 1, 2, 15, 30, 0, 0, time.UTC); !keys[1].ValidBefore.Equal(want) {
		t.Errorf("valid-before: got %v; want %v", keys[1].ValidBefore, want)
	}
	if want := time.Date(2026, 1, 1, 0, 0, 0, 0, time.Local); !keys[1].ValidAfter.Equal(want) {
		t.Errorf("valid-after: got %v; want %v (local time, as ssh-keygen reads it)", keys[1].ValidAfter, want)
	}
}

func TestParseAllowedSignersErrors(t *testing.T) {
	ed := newEd25519Signer(t).PublicKey()
	key := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ed)))
	_, rsaB64, _ := strings.Cut("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC7", " ")
	tests := []struct {
		name, line, want string
	}{
		{"cert-authority", "*@example.com cert-authority " + key, "cert-authority is not supported"},
		{"unknown option", "alice no-touch-required " + key, `option "no-touch-required" is not supported`},
		{"unquoted value", "alice namespaces=git " + key, "double quotes"},
		{"bad time", `alice valid-after="2026" ` + key, "YYYYMMDD"},
		{"after not before before", `alice valid-after="20300101",valid-before="20200101" ` + key, "valid-after is not before"},
		{"rsa", "alice ssh-rsa " + rsaB64, "not supported"},
		{"type mismatch", "alice ecdsa-sha2-nistp256 " + strings.Fields(key)[1], "ssh-ed25519"},
		{"no key", "alice", "no key"},
		{"bad base64", "alice ssh-ed25519 !!!", ""},
		{"unterminated quote", `"alice ` + key, "unterminated quote"},
		{"empty principal", "alice,,bob " + key, "empty principal"},
		{"option twice", `alice namespaces="a",namespaces="b" ` + key, "twice"},
	}
	for _, tt := range tests {
		file := "# first\n" + allowedLine("ok", "", ed) + "\n" + tt.line + "\n"
		_, err := ParseAllowedSigners([]byte(file))
		if err == nil {
			t.Errorf("%s: got no error; want one", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %q; want it to name line 3 and say %q", tt.name, err, tt.want)
		}
	}
	if _, err := ParseAllowedSigners([]byte("# nobody\n\n")); err == nil || !strings.Contains(err.Error(), "no reviewer keys") {
		t.Errorf("empty file: got %v; want no reviewer keys", err)
	}
}

func TestLoadReviewers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "allowed_signers")
	if _, err := LoadReviewers(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: got %v; want os.ErrNotExist", err)
	}
	if err := os.WriteFile(path, []byte(allowedLine("alice", "", newEd25519Signer(t).PublicKey())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := LoadReviewers(path)
	if err != nil || r.Len() != 1 {
		t.Fatalf("LoadReviewers: got %v, %v; want one key", r.Len(), err)
	}
}

func TestReviewersJSONRoundTrip(t *testing.T) {
	alice := newEd25519Signer(t)
	carol := newSKSigner(t, KeyTypeSKECDSAP256, 1)
	r := mustReviewers(t,
		allowedLine("alice", `namespaces="sandboxflow-approval",valid-before="20300101Z"`, alice.PublicKey())+" laptop",
		allowedLine("carol", "", carol.PublicKey()))
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Reviewers
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("Unmarshal(%s): %v", b, err)
	}
	b2, _ := json.Marshal(back)
	if string(b) != string(b2) {
		t.Fatalf("round trip:\ngot  %s\nwant %s", b2, b)
	}
	// The recorded keys verify exactly as the parsed ones.
	f := testFields()
	for _, s := range []ssh.Signer{alice, carol} {
		sig := mustSign(t, s, mustStatement(t, f))
		if _, err := Verify(&back, f, Proof{Signature: sig}, testNow); err != nil {
			t.Errorf("Verify against recorded keys: %v", err)
		}
	}
	// A recorded key whose fingerprint does not match its key is refused.
	other := ssh.FingerprintSHA256(newEd25519Signer(t).PublicKey())
	bad := strings.Replace(string(b), ssh.FingerprintSHA256(alice.PublicKey()), other, 1)
	if err := json.Unmarshal([]byte(bad), &back); err == nil {
		t.Errorf("tampered fingerprint: got no error; want one")
	}
	var zero Reviewers
	if b, _ := json.Marshal(zero); string(b) != `{"version":2,"keys":[]}` {
		t.Errorf("zero Reviewers: got %s; want {\"version\":2,\"keys\":[]}", b)
	}
}

func TestMatchPatternList(t *testing.T) {
	tests := []struct {
		s, list string
		want    bool
	}{
		{"alice", "alice", true},
		{"alice", "bob,alice", true},
		{"alice", "bob", false},
		{"alice@example.com", "*@example.com", true},
		{"mallory@example.com", "*@example.com,!mallory@*", false},
		{"al", "a?", true},
		{"alice", "a?", false},
		{"sandboxflow-approval", "git,sandboxflow-*", true},
		{"", "*", true},
	}
	for _, tt := range tests {
		if got := matchPatternList(tt.s, tt.list); got != tt.want {
			t.Errorf("matchPatternList(%q, %q): got %v; want %v", tt.s, tt.list, got, tt.want)
		}
	}
}
