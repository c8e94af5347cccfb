package guard

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCheckFileName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"a.txt", true},
		{"data/in.csv", true},
		{"deep/er/still/ok.bin", true},
		{"ünïcödé.txt", true},
		{".hidden", true},
		{"", false},
		{"../x", false},
		{"..", false},
		{".", false},
		{"/etc/passwd", false},
		{"a/../../b", false},
		{"a/./b", false},
		{"./a", false},
		{"a//b", false},
		{"a/", false},
		{`C:\x`, false},
		{"C:x", false},
		{"c:/x", false},
		{`dir\file`, false},
		{"CON", false},
		{"con", false},
		{"nul.txt", false},
		{"NUL", false},
		{"dir/COM1.log", false},
		{"lpt9", false},
		{"aux.tar.gz", false},
		{"console.txt", true},
		{"line\nbreak", false},
		{"nul\x00byte", false},
		{"tab\there", false},
		{"del\x7f", false},
		{"c1\u0085", false},
		{"-rf", false},
		{"dir/-rf", false},
		{"trailing.", false},
		{"trailing ", false},
		{"file:stream", false},
		{strings.Repeat("a", 255), true},
		{strings.Repeat("a", 256), false},
		{strings.Repeat("d/", 7) + "f", true},
		{strings.Repeat("d/", 8) + "f", false},
		{"\xff\xfe", false},
	}
	for _, tt := range tests {
		err := CheckFileName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("CheckFileName(%q) = %v; want ok=%t", tt.name, err, tt.ok)
		}
		var tu *ToolUsageError
		if err != nil && !errors.As(err, &tu) {
			t.Errorf("CheckFileName(%q) error %T; want *ToolUsageError", tt.name, err)
		}
	}
}

func TestCheckFileNamesCollisions(t *testing.T) {
	tests := []struct {
		names []string
		ok    bool
	}{
		{[]string{"a.txt", "b.txt"}, true},
		{[]string{"A.txt", "a.txt"}, false},
		{[]string{"dir/x", "DIR/X"}, false},
		{[]string{"a", "a/b"}, false},
		{[]string{"dir/a", "dir/b"}, true},
		// Equal under NFC: precomposed é (U+00E9) and e + combining acute (U+0301) draw the same.
		{[]string{"caf\u00e9.py", "cafe\u0301.py"}, false},
		{[]string{"caf\u00c9.py", "cafe\u0301.py"}, false},
		{[]string{"\u00e9t\u00e9/a", "e\u0301te\u0301"}, false},
		{[]string{"caf\u00e9.py", "cafe.py"}, true},
	}
	for _, tt := range tests {
		if err := CheckFileNames(tt.names); (err == nil) != tt.ok {
			t.Errorf("CheckFileNames(%q) = %v; want ok=%t", tt.names, err, tt.ok)
		}
	}
}

func TestCheckEnvName(t *testing.T) {
	p := Policy{}
	tests := []struct {
		name string
		ok   bool
	}{
		{"GREETING", true},
		{"_x1", true},
		{"lower_case", true},
		{"LD_PRELOAD", false},
		{"ld_preload", false},
		{"LD_LIBRARY_PATH", false},
		{"LD_ANYTHING", false},
		{"DYLD_INSERT_LIBRARIES", false},
		{"PYTHONSTARTUP", false},
		{"PYTHONPATH", false},
		// Accepted before PYTHON became a reserved prefix: PYTHONOPTIMIZE drops asserts and
		// skips `if __debug__:`, PYTHONPYCACHEPREFIX loads bytecode from another folder.
		{"PYTHONOPTIMIZE", false},
		{"PYTHONPYCACHEPREFIX", false},
		{"PYTHONIOENCODING", false},
		{"PYTHONHASHSEED", false},
		{"PYTHONUTF8", false},
		{"pythonoptimize", false},
		{"PYTHON", false},
		{"MY_PYTHONPATH", true},
		{"BASH_ENV", false},
		{"PATH", false},
		{"SANDBOXFLOW_KEY_FILE", false},
		{"A=B", false},
		{"1X", false},
		{"", false},
		{"WITH SPACE", false},
		{"DASH-ED", false},
		{"ÜNICODE", false},
		{"NUL\x00", false},
	}
	for _, tt := range tests {
		err := p.CheckEnvName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("CheckEnvName(%q) = %v; want ok=%t", tt.name, err, tt.ok)
		}
	}
	allow := Policy{AllowedEnv: []string{"ONLY"}}
	if err := allow.CheckEnvName("ONLY"); err != nil {
		t.Errorf("allowed name refused: %v", err)
	}
	if err := allow.CheckEnvName("OTHER"); err == nil {
		t.Errorf("a name outside the allowed list was accepted")
	}
}

