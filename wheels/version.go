package wheels

import (
	"cmp"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// version is a PEP 440 version, parsed for comparison.
type version struct {
	epoch   int
	release []int
	pre     []int // {kind, n}: kind 0 a, 1 b, 2 rc; nil when none
	post    int   // -1 when none
	dev     int   // -1 when none
	local   string
}

var versionRE = regexp.MustCompile(`^v?(?:(\d+)!)?(\d+(?:\.\d+)*)` +
	`(?:[-_.]?(a|alpha|b|beta|c|rc|pre|preview)[-_.]?(\d*))?` +
	`(?:-(\d+)|[-_.]?(post|rev|r)[-_.]?(\d*))?` +
	`(?:[-_.]?(dev)[-_.]?(\d*))?` +
	`(?:\+([a-z0-9]+(?:[-_.][a-z0-9]+)*))?$`)

// parseVersion parses s as PEP 440 does, normalizing spellings ("1.0RC1" is "1.0rc1").
func parseVersion(s string) (version, bool) {
	m := versionRE.FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if m == nil {
		return version{}, false
	}
	num := func(s string) int {
		n, _ := strconv.Atoi(s)
		return n
	}
	v := version{epoch: num(m[1]), post: -1, dev: -1, local: strings.NewReplacer("-", ".", "_", ".").Replace(m[10])}
	for p := range strings.SplitSeq(m[2], ".") {
		v.release = append(v.release, num(p))
	}
	if m[3] != "" {
		kind := map[string]int{"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}[m[3]]
		v.pre = []int{kind, num(m[4])}
	}
	switch {
	case m[5] != "":
		v.post = num(m[5])
	case m[6] != "":
		v.post = num(m[7])
	}
	if m[8] != "" {
		v.dev = num(m[9])
	}
	return v, true
}

// trimmed is the release without trailing zeros (1.0 equals 1).
func trimmed(r []int) []int {
	for len(r) > 1 && r[len(r)-1] == 0 {
		r = r[:len(r)-1]
	}
	return r
}

// compareVersions orders a and b as PEP 440 does (local versions last among equals).
func compareVersions(a, b version) int {
	if c := cmp.Compare(a.epoch, b.epoch); c != 0 {
		return c
	}
	if c := slices.Compare(trimmed(a.release), trimmed(b.release)); c != 0 {
		return c
	}
	// A dev release of no pre or post release sorts before every pre-release.
	preKey := func(v version) []int {
		switch {
		case v.pre != nil:
			return v.pre
		case v.post < 0 && v.dev >= 0:
			return []int{-1, 0}
		default:
			return []int{3, 0}
		}
	}
	if c := slices.Compare(preKey(a), preKey(b)); c != 0 {
		return c
	}
	if c := cmp.Compare(a.post, b.post); c != 0 {
		return c
	}
	devKey := func(v version) int {
		if v.dev < 0 {
			return int(^uint(0) >> 1)
		}
		return v.dev
	}
	if c := cmp.Compare(devKey(a), devKey(b)); c != 0 {
		return c
	}
	return strings.Compare(a.local, b.local)
}

// sameVersion says whether two version strings name the same PEP 440 version (or, when either
// does not parse, are the same string).
func sameVersion(a, b string) bool {
	va, oka := parseVersion(a)
	vb, okb := parseVersion(b)
	if !oka || !okb {
		return strings.EqualFold(a, b)
	}
	return compareVersions(va, vb) == 0
}

// satisfies says whether version s meets one PEP 440 clause ("op version"); ok is false when
// the clause or the version cannot be read.
func satisfies(s string, clause string) (bool, bool) {
	clause = strings.TrimSpace(clause)
	var op string
	for _, o := range []string{"===", "~=", "==", "!=", "<=", ">=", "<", ">"} {
		if strings.HasPrefix(clause, o) {
			op = o
			break
		}
	}
	if op == "" {
		return false, false
	}
	want := strings.TrimSpace(clause[len(op):])
	if op == "===" {
		return s == want, true
	}
	v, ok := parseVersion(s)
	if !ok {
		return false, false
	}
	if op == "==" || op == "!=" {
		if prefix, wild := strings.CutSuffix(want, ".*"); wild {
			p, ok := parseVersion(prefix)
			if !ok {
				return false, false
			}
			rel := append(slices.Clone(v.release), make([]int, len(p.release))...)
			match := v.epoch == p.epoch && slices.Equal(rel[:len(p.release)], p.release)
			return match == (op == "=="), true
		}
	}
	w, ok := parseVersion(want)
	if !ok {
		return false, false
	}
	if w.local == "" && (op == "==" || op == "!=") {
		v.local = ""
	}
	c := compareVersions(v, w)
	switch op {
	case "==":
		return c == 0, true
	case "!=":
		return c != 0, true
	case "<=":
		return c <= 0, true
	case ">=":
		return c >= 0, true
	case "<":
		return c < 0, true
	case ">":
		return c > 0, true
	}
	// ~=: >= w, and == w's release without its last part, as a prefix.
	if len(w.release) < 2 || c < 0 {
		return false, len(w.release) >= 2
	}
	prefix := w.release[:len(w.release)-1]
	rel := append(slices.Clone(v.release), make([]int, len(prefix))...)
	return v.epoch == w.epoch && slices.Equal(rel[:len(prefix)], prefix), true
}

// satisfiesAll says whether s meets every comma-separated clause of spec ("" is met by all).
func satisfiesAll(s, spec string) (bool, bool) {
	if strings.TrimSpace(spec) == "" {
		return true, true
	}
	for clause := range strings.SplitSeq(spec, ",") {
		met, ok := satisfies(s, clause)
		if !ok || !met {
			return met, ok
		}
	}
	return true, true
}
