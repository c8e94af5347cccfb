package client

import (
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
