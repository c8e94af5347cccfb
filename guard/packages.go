package guard

import (
	"encoding/binary"
	"encoding/hex"
	"regexp"
	"slices"
	"strings"
)

// Package is one distribution of a request's lock: pinned to one version, with the hashes of
// the files that may install it (pip's hash-checking mode). The sandbox host installs a wheel
// whose hash is one of Hashes, and nothing else.
type Package struct {
	// Name is the distribution's name, normalized as PEP 503 says (lower case, "-" for runs of
	// "-", "_" and ".").
	Name string `json:"name"`
	// Version is the exact version pinned with "==".
	Version string `json:"version"`
	// Extras are the extras asked for ("name[extra]==..."), sorted: their dependencies must be
	// in the lock too.
	Extras []string `json:"extras,omitempty"`
	// Hashes are "sha256:<hex>" (or sha384, sha512), sorted, at least one.
	Hashes []string `json:"hashes"`
}

// Limits on a lock: how many packages, hashes per package, and bytes of lock text.
const (
	MaxPackages         = 256
	MaxPackageHashes    = 64
	MaxPackageLockBytes = 256 << 10
)

var (
	packageNameRE    = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)
	packageVersionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+!_-]*$`)
	nameSeparatorsRE = regexp.MustCompile(`[-_.]+`)
	hashLengths      = map[string]int{"sha256": 64, "sha384": 96, "sha512": 128}
)

// NormalizePackageName returns a distribution name as PEP 503 compares names.
func NormalizePackageName(name string) string {
	return strings.ToLower(nameSeparatorsRE.ReplaceAllString(name, "-"))
}

// ParseLock reads a lock in pip's hash-checking requirements format: one "name==version" per
// requirement (optionally "name[extra,...]==version"), each with one or more
// "--hash=sha256:<hex>" options, "\" continuing a line and "#" starting a comment. Everything
// else pip reads there (other options, URLs, paths, editable installs, environment markers,
// version ranges) is refused with a ToolUsageError: the operator's index is the only source,
// and what installs is exactly what the lock names. It returns the packages sorted by name.
func ParseLock(text string) ([]Package, error) {
	if len(text) > MaxPackageLockBytes {
		return nil, toolUsagef("the package lock is %d bytes, over %d", len(text), MaxPackageLockBytes)
	}
	var pkgs []Package
	for n, line := range lockLines(text) {
		p, err := parseLockLine(line)
		if err != nil {
			return nil, toolUsagef("package lock, requirement %d (%q): %v", n+1, clip(line, 80), err)
		}
		pkgs = append(pkgs, p)
	}
	slices.SortFunc(pkgs, func(a, b Package) int { return strings.Compare(a.Name, b.Name) })
	if err := CheckPackages(pkgs); err != nil {
		return nil, err
	}
	return pkgs, nil
}

// lockLines joins continued lines, drops comments and blank lines.
func lockLines(text string) []string {
	var lines []string
	var cur strings.Builder
	for raw := range strings.SplitSeq(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		if i := strings.Index(raw, "#"); i >= 0 && (i == 0 || raw[i-1] == ' ' || raw[i-1] == '\t') {
			raw = raw[:i]
		}
		raw = strings.TrimRight(raw, " \t")
		continued := strings.HasSuffix(raw, `\`)
		cur.WriteString(strings.TrimSuffix(raw, `\`))
		cur.WriteByte(' ')
		if continued {
			continue
		}
		if l := strings.TrimSpace(cur.String()); l != "" {
			lines = append(lines, l)
		}
		cur.Reset()
	}
	if l := strings.TrimSpace(cur.String()); l != "" {
		lines = append(lines, l)
	}
	return lines
}

func parseLockLine(line string) (Package, error) {
	fields := strings.Fields(line)
	var req []string
	var p Package
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		switch {
		case f == "--hash" && i+1 < len(fields):
			i++
			p.Hashes = append(p.Hashes, fields[i])
		case strings.HasPrefix(f, "--hash="):
			p.Hashes = append(p.Hashes, strings.TrimPrefix(f, "--hash="))
		case strings.HasPrefix(f, "-"):
			return Package{}, errorString("option " + clip(f, 40) + " is not taken: a lock names pinned packages with their hashes, and the operator's index is the only source")
		default:
			req = append(req, f)
		}
	}
	spec := strings.Join(req, "")
	if strings.Contains(spec, ";") {
		return Package{}, errorString("environment markers are not taken: lock for the sandbox's Python only")
	}
	name, version, ok := strings.Cut(spec, "==")
	if !ok || strings.HasPrefix(version, "=") {
		return Package{}, errorString(`each requirement must be pinned as "name==version"`)
	}
	if base, extras, ok := strings.Cut(name, "["); ok {
		if !strings.HasSuffix(extras, "]") {
			return Package{}, errorString("extras must close with ]")
		}
		name = base
		for e := range strings.SplitSeq(strings.TrimSuffix(extras, "]"), ",") {
			p.Extras = append(p.Extras, NormalizePackageName(e))
		}
		slices.Sort(p.Extras)
	}
	p.Name, p.Version = NormalizePackageName(name), version
	if !packageNameRE.MatchString(name) {
		return Package{}, errorString("not a package name: " + clip(name, 40))
	}
	slices.Sort(p.Hashes)
	return p, nil
}

// CheckPackages checks packages as a checked request records them: sorted by name, no name
// twice, each name normalized and valid, each version an exact one, each hash a known algorithm
// with its hex, sorted, at least one and at most MaxPackageHashes.
func CheckPackages(pkgs []Package) error {
	if len(pkgs) > MaxPackages {
		return toolUsagef("the package lock names %d packages, over %d", len(pkgs), MaxPackages)
	}
	for i, p := range pkgs {
		if i > 0 && p.Name <= pkgs[i-1].Name {
			if p.Name == pkgs[i-1].Name {
				return toolUsagef("package %q is in the lock twice", p.Name)
			}
			return toolUsagef("packages must be sorted by name")
		}
		if err := checkPackage(p); err != nil {
			return toolUsagef("package %q: %v", clip(p.Name, 80), err)
		}
	}
	return nil
}

func checkPackage(p Package) error {
	switch {
	case !packageNameRE.MatchString(p.Name) || NormalizePackageName(p.Name) != p.Name:
		return errorString("not a normalized package name")
	case !packageVersionRE.MatchString(p.Version) || len(p.Version) > 64:
		return errorString("version " + clip(p.Version, 40) + " is not one exact version")
	case len(p.Hashes) == 0:
		return errorString(`no hash: every package needs "--hash=sha256:<hex>"`)
	case len(p.Hashes) > MaxPackageHashes:
		return errorString("too many hashes")
	case !slices.IsSorted(p.Hashes) || !slices.IsSorted(p.Extras):
		return errorString("hashes and extras must be sorted")
	}
	for i, h := range p.Hashes {
		if i > 0 && h == p.Hashes[i-1] {
			return errorString("hash " + h + " is given twice")
		}
		algo, hexPart, _ := strings.Cut(h, ":")
		want, known := hashLengths[algo]
		if _, err := hex.DecodeString(hexPart); !known || err != nil || len(hexPart) != want || strings.ToLower(hexPart) != hexPart {
			return errorString("hash " + clip(h, 80) + ` is not "sha256:<64 lower-case hex>" (or sha384, sha512)`)
		}
	}
	for _, e := range p.Extras {
		if !packageNameRE.MatchString(e) {
			return errorString("not an extra's name: " + clip(e, 40))
		}
	}
	return nil
}

// checkPackages checks a checked request's packages, and that the policy offers packages.
func (p Policy) checkPackages(pkgs []Package) error {
	if len(pkgs) == 0 {
		return nil
	}
	if !p.Packages {
		return configf("this worker installs no packages: it has no package index (worker --package-index)")
	}
	return CheckPackages(pkgs)
}

// appendPackagesDigest appends the packages to a canonical encoding. Nothing is appended for
// none, so the digests of requests without packages are what they were; with packages, a
// domain string starts the part, and every field is length-prefixed.
func appendPackagesDigest(b []byte, pkgs []Package) []byte {
	if len(pkgs) == 0 {
		return b
	}
	b = appendString(b, "sandboxflow/packages/v1")
	b = binary.BigEndian.AppendUint64(b, uint64(len(pkgs)))
	for _, p := range pkgs {
		b = appendString(b, p.Name)
		b = appendString(b, p.Version)
		b = binary.BigEndian.AppendUint64(b, uint64(len(p.Extras)))
		for _, e := range p.Extras {
			b = appendString(b, e)
		}
		b = binary.BigEndian.AppendUint64(b, uint64(len(p.Hashes)))
		for _, h := range p.Hashes {
			b = appendString(b, h)
		}
	}
	return b
}

type errorString string

func (e errorString) Error() string { return string(e) }

// clip shortens s to about n bytes for an error message, as valid UTF-8.
func clip(s string, n int) string {
	if len(s) > n {
		s = s[:n] + "…"
	}
	return strings.ToValidUTF8(s, "�")
}
