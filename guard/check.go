package guard

import (
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/sandboxflow/sandboxflow/pysource"
)

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// deniedEnvPrefixes are always denied, whatever the policy lists.
// PYTHON covers every variable CPython reads (PYTHONOPTIMIZE drops asserts and makes __debug__
// false; PYTHONPYCACHEPREFIX makes imports load bytecode from another folder, which input files
// could fill), and any it may read in a later version.
var deniedEnvPrefixes = []string{"LD_", "DYLD_", "SANDBOXFLOW_", "PYTHON"}

// Check applies the policy to a request for the named backend. It returns the normalized request
// with its effective limits and digest, or a ToolUsageError (bad code, language, names, env) or a
// ConfigError (limits or network beyond the policy).
func (p Policy) Check(req Request, backend string) (Checked, error) {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return Checked{}, err
	}
	lang := req.Language
	if lang == "" {
		lang = Python
	}
	if err := CheckConversation(req.Conversation); err != nil {
		return Checked{}, err
	}
	settings, sensitive, err := p.checkSettings(req.Settings, backend)
	if err != nil {
		return Checked{}, err
	}
	c := Checked{Language: lang, Code: req.Code, CheckedSettings: settings, Conversation: req.Conversation,
		SensitiveEnv: sensitive}
	if err := p.checkContent(&c); err != nil {
		return Checked{}, err
	}
	c.Digest = Digest(&c)
	return c, nil
}

// checkSettings takes the settings a run and a session share to their checked form for backend:
// secrets, input files and env sorted by name, and the effective limits, or the ConfigError of
// limits beyond the policy. It also returns the env names the policy marks sensitive. What the
// settings hold is checked with the code (checkContent).
func (p Policy) checkSettings(s Settings, backend string) (CheckedSettings, []string, error) {
	c := CheckedSettings{
		Network: s.Network, Egress: s.Egress, Secrets: slices.Sorted(slices.Values(s.Secrets)),
		Backend: backend, CaptureContent: s.CaptureContent, Metadata: s.Metadata,
	}
	var sensitive []string
	c.Files, c.Env, sensitive = p.sortedInputs(s.Files, s.Env)
	limits, err := p.effectiveLimits(s.Limits)
	if err != nil {
		return CheckedSettings{}, nil, err
	}
	c.Limits = limits
	if s.Packages != "" {
		if c.Packages, err = ParseLock(s.Packages); err != nil {
			return CheckedSettings{}, nil, err
		}
	}
	return c, sensitive, nil
}

// sortedInputs returns a request's input files and env sorted by name, and the env names the
// policy marks sensitive (a run's and a session's alike).
func (p Policy) sortedInputs(files map[string][]byte, env map[string]string) ([]InputFile, []EnvVar, []string) {
	var (
		fs        []InputFile
		es        []EnvVar
		sensitive []string
	)
	for _, name := range sortedKeys(files) {
		fs = append(fs, InputFile{Name: name, Content: files[name]})
	}
	for _, name := range sortedKeys(env) {
		es = append(es, EnvVar{Name: name, Value: env[name]})
		if p.IsSensitiveEnv(name) {
			sensitive = append(sensitive, name)
		}
	}
	return fs, es, sensitive
}

// Recheck applies the policy again to a request that was checked earlier (perhaps by another
// worker, under an older policy), and verifies that its digest still matches what it holds. The
// sandbox activity calls it before running anything.
func (p Policy) Recheck(c Checked) error {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return err
	}
	if err := p.checkRecorded(c.Files, c.Env, c.Limits); err != nil {
		return err
	}
	if err := p.checkContent(&c); err != nil {
		return err
	}
	if got := Digest(&c); got != c.Digest {
		return configf("digest mismatch: the request encodes to %s but carries %s", got, c.Digest)
	}
	return nil
}

// checkRecorded checks what a checked run or session recorded, again: files and env sorted by
// name with no env name twice, and limits within the policy.
func (p Policy) checkRecorded(files []InputFile, env []EnvVar, limits Limits) error {
	if !slices.IsSortedFunc(files, func(a, b InputFile) int { return strings.Compare(a.Name, b.Name) }) ||
		!slices.IsSortedFunc(env, func(a, b EnvVar) int { return strings.Compare(a.Name, b.Name) }) {
		return toolUsagef("files and env must be sorted by name")
	}
	for i := 1; i < len(env); i++ {
		if env[i].Name == env[i-1].Name {
			return toolUsagef("env name %q is given twice", env[i].Name)
		}
	}
	return p.checkLimits(limits)
}

