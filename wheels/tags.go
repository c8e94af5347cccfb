package wheels

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/sandboxflow/sandboxflow/guard"
)

// wheelName is a wheel's file name read as PEP 427 writes it:
// {name}-{version}(-{build})?-{python}-{abi}-{platform}.whl, each tag perhaps a "."-joined set.
type wheelName struct {
	Name, Version            string
	Pythons, ABIs, Platforms []string
}

func parseWheelName(file string) (wheelName, bool) {
	base, ok := strings.CutSuffix(file, ".whl")
	if !ok {
		return wheelName{}, false
	}
	parts := strings.Split(base, "-")
	if len(parts) != 5 && len(parts) != 6 {
		return wheelName{}, false
	}
	n := len(parts)
	return wheelName{
		Name:      guard.NormalizePackageName(parts[0]),
		Version:   parts[1],
		Pythons:   strings.Split(parts[n-3], "."),
		ABIs:      strings.Split(parts[n-2], "."),
		Platforms: strings.Split(parts[n-1], "."),
	}, true
}

// isSdist says whether a file name is a source distribution's (whose build code would run).
func isSdist(file string) bool {
	for _, ext := range []string{".tar.gz", ".zip", ".tar.bz2", ".tgz", ".tar", ".tar.xz"} {
		if strings.HasSuffix(strings.ToLower(file), ext) {
			return true
		}
	}
	return false
}

// The sandbox's Python: CPython 3.11 on glibc 2.36 (Debian bookworm), linux x86_64.
const (
	pyMinor    = 11
	glibcMinor = 36
)

var (
	manylinuxRE = regexp.MustCompile(`^manylinux_2_(\d+)_x86_64$`)
	pyTagRE     = regexp.MustCompile(`^(py|cp)(\d)(\d*)$`)
)

// compatible says whether the sandbox's Python can install a wheel of these tags.
func (w wheelName) compatible() bool {
	for _, py := range w.Pythons {
		for _, abi := range w.ABIs {
			for _, plat := range w.Platforms {
				if tagCompatible(py, abi, plat) {
					return true
				}
			}
		}
	}
	return false
}

func tagCompatible(py, abi, plat string) bool {
	m := pyTagRE.FindStringSubmatch(py)
	if m == nil || m[2] != "3" {
		return false
	}
	minor := -1
	if m[3] != "" {
		minor, _ = strconv.Atoi(m[3])
	}
	if !platformCompatible(plat) {
		return false
	}
	switch abi {
	case "none":
		// py3, py3X for X <= 11, cp311: pure Python, or a binary with no ABI of its own.
		return minor <= pyMinor && (m[1] == "py" || minor == pyMinor)
	case "abi3":
		return m[1] == "cp" && minor >= 2 && minor <= pyMinor && plat != "any"
	case "cp311":
		return m[1] == "cp" && minor == pyMinor && plat != "any"
	}
	return false
}

func platformCompatible(plat string) bool {
	switch plat {
	case "any", "linux_x86_64", "manylinux1_x86_64", "manylinux2010_x86_64", "manylinux2014_x86_64":
		return true
	}
	if m := manylinuxRE.FindStringSubmatch(plat); m != nil {
		n, err := strconv.Atoi(m[1])
		return err == nil && n <= glibcMinor
	}
	return false
}
