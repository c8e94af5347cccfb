package activities

import (
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// A finished run's event says what its package install did, and a refused install why.
func TestFinishedEventCarriesPackages(t *testing.T) {
	c := guard.Checked{Digest: "sha256:x", CheckedSettings: guard.CheckedSettings{Backend: "docker"}}
	res := guard.Result{Packages: &guard.PackagesReport{Installed: []guard.InstalledPackage{{Name: "a"}, {Name: "b"}}, Cached: true,
		Duration: 7 * time.Millisecond, Warnings: []string{"w"}}}
	d := finishedEvent(c, contract.RunInput{}, res, nil, time.Second).Data
	if d["packages"] != 2 || d["packages_cached"] != true || d["package_install_ms"] != int64(7) || d["package_warnings"] != 1 {
		t.Errorf("event data %v; want 2 packages, cached, 7 ms, 1 warning", d)
	}
	if _, ok := finishedEvent(c, contract.RunInput{}, guard.Result{}, nil, time.Second).Data["packages"]; ok {
		t.Error("a run without packages reports packages")
	}
	err := &guard.PackageError{Reason: guard.PackageSdistOnly, Package: "x", Msg: "only x-1.tar.gz"}
	d = finishedEvent(c, contract.RunInput{}, guard.Result{}, err, time.Second).Data
	if d["package_reason"] != "sdist_only" || d["error_type"] != guard.TypePackageError {
		t.Errorf("event data %v; want package_reason sdist_only", d)
	}
}
