package client

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// PackagesSchema is the JSON Schema of a tool's packages argument: a lock in pip's
// hash-checking format, which the reviewer reads and approves with the code.
func PackagesSchema(what string) map[string]any {
	return map[string]any{
		"type":      "string",
		"maxLength": guard.MaxPackageLockBytes,
		"description": "Optional: Python packages " + what + " needs that the sandbox lacks, as a lock in pip's hash-checking format, " +
			"one pinned requirement a line with the hash of each wheel (\"name==1.2.3 --hash=sha256:<hex>\"), every dependency listed. " +
			"The reviewer approves them with the code; the sandbox host installs wheels only, from the operator's index, before the code starts " +
			"(the code itself cannot reach the index). Refused when the operator offers no packages.",
	}
}

// WithPackages returns the request's lock: the operator's (base), or else the model's (lock).
// A model's lock beside the operator's is a ToolUsageError: the operator chose the packages.
func WithPackages(base, lock string) (string, error) {
	switch {
	case lock == "":
		return base, nil
	case base != "":
		return "", &guard.ToolUsageError{Msg: "packages: the operator set this tool's packages; call it without packages"}
	}
	return lock, nil
}

// ReadLockFile reads a lock (guard.Settings.Packages, contract.CellRequest.Packages) from
// path, at most guard.MaxPackageLockBytes, and checks it parses (guard.ParseLock), so that a
// lock a worker would refuse is refused before anything starts.
func ReadLockFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("client: package lock: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, guard.MaxPackageLockBytes+1))
	if err != nil {
		return "", fmt.Errorf("client: package lock %s: %w", path, err)
	}
	if len(b) > guard.MaxPackageLockBytes {
		return "", &guard.ToolUsageError{Msg: fmt.Sprintf("package lock %s is over %d bytes", path, guard.MaxPackageLockBytes)}
	}
	if _, err := guard.ParseLock(string(b)); err != nil {
		return "", err
	}
	return string(b), nil
}

// SessionPackagesBefore is the session's set of packages before cell i (0-based) of st: its
// settings' packages and those every earlier cell that ran brought, sorted by name.
func SessionPackagesBefore(st contract.SessionStatus, i int) []guard.Package {
	set := slices.Clone(st.Settings.Packages)
	for _, c := range st.Cells[:min(i, len(st.Cells))] {
		if c.Result == nil {
			continue
		}
		for _, p := range c.Packages {
			if !slices.ContainsFunc(set, func(q guard.Package) bool { return q.Name == p.Name }) {
				set = append(set, p)
			}
		}
	}
	slices.SortFunc(set, func(a, b guard.Package) int { return strings.Compare(a.Name, b.Name) })
	return set
}

// CellPackageChanges is what cell i (0-based) of st changes in the session's set of packages
// (SessionPackagesBefore): each package it adds, and each it would change (which the check
// refuses); a package it names as the set has it is no change. Nil for a cell without packages.
func CellPackageChanges(st contract.SessionStatus, i int) []guard.PackageChange {
	if i < 0 || i >= len(st.Cells) || len(st.Cells[i].Packages) == 0 {
		return nil
	}
	before := SessionPackagesBefore(st, i)
	var out []guard.PackageChange
	for _, c := range guard.DiffPackages(before, st.Cells[i].Packages) {
		if c.Kind != guard.PackageRemoved {
			out = append(out, c)
		}
	}
	return out
}
