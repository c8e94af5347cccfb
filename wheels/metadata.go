package wheels

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/sandboxflow/sandboxflow/guard"
)

// metadata is what the install reads of a wheel's METADATA: its name, version and
// requirements.
type metadata struct {
	Name     string
	Version  string
	Requires []string
}

// parseMetadata reads the header part of a core metadata file (RFC 822 style; the body, after
// the first blank line, is the description).
func parseMetadata(b []byte) metadata {
	var m metadata
	for line := range strings.SplitSeq(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n") {
		if line == "" {
			break
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
			continue
		}
		val = strings.TrimSpace(val)
		switch strings.ToLower(key) {
		case "name":
			m.Name = val
		case "version":
			m.Version = val
		case "requires-dist":
			m.Requires = append(m.Requires, val)
		}
	}
	return m
}

// requirement is one Requires-Dist: a name, its extras, a version specifier and a marker.
type requirement struct {
	Name      string
	Extras    []string
	Specifier string
	Marker    string
}

var reqNameRE = regexp.MustCompile(`^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*`)

// parseRequirement reads a PEP 508 requirement as wheels write them (no URL requirements: a
// wheel that names one cannot be satisfied from a lock).
func parseRequirement(s string) (requirement, error) {
	spec, marker, _ := strings.Cut(s, ";")
	m := reqNameRE.FindStringSubmatch(spec)
	if m == nil {
		return requirement{}, fmt.Errorf("cannot read requirement %q", s)
	}
	r := requirement{Name: guard.NormalizePackageName(m[1]), Marker: strings.TrimSpace(marker)}
	for e := range strings.SplitSeq(m[2], ",") {
		if e = strings.TrimSpace(e); e != "" {
			r.Extras = append(r.Extras, guard.NormalizePackageName(e))
		}
	}
	rest := strings.TrimSpace(spec[len(m[0]):])
	if strings.HasPrefix(rest, "@") {
		return requirement{}, fmt.Errorf("requirement %q names a URL", s)
	}
	rest = strings.TrimSuffix(strings.TrimPrefix(rest, "("), ")")
	r.Specifier = strings.TrimSpace(rest)
	return r, nil
}

// markerEnv is the sandbox's Python as PEP 508 markers see it: the images' CPython 3.11 on
// Debian bookworm, linux x86_64.
var markerEnv = map[string]string{
	"python_version":                 "3.11",
	"python_full_version":            "3.11.2",
	"os_name":                        "posix",
	"sys_platform":                   "linux",
	"platform_system":                "Linux",
	"platform_machine":               "x86_64",
	"platform_python_implementation": "CPython",
	"implementation_name":            "cpython",
	"implementation_version":         "3.11.2",
	"platform_release":               "",
	"platform_version":               "",
}

var markerTokenRE = regexp.MustCompile(`\s*(\(|\)|===|==|!=|<=|>=|~=|<|>|not\s+in\b|in\b|and\b|or\b|'[^']*'|"[^"]*"|[A-Za-z_][A-Za-z0-9_.]*)`)

// evalMarker evaluates a PEP 508 marker for the sandbox's Python, with extras the extras the
// requiring distribution was installed with.
func evalMarker(marker string, extras []string) (bool, error) {
	if strings.TrimSpace(marker) == "" {
		return true, nil
	}
	var toks []string
	rest := marker
	for strings.TrimSpace(rest) != "" {
		loc := markerTokenRE.FindStringSubmatchIndex(rest)
		if loc == nil || loc[0] != 0 {
			return false, fmt.Errorf("cannot read marker %q", marker)
		}
		toks = append(toks, strings.Join(strings.Fields(rest[loc[2]:loc[3]]), " "))
		rest = rest[loc[1]:]
	}
	p := &markerParser{toks: toks, extras: extras}
	v, err := p.or()
	if err == nil && p.i != len(p.toks) {
		err = errors.New("trailing tokens")
	}
	if err != nil {
		return false, fmt.Errorf("marker %q: %w", marker, err)
	}
	return v, nil
}

type markerParser struct {
	toks   []string
	i      int
	extras []string
}

func (p *markerParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *markerParser) or() (bool, error) {
	v, err := p.and()
	for err == nil && p.peek() == "or" {
		p.i++
		var w bool
		w, err = p.and()
		v = v || w
	}
	return v, err
}

func (p *markerParser) and() (bool, error) {
	v, err := p.atom()
	for err == nil && p.peek() == "and" {
		p.i++
		var w bool
		w, err = p.atom()
		v = v && w
	}
	return v, err
}

func (p *markerParser) atom() (bool, error) {
	if p.peek() == "(" {
		p.i++
		v, err := p.or()
		if err != nil {
			return false, err
		}
		if p.peek() != ")" {
			return false, errors.New("missing )")
		}
		p.i++
		return v, nil
	}
	if p.i+3 > len(p.toks) {
		return false, errors.New("incomplete comparison")
	}
	l, op, r := p.toks[p.i], p.toks[p.i+1], p.toks[p.i+2]
	p.i += 3
	if l == "extra" || r == "extra" {
		other := r
		if r == "extra" {
			other = l
		}
		want := guard.NormalizePackageName(strings.Trim(other, `'"`))
		has := false
		for _, e := range p.extras {
			has = has || e == want
		}
		switch op {
		case "==":
			return has, nil
		case "!=":
			return !has, nil
		}
		return false, fmt.Errorf("operator %s on extra", op)
	}
	lv, err := markerValue(l)
	if err != nil {
		return false, err
	}
	rv, err := markerValue(r)
	if err != nil {
		return false, err
	}
	return compareMarker(lv, op, rv)
}

// markerValue is a token's value: a quoted string's, or a variable's for the sandbox's Python.
func markerValue(tok string) (string, error) {
	if len(tok) >= 2 && (tok[0] == '\'' || tok[0] == '"') {
		return tok[1 : len(tok)-1], nil
	}
	v, ok := markerEnv[tok]
	if !ok {
		return "", fmt.Errorf("unknown marker variable %q", tok)
	}
	return v, nil
}

// compareMarker compares two marker values: as versions when both read as PEP 440 versions,
// else as strings.
func compareMarker(l, op, r string) (bool, error) {
	switch op {
	case "in":
		return strings.Contains(r, l), nil
	case "not in":
		return !strings.Contains(r, l), nil
	}
	if _, lok := parseVersion(l); lok {
		if _, rok := parseVersion(r); rok {
			met, ok := satisfies(l, op+r)
			if ok {
				return met, nil
			}
		}
	}
	switch op {
	case "==", "===":
		return l == r, nil
	case "!=":
		return l != r, nil
	case "<":
		return l < r, nil
	case "<=":
		return l <= r, nil
	case ">":
		return l > r, nil
	case ">=":
		return l >= r, nil
	}
	return false, fmt.Errorf("operator %s on strings", op)
}
