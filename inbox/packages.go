package inbox

import (
	"github.com/sandboxflow/sandboxflow/guard"
)

// packageView is one package as a page shows it: its requirement ("name[extras]==version")
// and every hash a file of it may have, in full (what the digest binds).
type packageView struct {
	Requirement string
	Hashes      []string
}

// packageViews are the views of pkgs, each value made visible (visible).
func packageViews(pkgs []guard.Package) []packageView {
	var out []packageView
	for _, p := range pkgs {
		v := packageView{Requirement: visible(p.Requirement())}
		for _, h := range p.Hashes {
			v.Hashes = append(v.Hashes, visible(h))
		}
		out = append(out, v)
	}
	return out
}

// packageChanges are the changes as lines ("added beta==2.0").
func packageChanges(changes []guard.PackageChange) []string {
	var out []string
	for _, c := range changes {
		out = append(out, visible(c.String()))
	}
	return out
}
