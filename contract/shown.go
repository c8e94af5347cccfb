package contract

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/sandboxflow/sandboxflow/guard"
)

// ShownChecked rebuilds the checked request that a run's status shows a reviewer: the summary's
// language, code, limits, network, egress, secrets, packages and backend, with the input file contents and
// env values (which a status leaves out) taken from the request the run was started with, as its
// history records it. It fails when the two disagree (code, language, network, secrets, packages,
// file names and sizes, env names) or when the summary's digest is not the digest of what it shows.
//
// A reviewer's tool signs only a digest that ShownChecked accepted. The status is answered by
// whatever worker polls the run's task queue, and any namespace writer can be one: it could show
// one program under the digest of another, and the sandbox host, which runs what the digest
// names, would run the other.
func ShownChecked(sum guard.Summary, req guard.Request) (guard.Checked, error) {
	if sum.Digest == "" {
		return guard.Checked{}, errors.New("contract: the status shows no checked request")
	}
	lang := req.Language
	if lang == "" {
		lang = guard.Python
	}
	switch {
	case sum.Code != req.Code:
		return guard.Checked{}, mismatch("code")
	case sum.Language != lang:
		return guard.Checked{}, mismatch("language")
	case sum.Network != req.Network:
		return guard.Checked{}, mismatch("network")
	case !slices.Equal(sum.Secrets, slices.Sorted(slices.Values(req.Secrets))):
		return guard.Checked{}, mismatch("secrets")
	}
	if _, err := guard.ParseEgressPatterns(sum.Egress); err != nil {
		return guard.Checked{}, fmt.Errorf("contract: the status shows egress that does not parse: %w", err)
	}
	if err := ShownPackages(sum.Packages, req.Packages); err != nil {
		return guard.Checked{}, err
	}
	c := guard.Checked{Language: sum.Language, Code: sum.Code, CheckedSettings: guard.CheckedSettings{
		Limits: sum.Limits, Network: sum.Network, Egress: sum.Egress, Secrets: sum.Secrets, Backend: sum.Backend, Image: sum.Image,
		Packages: sum.Packages}}
	names := slices.Sorted(maps.Keys(req.Files))
	if len(names) != len(sum.Files) {
		return guard.Checked{}, mismatch("input files")
	}
	for i, n := range names {
		if sum.Files[i].Name != n || sum.Files[i].Size != int64(len(req.Files[n])) {
			return guard.Checked{}, mismatch("input files")
		}
		c.Files = append(c.Files, guard.InputFile{Name: n, Content: req.Files[n]})
	}
	envNames := slices.Sorted(maps.Keys(req.Env))
	if !slices.Equal(envNames, sum.EnvNames) {
		return guard.Checked{}, mismatch("env names")
	}
	for _, n := range envNames {
		c.Env = append(c.Env, guard.EnvVar{Name: n, Value: req.Env[n]})
	}
	if c.Digest = guard.Digest(&c); c.Digest != sum.Digest {
		return guard.Checked{}, fmt.Errorf("contract: the status's digest %s is not the digest of what it shows (%s): do not approve; the run's workflow worker may not be sandboxflow's", sum.Digest, c.Digest)
	}
	return c, nil
}

// ShownPackages refuses packages a status shows that are not the packages of lock, the lock
// text the run or session was started with (guard.ParseLock): name, version, extras and every
// hash. A reviewer reads the status's list; the sandbox host installs what the digest names.
func ShownPackages(shown []guard.Package, lock string) error {
	var want []guard.Package
	if lock != "" {
		var err error
		if want, err = guard.ParseLock(lock); err != nil {
			return fmt.Errorf("contract: the request's package lock does not parse: %w", err)
		}
	}
	if !slices.EqualFunc(shown, want, samePackage) {
		return mismatch("packages")
	}
	return nil
}

func samePackage(a, b guard.Package) bool {
	return a.Name == b.Name && a.Version == b.Version && slices.Equal(a.Extras, b.Extras) && slices.Equal(a.Hashes, b.Hashes)
}

func mismatch(what string) error {
	return fmt.Errorf("contract: the status and the request the run was started with differ in their %s: do not approve; the run's workflow worker may not be sandboxflow's", what)
}
