package guard

import (
	"slices"
	"strconv"
	"strings"
)

// Requirement is how a lock names p: "name==version", with "[extra,...]" after the name when it
// asks for extras. Its hashes are not in it.
func (p Package) Requirement() string {
	name := p.Name
	if len(p.Extras) > 0 {
		name += "[" + strings.Join(p.Extras, ",") + "]"
	}
	return name + "==" + p.Version
}

// Lock writes pkgs back as a lock ParseLock reads: one requirement a line, each hash as a
// "--hash" option on it, in order.
func Lock(pkgs []Package) string {
	var b strings.Builder
	for _, p := range pkgs {
		b.WriteString(p.Requirement())
		for _, h := range p.Hashes {
			b.WriteString(" --hash=")
			b.WriteString(h)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Kinds of PackageChange.
const (
	PackageAdded          = "added"
	PackageRemoved        = "removed"
	PackageVersionChanged = "version changed"
	PackageHashesChanged  = "hashes changed"
	PackageExtrasChanged  = "extras changed"
)

// PackageChange is one package that differs between two sets: added, removed, at another
// version, or at the same version with other hashes or extras.
type PackageChange struct {
	Name string `json:"name"`
	// Kind is PackageAdded, PackageRemoved, PackageVersionChanged, PackageHashesChanged or
	// PackageExtrasChanged.
	Kind string `json:"kind"`
	// Before and After are the package in each set, nil where it is not in it.
	Before *Package `json:"before,omitempty"`
	After  *Package `json:"after,omitempty"`
}

// String says the change in one line: "added numpy==2.1.0", "numpy: version 2.0.0 -> 2.1.0",
// "numpy==2.1.0: hashes changed (+1 -1)".
func (c PackageChange) String() string {
	switch c.Kind {
	case PackageAdded:
		return "added " + c.After.Requirement()
	case PackageRemoved:
		return "removed " + c.Before.Requirement()
	case PackageVersionChanged:
		return c.Name + ": version " + c.Before.Version + " -> " + c.After.Version
	case PackageExtrasChanged:
		return c.Name + ": extras [" + strings.Join(c.Before.Extras, ",") + "] -> [" + strings.Join(c.After.Extras, ",") + "]"
	}
	added, removed := 0, 0
	for _, h := range c.After.Hashes {
		if !slices.Contains(c.Before.Hashes, h) {
			added++
		}
	}
	for _, h := range c.Before.Hashes {
		if !slices.Contains(c.After.Hashes, h) {
			removed++
		}
	}
	return c.After.Requirement() + ": hashes changed (+" + strconv.Itoa(added) + " -" + strconv.Itoa(removed) + ")"
}

// DiffPackages lists what changed from before to after (both sorted by name, as CheckPackages
// wants them), in name order.
func DiffPackages(before, after []Package) []PackageChange {
	var out []PackageChange
	i, j := 0, 0
	for i < len(before) || j < len(after) {
		switch {
		case j == len(after) || i < len(before) && before[i].Name < after[j].Name:
			out = append(out, PackageChange{Name: before[i].Name, Kind: PackageRemoved, Before: &before[i]})
			i++
		case i == len(before) || after[j].Name < before[i].Name:
			out = append(out, PackageChange{Name: after[j].Name, Kind: PackageAdded, After: &after[j]})
			j++
		default:
			b, a := &before[i], &after[j]
			kind := ""
			switch {
			case b.Version != a.Version:
				kind = PackageVersionChanged
			case !slices.Equal(b.Hashes, a.Hashes):
				kind = PackageHashesChanged
			case !slices.Equal(b.Extras, a.Extras):
				kind = PackageExtrasChanged
			}
			if kind != "" {
				out = append(out, PackageChange{Name: a.Name, Kind: kind, Before: b, After: a})
			}
			i, j = i+1, j+1
		}
	}
	return out
}

// AddCellPackages returns the session's set with a cell's packages added: a cell may add
// packages, never change one the set has (its version, extras or hashes), which is refused
// with a ToolUsageError naming it. A package the set has as it is changes nothing. Both are
// sorted by name; so is the result.
func AddCellPackages(set, cell []Package) ([]Package, error) {
	for _, c := range DiffPackages(set, cell) {
		switch c.Kind {
		case PackageAdded, PackageRemoved:
		default:
			return nil, toolUsagef("the cell's package %s changes the session's %s (%s): a cell may add packages, never change one the session has; open a new session for another version",
				c.After.Requirement(), c.Before.Requirement(), c.Kind)
		}
	}
	out := slices.Clone(set)
	for _, p := range cell {
		if _, found := slices.BinarySearchFunc(set, p.Name, func(q Package, n string) int { return strings.Compare(q.Name, n) }); !found {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Package) int { return strings.Compare(a.Name, b.Name) })
	if err := CheckPackages(out); err != nil {
		return nil, err
	}
	return out, nil
}