func (p Policy) checkContent(c *Checked) error {
	if err := p.CheckCode(c.Code); err != nil {
		return err
	}
	if c.Backend == "" {
		return configf("no backend named for the request")
	}
	if !slices.Contains(p.Languages, c.Language) {
		return toolUsagef("language %q is not offered here (offered: %s)", c.Language, strings.Join(p.Languages, ", "))
	}
	if err := p.checkNetwork(c); err != nil {
		return err
	}
	if err := p.checkInputFiles(c.Files); err != nil {
		return err
	}
	if err := p.checkPackages(c.Packages); err != nil {
		return err
	}
	if err := p.checkSources(c); err != nil {
		return misread(err)
	}
	return p.checkEnv(c.Env)
}

// CheckCode reports a ToolUsageError for code that is empty, not valid UTF-8, holds a NUL byte or
// is over the policy's size.
func (p Policy) CheckCode(code string) error {
	p = p.WithDefaults()
	switch {
	case strings.TrimSpace(code) == "":
		return toolUsagef("code is empty")
	case len(code) > p.MaxCodeBytes:
		return toolUsagef("code is %d bytes, over the limit of %d", len(code), p.MaxCodeBytes)
	case !utf8.ValidString(code):
		return toolUsagef("code is not valid UTF-8")
	case strings.IndexByte(code, 0) >= 0:
		return toolUsagef("code contains a NUL byte")
	}
	return nil
}

func (p Policy) checkInputFiles(files []InputFile) error {
	if len(files) > p.MaxInputFiles {
		return toolUsagef("%d input files, over the limit of %d", len(files), p.MaxInputFiles)
	}
	var total int64
	names := make([]string, 0, len(files))
	for _, f := range files {
		total += int64(len(f.Content))
		names = append(names, f.Name)
	}
	if total > p.MaxInputBytes {
		return toolUsagef("input files hold %d bytes, over the limit of %d", total, p.MaxInputBytes)
	}
	if err := CheckFileNames(names); err != nil {
		return &ToolUsageError{Msg: "input " + err.Error()}
	}
	return misread(pysource.CheckModuleNames(names))
}

// checkSources applies pysource's checks to the code (when it is Python or sh) and to every input
// file. It returns pysource's *Error, which Check reports as a ToolUsageError.
func (p Policy) checkSources(c *Checked) error {
	indentation := !p.AllowMixedIndentation
	// Shell code can hand Python its lines (python3 - <<EOF): its declarations count too.
	if err := pysource.CheckCoding("code", []byte(c.Code)); err != nil {
		return err
	}
	if c.Language == Shell {
		if err := pysource.CheckHereDocs("code", c.Code); err != nil {
			return err
		}
		// sh hands Python its lines as they are (python3 - <<'EOF', python3 -c "..."): a lone
		// carriage return ends a line there, a form feed in the indentation resets the column.
		if err := pysource.CheckLineEnds("code", c.Code); err != nil {
			return err
		}
		if err := pysource.CheckFormFeeds("code", c.Code); err != nil {
			return err
		}
	}
	if c.Language == Python {
		if err := pysource.CheckLineEnds("code", c.Code); err != nil {
			return err
		}
		check := pysource.CheckFormFeeds
		if indentation {
			check = pysource.CheckIndentation
		}
		if err := check("code", c.Code); err != nil {
			return err
		}
	}
	for _, f := range c.Files {
		if err := pysource.CheckInputSource(f.Name, f.Content, indentation); err != nil {
			return err
		}
	}
	return nil
}

func (p Policy) checkEnv(env []EnvVar) error {
	if len(env) > p.MaxEnvVars {
		return toolUsagef("%d env vars, over the limit of %d", len(env), p.MaxEnvVars)
	}
	size := 0
	for _, e := range env {
		if err := p.CheckEnvName(e.Name); err != nil {
			return err
		}
		if strings.IndexByte(e.Value, 0) >= 0 {
			return toolUsagef("env %s: value contains a NUL byte", e.Name)
		}
		if !utf8.ValidString(e.Value) {
			return toolUsagef("env %s: value is not valid UTF-8", e.Name)
		}
		size += len(e.Name) + len(e.Value)
	}
	if size > p.MaxEnvBytes {
		return toolUsagef("env holds %d bytes, over the limit of %d", size, p.MaxEnvBytes)
	}
	return nil
}

