package egress

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

func TestParseSecrets(t *testing.T) {
	s := testSecrets(t, `
# comment
github   api.github.com   Authorization: Bearer ghp_abc def
github	uploads.github.com	authorization:Bearer ghp_abc def
pypi *.pypi.example:443 X-Token:   tok
`)
	if got, want := s.Names(), []string{"github", "pypi"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %v; want %v", got, want)
	}
	rules, err := s.Select([]string{"github"})
	if err != nil || len(rules) != 2 {
		t.Fatalf("Select(github) = %v, %v; want 2 rules", rules, err)
	}
	if rules[1].Header != "Authorization" || string(rules[1].value) != "Bearer ghp_abc def" || rules[1].Pattern.String() != "uploads.github.com" {
		t.Errorf("rule %v; want Authorization for uploads.github.com with the whole value", rules[1])
	}
	_, err = s.Select([]string{"nope"})
	var ce *guard.ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("Select(nope) = %v; want a ConfigError", err)
	}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(format, rules); strings.Contains(out, "ghp_abc") {
			t.Errorf("fmt %s shows the value: %s", format, out)
		}
	}
}

func TestParseSecretsRefusesBadLines(t *testing.T) {
	for _, line := range []string{
		"github",
		"github api.github.com",
		"github api.github.com Authorization",
		"github api.github.com Authorization:",
		"GitHub api.github.com Authorization: SECRETVALUE",
		"github 10.0.0.1 Authorization: SECRETVALUE",
		"github bad_host..com Authorization: SECRETVALUE",
		"github api.github.com Bad Header: SECRETVALUE",
		"github api.github.com Host: SECRETVALUE",
		"github api.github.com Content-Length: 5",
		"github api.github.com Authorization: SECRET\x00VALUE",
	} {
		_, err := ParseSecrets(strings.NewReader("# ok\n" + line + "\n"))
		if err == nil {
			t.Errorf("ParseSecrets(%q) = nil error; want one", line)
			continue
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("error %q shows the value", err)
		}
		if !strings.Contains(err.Error(), "line 2") {
			t.Errorf("error %q; want it to name line 2", err)
		}
	}
}

func TestLoadSecretsRefusesWorldReadable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets")
	os.WriteFile(path, []byte("gh api.test Authorization: Bearer x\n"), 0o644)
	if _, err := LoadSecrets(path); err == nil {
		t.Error("LoadSecrets of a 0644 file: got nil; want an error")
	}
	os.Chmod(path, 0o600)
	if s, err := LoadSecrets(path); err != nil || len(s.Names()) != 1 {
		t.Errorf("LoadSecrets of a 0600 file: got %v; want one secret", err)
	}
	// A wrong path (a log file, a device) is refused after 1 MiB, not read whole.
	huge := filepath.Join(t.TempDir(), "huge")
	os.WriteFile(huge, []byte("gh api.test Authorization: Bearer x\n"+strings.Repeat("# padding\n", 110000)), 0o600)
	if _, err := LoadSecrets(huge); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("LoadSecrets of a file over 1 MiB: got %v; want it refused", err)
	}
}

func TestLoadOrCreateCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	ca, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{CACertFile, CAKeyFile} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: got %v %v; want mode 0600", name, fi.Mode().Perm(), err)
		}
	}
	again, err := LoadOrCreateCA(dir)
	if err != nil || !again.Certificate().Equal(ca.Certificate()) {
		t.Errorf("second load: got %v; want the same CA", err)
	}
	leaf, err := again.leaf("api.test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM())
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "api.test", Roots: pool}); err != nil {
		t.Errorf("minted leaf does not verify: %v", err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "other.test", Roots: pool}); err == nil {
		t.Error("minted leaf verifies for another name; want it only for its own")
	}
	os.Remove(filepath.Join(dir, CAKeyFile))
	if _, err := LoadOrCreateCA(dir); err == nil {
		t.Error("a directory with the certificate and no key: got nil; want an error")
	}
}
