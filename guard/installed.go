package guard

import (
	"fmt"
	"time"
)

// PackagesReport is what the sandbox host installed for a request's lock before the code ran:
// every distribution with the wheel that installed it, what the install put on the import path
// that runs on its own or shadows something, and whether the environment came from the host's
// cache.
type PackagesReport struct {
	// Installed lists every installed distribution, sorted by name.
	Installed []InstalledPackage `json:"installed"`
	// Warnings say what of the install would run on its own elsewhere or shadows another module
	// (a .pth file, a sitecustomize, a standard library or input module's name), and what of a
	// wheel was not installed (its scripts, headers, data).
	Warnings []string `json:"warnings,omitempty"`
	// Cached says the environment was built by an earlier run with the same lock: the install
	// opened no connection.
	Cached bool `json:"cached"`
	// Duration is how long the install took on the sandbox host.
	Duration time.Duration `json:"duration"`
}

// InstalledPackage is one distribution a run's environment holds.
type InstalledPackage struct {
	Name    string `json:"name"`    // normalized, as the lock names it
	Version string `json:"version"` // as the lock pins it
	File    string `json:"file"`    // the wheel's file name
	SHA256  string `json:"sha256"`  // the wheel's sha256, lower-case hex, computed by the host
}

// TypePackageError is the Temporal type name of a PackageError.
const TypePackageError = "PackageError"

// PackageReason says why the install of a lock failed. Its values are the "reason" of a
// PackageError across Temporal.
type PackageReason string

// Reasons carried by PackageError.
const (
	// PackageHashMismatch: no file the index serves for the package has a hash the lock names.
	PackageHashMismatch PackageReason = "hash_mismatch"
	// PackageSdistOnly: the index serves only source distributions for the pinned version, whose
	// build code would run: refused.
	PackageSdistOnly PackageReason = "sdist_only"
	// PackageNotFound: the index serves no file for the pinned version the sandbox's Python can
	// install.
	PackageNotFound PackageReason = "not_found"
	// PackageMissingDependency: an installed wheel requires a distribution the lock does not name,
	// or a version of it the lock does not pin.
	PackageMissingDependency PackageReason = "missing_dependency"
	// PackageWrongDistribution: the wheel's metadata names another distribution or version than
	// the lock's entry.
	PackageWrongDistribution PackageReason = "wrong_distribution"
	// PackageUnsafeWheel: the wheel is not a well-formed archive that unpacks to regular files
	// within the limits (a path out of its folder, a link, a device, a duplicate, too large).
	PackageUnsafeWheel PackageReason = "unsafe_wheel"
	// PackageHooksRefused: the install would put something on the import path that runs on its
	// own or shadows another module, and the worker refuses that (worker --package-refuse-hooks).
	PackageHooksRefused PackageReason = "hooks_refused"
	// PackageIndexUnreachable: the package index did not answer (a connection failure, a
	// timeout, a server error). The only reason that is retried.
	PackageIndexUnreachable PackageReason = "index_unreachable"
)

// PackageError reports that the sandbox host could not install a request's lock: nothing ran.
// Package names the distribution concerned ("" for the whole lock). It is never retried, except
// for PackageIndexUnreachable.
type PackageError struct {
	Reason  PackageReason
	Package string
	Msg     string
}

func (e *PackageError) Error() string {
	if e.Package == "" {
		return fmt.Sprintf("packages (%s), nothing ran: %s", e.Reason, e.Msg)
	}
	return fmt.Sprintf("package %s (%s), nothing ran: %s", e.Package, e.Reason, e.Msg)
}
