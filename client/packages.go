package client

import (
	"fmt"
	"io"
	"os"

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