// Env names that make a program the code starts load code from a file they name, or run a
// command, are refused by default, in any case; names of data files stay allowed. PERL5OPT
// (startuptest's RefusedCases), CDPATH, PS1 under sh -i and BROWSER were tried in the Docker
// sandbox, OPENSSL_CONF with OPENSSL_MODULES under the local backend (TestNativeLoaderEnvRefused);
// the others are the same mechanisms of programs the test image lacks (ruby, node, Tcl).
func TestCheckEnvNameRefusesLoaders(t *testing.T) {
	p := Policy{}
	for _, name := range []string{
		"OPENSSL_CONF", "OPENSSL_MODULES", "OPENSSL_ENGINES", "OPENSSL_CONF_INCLUDE", "GCONV_PATH",
		"PERL5OPT", "perl5lib", "PERLLIB", "PERL5DB", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH",
		"TCL_LIBRARY", "TK_LIBRARY", "TCLLIBPATH", "LOCPATH", "GLIBC_TUNABLES",
		"CDPATH", "PS1", "PS2", "PROMPT_COMMAND", "BROWSER",
	} {
		var te *ToolUsageError
		if err := p.CheckEnvName(name); !errors.As(err, &te) || !strings.Contains(err.Error(), name) {
			t.Errorf("CheckEnvName(%q) = %v; want a ToolUsageError naming it", name, err)
		}
	}
	for _, name := range []string{"SSL_CERT_FILE", "TZ", "LANG", "LC_ALL", "TEMP", "TERM"} {
		if err := p.CheckEnvName(name); err != nil {
			t.Errorf("CheckEnvName(%q) = %v; want it allowed", name, err)
		}
	}
}

func TestCheckCode(t *testing.T) {
	p := Policy{MaxCodeBytes: 100}
	tests := []struct {
		label, code string
		ok          bool
	}{
		{"plain", "print(1)", true},
		{"empty", "", false},
		{"blank", " \n\t", false},
		{"nul", "print(1)\x00", false},
		{"invalid utf-8", "print('\xff')", false},
		{"at the limit", strings.Repeat("#", 100), true},
		{"over the limit", strings.Repeat("#", 101), false},
	}
	for _, tt := range tests {
		err := p.CheckCode(tt.code)
		if (err == nil) != tt.ok {
			t.Errorf("%s: CheckCode = %v; want ok=%t", tt.label, err, tt.ok)
		}
		if err != nil && TypeOf(err) != TypeToolUsageError {
			t.Errorf("%s: got %s; want ToolUsageError", tt.label, TypeOf(err))
		}
	}
}