// IsSensitiveEnv reports whether the policy marks an env name sensitive (Policy.SensitiveEnv,
// ignoring case).
func (p Policy) IsSensitiveEnv(name string) bool {
	return slices.ContainsFunc(p.SensitiveEnv, func(s string) bool { return strings.EqualFold(s, name) })
}

// SensitiveValue is how views show the value, n bytes long, of an env var the policy marks
// sensitive: that it is there and how long, never the value.
func SensitiveValue(n int) string {
	return "‹sensitive, " + byteCount(n) + "›"
}

func byteCount(n int) string {
	if n == 1 {
		return "1 byte"
	}
	return strconv.Itoa(n) + " bytes"
}

// CheckEnvName reports a ToolUsageError for an env name that is not plain
// ([A-Za-z_][A-Za-z0-9_]*) or that the policy does not allow.
func (p Policy) CheckEnvName(name string) error {
	p = p.WithDefaults()
	if !utf8.ValidString(name) {
		return toolUsagef("env name %q is not valid UTF-8", name)
	}
	if err := pysource.CheckName("env name", name); err != nil {
		return misread(err)
	}
	if !envNameRE.MatchString(name) {
		return toolUsagef("env name %q is not a plain name ([A-Za-z_][A-Za-z0-9_]*)", name)
	}
	upper := strings.ToUpper(name)
	for _, prefix := range deniedEnvPrefixes {
		if strings.HasPrefix(upper, prefix) {
			return toolUsagef("env name %q is not allowed (names starting with %s are reserved)", name, prefix)
		}
	}
	if slices.ContainsFunc(p.DeniedEnv, func(d string) bool { return strings.EqualFold(d, name) }) {
		return toolUsagef("env name %q is not allowed by the policy", name)
	}
	if len(p.AllowedEnv) > 0 && !slices.Contains(p.AllowedEnv, name) {
		return toolUsagef("env name %q is not in the policy's allowed list", name)
	}
	return nil
}

func (p Policy) effectiveLimits(req Limits) (Limits, error) {
	l := Limits{
		Timeout:           pick(req.Timeout, p.DefaultTimeout),
		MaxStdoutBytes:    pick(req.MaxStdoutBytes, p.MaxStdoutBytes),
		MaxStderrBytes:    pick(req.MaxStderrBytes, p.MaxStderrBytes),
		MaxFiles:          pick(req.MaxFiles, p.MaxFiles),
		MaxFileBytes:      pick(req.MaxFileBytes, p.MaxFileBytes),
		MaxTotalFileBytes: pick(req.MaxTotalFileBytes, p.MaxTotalFileBytes),
	}
	return p.withOutputCaps(l), p.checkLimits(l)
}

// withOutputCaps returns l with the policy's output caps, whatever l held: they are the
// operator's, part of no digest, and each sandbox host applies its own (Guarded).
func (p Policy) withOutputCaps(l Limits) Limits {
	p = p.WithDefaults()
	l.MaxOutputs, l.MaxOutputBytes, l.MaxTotalOutputBytes = p.MaxOutputs, p.MaxOutputBytes, p.MaxTotalOutputBytes
	return l
}

func pick[T comparable](requested, def T) T {
	var zero T
	if requested == zero {
		return def
	}
	return requested
}

func (p Policy) checkLimits(l Limits) error {
	type lim struct {
		name     string
		got, max int64
	}
	for _, x := range []lim{
		{"timeout", int64(l.Timeout), int64(p.MaxTimeout)},
		{"max stdout bytes", l.MaxStdoutBytes, p.MaxStdoutBytes},
		{"max stderr bytes", l.MaxStderrBytes, p.MaxStderrBytes},
		{"max files", int64(l.MaxFiles), int64(p.MaxFiles)},
		{"max file bytes", l.MaxFileBytes, p.MaxFileBytes},
		{"max total file bytes", l.MaxTotalFileBytes, p.MaxTotalFileBytes},
	} {
		if x.got <= 0 {
			return configf("limit %s must be positive, got %d", x.name, x.got)
		}
		if x.got > x.max {
			if x.name == "timeout" {
				return configf("timeout %s is over the policy's maximum of %s", l.Timeout, p.MaxTimeout)
			}
			return configf("limit %s %d is over the policy's maximum of %d", x.name, x.got, x.max)
		}
	}
	return nil
}

