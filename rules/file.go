package rules

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Version is the policy file format this package reads (the file's "version").
const Version = 1

// Bounds of a policy file: every rule is compiled at load and evaluated at each check.
const (
	MaxFileBytes  = 1 << 20
	MaxRules      = 1000
	MaxRuleBytes  = 4096
	MaxGroups     = 100
	MaxGroupSize  = 1000
	maxNameLength = 64
)

// File is a policy file as written.
type File struct {
	// Version must be 1.
	Version int `json:"version"`
	// Groups are named groups of reviewers, each a list of principals as the reviewers file
	// names them.
	Groups map[string][]string `json:"groups,omitempty"`
	// Rules are evaluated in order, every one at each check.
	Rules []Rule `json:"rules,omitempty"`
	// Limits cap the runs waiting for approval and the sandboxes running.
	Limits Limits `json:"limits,omitzero"`
}

// Rule is one rule: when When holds, its actions apply. At least one action is required.
type Rule struct {
	// Name names the rule in refusals, warnings and errors: letters, digits, '-', '_' and '.'.
	Name string `json:"name"`
	// When is a CEL expression of type bool over request, metadata, subject and cell.
	When string `json:"when"`
	// Refuse, when set, refuses the request with this reason.
	Refuse string `json:"refuse,omitempty"`
	// Quorum raises the quorum to at least this many distinct reviewers.
	Quorum int `json:"quorum,omitempty"`
	// Require asks for approvals from members of a group.
	Require *Require `json:"require,omitempty"`
	// Warn is a warning every reviewer view shows.
	Warn string `json:"warn,omitempty"`
}

// Require asks for Approvals approvals (zero means 1) by distinct members of Group.
type Require struct {
	Group     string `json:"group"`
	Approvals int    `json:"approvals,omitempty"`
}

// Limits are the policy's caps; zero means no cap.
type Limits struct {
	// Waiting caps runs and session cells waiting for approval; Running the sandboxes running
	// (runs running and sessions open).
	Waiting Cap `json:"waiting,omitzero"`
	Running Cap `json:"running,omitzero"`
}

// Cap is one limit per agent name (guard.Metadata.Agent) and in all.
type Cap struct {
	PerAgent int `json:"per_agent,omitempty"`
	Total    int `json:"total,omitempty"`
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Load reads, validates and compiles the policy file at path. Errors name the file and, for a
// rule, its name and position.
func Load(path string) (*Set, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	if st.Size() > MaxFileBytes {
		return nil, fmt.Errorf("rules: %s: %d bytes, over %d", path, st.Size(), MaxFileBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("rules: %s: %w", path, err)
	}
	return s, nil
}

// Parse validates and compiles a policy file's bytes (JSON, or YAML read strictly: an unknown
// field is an error).
func Parse(b []byte) (*Set, error) {
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%d bytes, over %d", len(b), MaxFileBytes)
	}
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("not JSON or YAML: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("read the policy: %w", err)
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	s := &Set{file: f, hash: "sha256:" + hex.EncodeToString(sum[:])}
	if err := s.compile(); err != nil {
		return nil, err
	}
	return s, nil
}

func (f *File) validate() error {
	if f.Version != Version {
		return fmt.Errorf("version %d: want %d", f.Version, Version)
	}
	if len(f.Rules) > MaxRules || len(f.Groups) > MaxGroups {
		return fmt.Errorf("%d rules and %d groups: at most %d and %d", len(f.Rules), len(f.Groups), MaxRules, MaxGroups)
	}
	for name, members := range f.Groups {
		if err := checkName("group", name); err != nil {
			return err
		}
		if len(members) == 0 || len(members) > MaxGroupSize {
			return fmt.Errorf("group %s has %d members: want 1 to %d", name, len(members), MaxGroupSize)
		}
		for _, m := range members {
			if m == "" || strings.ContainsAny(m, " \t\r\n") {
				return fmt.Errorf("group %s: member %q is no principal", name, m)
			}
		}
	}
	seen := map[string]bool{}
	for i, r := range f.Rules {
		if err := f.validateRule(r); err != nil {
			return fmt.Errorf("rule %d (%s): %w", i+1, r.Name, err)
		}
		if seen[r.Name] {
			return fmt.Errorf("rule %d: the name %s is taken by an earlier rule", i+1, r.Name)
		}
		seen[r.Name] = true
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"waiting.per_agent", f.Limits.Waiting.PerAgent}, {"waiting.total", f.Limits.Waiting.Total},
		{"running.per_agent", f.Limits.Running.PerAgent}, {"running.total", f.Limits.Running.Total}} {
		if c.v < 0 {
			return fmt.Errorf("limits.%s %d: want 0 (no cap) or more", c.name, c.v)
		}
	}
	return nil
}

func checkName(what, name string) error {
	if len(name) == 0 || len(name) > maxNameLength || !namePattern.MatchString(name) {
		return fmt.Errorf("%s name %q: want 1 to %d of letters, digits, '-', '_' and '.'", what, name, maxNameLength)
	}
	return nil
}

func (f *File) validateRule(r Rule) error {
	if err := checkName("rule", r.Name); err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(r.When) == "":
		return fmt.Errorf("no condition (when)")
	case len(r.When) > MaxRuleBytes:
		return fmt.Errorf("condition of %d bytes, over %d", len(r.When), MaxRuleBytes)
	case r.Refuse == "" && r.Quorum == 0 && r.Require == nil && r.Warn == "":
		return fmt.Errorf("no action: give refuse, quorum, require or warn")
	case r.Refuse != "" && (r.Quorum != 0 || r.Require != nil || r.Warn != ""):
		return fmt.Errorf("a rule that refuses takes no other action")
	case r.Quorum < 0 || r.Quorum > guard.MaxQuorum:
		return fmt.Errorf("quorum %d: want 1 to %d", r.Quorum, guard.MaxQuorum)
	case len(r.Refuse) > MaxRuleBytes || len(r.Warn) > MaxRuleBytes:
		return fmt.Errorf("a reason or warning over %d bytes", MaxRuleBytes)
	}
	if q := r.Require; q != nil {
		members, ok := f.Groups[q.Group]
		switch {
		case !ok:
			return fmt.Errorf("require: no group %q in groups (have %s)", q.Group, strings.Join(groupNames(f.Groups), ", "))
		case q.Approvals < 0 || q.Approvals > min(len(members), guard.MaxQuorum):
			return fmt.Errorf("require: %d approvals from %s, which has %d members: want 1 to %d", q.Approvals, q.Group, len(members), min(len(members), guard.MaxQuorum))
		}
	}
	return nil
}

func groupNames(g map[string][]string) []string {
	names := make([]string, 0, len(g))
	for n := range g {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