func TestCheckRequest(t *testing.T) {
	policy := Policy{Languages: []string{Python, Shell}}
	tests := []struct {
		label    string
		req      Request
		wantType string
	}{
		{"ok", Request{Code: "print(1)"}, ""},
		{"shell ok", Request{Code: "echo 1", Language: Shell}, ""},
		{"unknown language", Request{Code: "1", Language: "ruby"}, TypeToolUsageError},
		{"bad input name", Request{Code: "1", Settings: Settings{Files: map[string][]byte{"../x": nil}}}, TypeToolUsageError},
		{"case collision", Request{Code: "1", Settings: Settings{Files: map[string][]byte{"A": nil, "a": nil}}}, TypeToolUsageError},
		{"denied env", Request{Code: "1", Settings: Settings{Env: map[string]string{"LD_PRELOAD": "/x.so"}}}, TypeToolUsageError},
		{"env name with =", Request{Code: "1", Settings: Settings{Env: map[string]string{"A=B": "x"}}}, TypeToolUsageError},
		{"env value NUL", Request{Code: "1", Settings: Settings{Env: map[string]string{"A": "x\x00y"}}}, TypeToolUsageError},
		{"timeout over max", Request{Code: "1", Settings: Settings{Limits: Limits{Timeout: time.Hour}}}, TypeConfigError},
		{"negative timeout", Request{Code: "1", Settings: Settings{Limits: Limits{Timeout: -time.Second}}}, TypeConfigError},
		{"stdout over max", Request{Code: "1", Settings: Settings{Limits: Limits{MaxStdoutBytes: 1 << 30}}}, TypeConfigError},
		{"negative files", Request{Code: "1", Settings: Settings{Limits: Limits{MaxFiles: -1}}}, TypeConfigError},
		{"network forbidden", Request{Code: "1", Settings: Settings{Network: true}}, TypeConfigError},
		{"too many input bytes", Request{Code: "1", Settings: Settings{Files: map[string][]byte{"big": make([]byte, DefaultMaxInputBytes+1)}}}, TypeToolUsageError},
	}
	for _, tt := range tests {
		_, err := policy.Check(tt.req, "local")
		if got := TypeOf(err); got != tt.wantType {
			t.Errorf("%s: got %q (%v); want %q", tt.label, got, err, tt.wantType)
		}
	}
}

func TestCheckNarrowsNeverWidens(t *testing.T) {
	p := Policy{}
	c, err := p.Check(Request{Code: "1", Settings: Settings{Limits: Limits{Timeout: 2 * time.Second, MaxStdoutBytes: 10}}}, "local")
	if err != nil {
		t.Fatal(err)
	}
	want := Limits{Timeout: 2 * time.Second, MaxStdoutBytes: 10, MaxStderrBytes: DefaultMaxStderrBytes,
		MaxFiles: DefaultMaxFiles, MaxFileBytes: DefaultMaxFileBytes, MaxTotalFileBytes: DefaultMaxTotalFileBytes,
		MaxOutputs: DefaultMaxOutputs, MaxOutputBytes: DefaultMaxOutputBytes, MaxTotalOutputBytes: DefaultMaxTotalOutputBytes}
	if c.Limits != want {
		t.Fatalf("got limits %+v; want %+v", c.Limits, want)
	}
	if c.Language != Python {
		t.Fatalf("got language %q; want python by default", c.Language)
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		label string
		p     Policy
		ok    bool
	}{
		{"defaults", Policy{}, true},
		{"both languages", Policy{Languages: []string{Python, Shell}}, true},
		{"unknown language", Policy{Languages: []string{"ruby"}}, false},
		{"default over max", Policy{DefaultTimeout: time.Hour}, false},
		{"negative grace", Policy{Grace: -time.Second}, false},
		{"raw payload too large", Policy{MaxStdoutBytes: 1 << 20, MaxTotalFileBytes: 1 << 20}, false},
		{"encoded payload too large", Policy{MaxStdoutBytes: 200_000, MaxStderrBytes: 200_000, MaxTotalFileBytes: 1_100_000}, false},
		{"code too large for a request", Policy{MaxCodeBytes: 1 << 20}, false},
		{"bad allowed env", Policy{AllowedEnv: []string{"A=B"}}, false},
	}
	for _, tt := range tests {
		err := tt.p.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("%s: Validate = %v; want ok=%t", tt.label, err, tt.ok)
		}
		if err != nil && TypeOf(err) != TypeConfigError {
			t.Errorf("%s: got %T; want ConfigError", tt.label, err)
		}
	}
}