// windowsDevices are names Windows resolves to devices whatever the folder or extension.
var windowsDevices = func() map[string]bool {
	m := map[string]bool{"CON": true, "PRN": true, "AUX": true, "NUL": true, "CONIN$": true, "CONOUT$": true, "CLOCK$": true}
	for _, d := range "0123456789¹²³" {
		m["COM"+string(d)] = true
		m["LPT"+string(d)] = true
	}
	return m
}()

// CheckFileName reports why a file name is unsafe, or nil. A safe name is relative, clean
// (path.Clean leaves it as it is), valid UTF-8, at most 255 bytes and 8 elements deep, and has no
// empty, "." or ".." element, no drive or colon, no backslash, no control character, no invisible,
// bidirectional or other suspicious character (see pysource.IsSuspicious), no element
// that starts with "-" or ends with a dot or space, and no Windows device name.
func CheckFileName(name string) error {
	switch {
	case name == "":
		return toolUsagef("file name is empty")
	case len(name) > DefaultMaxFileNameBytes:
		return toolUsagef("file name %.40q... is %d bytes, over the limit of %d", name, len(name), DefaultMaxFileNameBytes)
	case !utf8.ValidString(name):
		return toolUsagef("file name %q is not valid UTF-8", name)
	case strings.HasPrefix(name, "/"):
		return toolUsagef("file name %q is absolute", name)
	case strings.ContainsRune(name, '\\'):
		return toolUsagef("file name %q contains a backslash", name)
	case strings.ContainsRune(name, ':'):
		return toolUsagef("file name %q contains a colon (drive or stream)", name)
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }):
		return toolUsagef("file name %q contains a control character", name)
	}
	if err := pysource.CheckName("file name", name); err != nil {
		return misread(err)
	}
	elems := strings.Split(name, "/")
	if len(elems) > DefaultMaxFileNameDepth {
		return toolUsagef("file name %.40q... is %d folders deep, over the limit of %d", name, len(elems), DefaultMaxFileNameDepth)
	}
	for _, e := range elems {
		switch {
		case e == "":
			return toolUsagef("file name %q has an empty element", name)
		case e == "..":
			return toolUsagef("file name %q has a .. element", name)
		case e == ".":
			return toolUsagef("file name %q has a . element", name)
		case strings.HasPrefix(e, "-"):
			return toolUsagef("file name %q has an element starting with -", name)
		case strings.HasSuffix(e, ".") || strings.HasSuffix(e, " "):
			return toolUsagef("file name %q has an element ending with a dot or space", name)
		}
		base, _, _ := strings.Cut(e, ".")
		if windowsDevices[strings.ToUpper(strings.TrimRight(base, " "))] {
			return toolUsagef("file name %q is a device name", name)
		}
	}
	if path.Clean(name) != name {
		return toolUsagef("file name %q is not in clean form", name)
	}
	return nil
}

// fileNameKey is what two file names that a file system may take for one file share: the name
// in NFC (macOS stores NFD; a look-alike pair such as "é" and "e\u0301" draws the same) and lower
// case.
func fileNameKey(n string) string { return strings.ToLower(norm.NFC.String(n)) }

// CheckFileNames checks every name and reports two names that are equal, or differ only in case
// or in Unicode normalization (NFC), or where one is a folder of the other.
func CheckFileNames(names []string) error {
	seen := make(map[string]string, len(names))
	for _, n := range names {
		if err := CheckFileName(n); err != nil {
			return err
		}
		key := fileNameKey(n)
		if prev, ok := seen[key]; ok {
			return toolUsagef("file names %q and %q collide (equal when case is ignored or Unicode normalized, NFC)", prev, n)
		}
		seen[key] = n
	}
	for _, n := range names {
		for dir := path.Dir(n); dir != "."; dir = path.Dir(dir) {
			if prev, ok := seen[fileNameKey(dir)]; ok {
				return toolUsagef("file name %q is inside %q, which is a file", n, prev)
			}
		}
	}
	return nil
}