func TestRecheckCatchesTampering(t *testing.T) {
	p := Policy{Languages: []string{Python, Shell}, AllowOpenNetwork: true}
	c, err := p.Check(Request{Code: "print(1)", Settings: Settings{Files: map[string][]byte{"a": []byte("x")}, Env: map[string]string{"K": "v"}}}, "local")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Recheck(c); err != nil {
		t.Fatalf("Recheck of an untouched request: %v", err)
	}
	tamper := map[string]func(c *Checked){
		"code":        func(c *Checked) { c.Code = "print(2)" },
		"file":        func(c *Checked) { c.Files = []InputFile{{Name: "a", Content: []byte("y")}} },
		"env":         func(c *Checked) { c.Env = []EnvVar{{Name: "K", Value: "w"}} },
		"timeout":     func(c *Checked) { c.Limits.Timeout++ },
		"network":     func(c *Checked) { c.Network = true },
		"language":    func(c *Checked) { c.Language = Shell },
		"bad name":    func(c *Checked) { c.Files = []InputFile{{Name: "../a"}} },
		"over policy": func(c *Checked) { c.Limits.Timeout = time.Hour },
	}
	for label, f := range tamper {
		cc := c
		cc.Files = append([]InputFile(nil), c.Files...)
		cc.Env = append([]EnvVar(nil), c.Env...)
		f(&cc)
		if err := p.Recheck(cc); err == nil {
			t.Errorf("%s: Recheck accepted a changed request", label)
		}
	}
	// A stricter policy at run time refuses what an older one allowed.
	if err := (Policy{Languages: []string{Python}}).Recheck(func() Checked { cc := c; cc.Network = true; cc.Digest = Digest(&cc); return cc }()); TypeOf(err) != TypeConfigError {
		t.Errorf("network under a policy that forbids it: got %v; want ConfigError", err)
	}
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&ToolUsageError{Msg: "x"}, false},
		{&ConfigError{Msg: "x"}, false},
		{&ApprovalDenied{Reason: DeniedExpired}, false},
		{&ApprovalRefused{Reason: RefusedAlreadyUsed}, false},
		// A refusal stays one whatever its cause.
		{&ApprovalRefused{Reason: RefusedNotVerified, Err: &IntegrationError{Op: "dial"}}, false},
		{&IntegrationError{Op: "dial"}, true},
		{&IntegrationError{Op: "wait", CodeMayHaveStarted: true}, false},
		{&PackageError{Reason: PackageHashMismatch}, false},
		{&PackageError{Reason: PackageSdistOnly}, false},
		{&PackageError{Reason: PackageIndexUnreachable}, true},
		{errors.New("unknown"), false},
		{wrapf(&IntegrationError{Op: "dial"}), true},
	}
	for _, tt := range tests {
		if got := Retryable(tt.err); got != tt.want {
			t.Errorf("Retryable(%v) = %t; want %t", tt.err, got, tt.want)
		}
	}
}

func wrapf(err error) error { return errors.Join(errors.New("context"), err) }

// TestLongRunsUpToTheCap: a policy may allow runs of hours, up to MaxTimeoutCap; a request asks
// for any timeout within its policy's max.
func TestLongRunsUpToTheCap(t *testing.T) {
	p := Policy{MaxTimeout: 6 * time.Hour}
	if err := p.Validate(); err != nil {
		t.Fatalf("a 6 h max timeout: %v", err)
	}
	c, err := p.Check(Request{Code: "print(1)", Settings: Settings{Limits: Limits{Timeout: 3 * time.Hour}}}, "docker")
	if err != nil || c.Limits.Timeout != 3*time.Hour {
		t.Fatalf("a 3 h run under a 6 h max: %v, %s", err, c.Limits.Timeout)
	}
	if _, err := p.Check(Request{Code: "print(1)", Settings: Settings{Limits: Limits{Timeout: 7 * time.Hour}}}, "docker"); TypeOf(err) != TypeConfigError {
		t.Errorf("a 7 h run under a 6 h max: %v; want a ConfigError", err)
	}
	if err := (Policy{MaxTimeout: MaxTimeoutCap + time.Second}).Validate(); TypeOf(err) != TypeConfigError {
		t.Errorf("a max timeout over the cap: %v; want a ConfigError", err)
	}
}

// Finding 6 of issue 17: a file name with a right-to-left override was accepted, so a reviewer
// could read a different name from the one written.
func TestCheckFileNameRefusesInvisibleCharacters(t *testing.T) {
	for _, name := range []string{
		"report\u202etxt.exe", "a\u200bb.txt", "\u2066x\u2069.py", "x\u200e.py", "x\u061c.py",
		"bom\ufeff.txt", "tag\U000E0041.txt", "wj\u2060.txt", "soft\u00adhyphen.txt", "nb\u00a0sp.txt",
	} {
		err := CheckFileName(name)
		var tu *ToolUsageError
		if !errors.As(err, &tu) {
			t.Errorf("CheckFileName(%q) = %v; want a ToolUsageError", name, err)
			continue
		}
		if !strings.Contains(err.Error(), "U+") {
			t.Errorf("CheckFileName(%q) = %v; want the code point named", name, err)
		}
	}
	if err := CheckFileName("données/été.csv"); err != nil {
		t.Errorf("CheckFileName of accented letters: %v; want nil", err)
	}
}

func TestCheckEnvNameRefusesInvisibleCharacters(t *testing.T) {
	var p Policy
	for _, name := range []string{"PATH\u200b", "A\u202eB", "\ufeffHOME", "X\U000E0041", "A\xffB"} {
		var tu *ToolUsageError
		if err := p.CheckEnvName(name); !errors.As(err, &tu) {
			t.Errorf("CheckEnvName(%q) = %v; want a ToolUsageError", name, err)
		}
	}
}

// Finding 6: code may hold such characters, and the check keeps them, byte for byte.
func TestCheckKeepsSuspiciousCode(t *testing.T) {
	code := "s = 'abc' # \u202e\nprint(s)\n"
	c, err := Policy{}.Check(Request{Code: code}, "docker")
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if c.Code != code {
		t.Fatalf("code changed: %q; want %q", c.Code, code)
	}
}

// Finding 2 of issue 17: bytes that are not UTF-8 were replaced with U+FFFD by JSON before any
// check could see them.
func TestCheckEncodable(t *testing.T) {
	good := Request{Code: "print(1)", Settings: Settings{Files: map[string][]byte{"in.bin": {0xff, 0x00}}, Env: map[string]string{"A": "é"}}}
	if err := CheckEncodable(good); err != nil {
		t.Fatalf("CheckEncodable(good) = %v; want nil (file contents are bytes)", err)
	}
	tests := map[string]Request{
		"code":      {Code: "print(1)\xff\xfe"},
		"env value": {Code: "x", Settings: Settings{Env: map[string]string{"A": "\xff"}}},
		"env name":  {Code: "x", Settings: Settings{Env: map[string]string{"A\xff": "v"}}},
		"file name": {Code: "x", Settings: Settings{Files: map[string][]byte{"a\xff.txt": nil}}},
		"language":  {Code: "x", Language: "py\xff"},
		"metadata":  {Code: "x", Settings: Settings{Metadata: Metadata{Agent: "\xc3"}}},
	}
	for name, req := range tests {
		var tu *ToolUsageError
		if err := CheckEncodable(req); !errors.As(err, &tu) {
			t.Errorf("%s: CheckEncodable = %v; want a ToolUsageError", name, err)
		}
	}
	if err := CheckEncodable(tests["code"]); !strings.Contains(err.Error(), "offset 8") {
		t.Errorf("code error %q; want the offset of the bad byte", err)
	}
}

// The check refuses raw bytes that are not UTF-8 in every field that reaches the sandbox.
func TestCheckRefusesRawInvalidUTF8(t *testing.T) {
	tests := map[string]Request{
		"code":      {Code: "print(1)\xff"},
		"env value": {Code: "x", Settings: Settings{Env: map[string]string{"A": "\xff"}}},
		"env name":  {Code: "x", Settings: Settings{Env: map[string]string{"A\xff": "v"}}},
		"file name": {Code: "x", Settings: Settings{Files: map[string][]byte{"a\xff.txt": nil}}},
	}
	for name, req := range tests {
		var tu *ToolUsageError
		if _, err := (Policy{}).Check(req, "docker"); !errors.As(err, &tu) {
			t.Errorf("%s: Check = %v; want a ToolUsageError", name, err)
		}
	}
}
