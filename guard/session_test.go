package guard

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCheckSessionCapsAndDigest(t *testing.T) {
	p := Policy{Languages: []string{Python, Shell}}
	s, err := p.CheckSession(SessionRequest{Settings: Settings{Env: map[string]string{"A": "1"}}}, "docker")
	if err != nil {
		t.Fatal(err)
	}
	if s.Lifetime != DefaultMaxSessionLifetime || s.IdleTimeout != DefaultMaxSessionIdle || s.MaxCells != DefaultMaxSessionCells {
		t.Errorf("defaults: lifetime %s idle %s cells %d", s.Lifetime, s.IdleTimeout, s.MaxCells)
	}
	if len(s.Languages) != 2 || p.RecheckSession(s) != nil {
		t.Errorf("languages %v, recheck %v", s.Languages, p.RecheckSession(s))
	}
	other := s
	other.MaxCells = 3
	if SessionDigest(&other) == s.Digest || p.RecheckSession(other) == nil {
		t.Error("the settings digest does not bind the cell cap")
	}
	for name, req := range map[string]SessionRequest{
		"lifetime over the cap": {Lifetime: 2 * time.Hour},
		"idle over the cap":     {IdleTimeout: time.Hour},
		"cells over the cap":    {MaxCells: 101},
		"denied env":            {Settings: Settings{Env: map[string]string{"LD_PRELOAD": "x"}}},
		"language not offered":  {Languages: []string{"ruby"}},
	} {
		if _, err := p.CheckSession(req, "docker"); TypeOf(err) == "" {
			t.Errorf("%s: got %v; want a typed refusal", name, err)
		}
	}
	if _, err := p.CheckCell(s, 1, Shell, "echo hi"); err != nil {
		t.Errorf("sh cell: %v", err)
	}
	if _, err := p.CheckCell(s, 1, "", "print(1)\x00"); err == nil {
		t.Error("a cell with a NUL byte passed")
	}
	var tu *ToolUsageError
	if _, err := p.CheckCell(s, 1, "ruby", "x"); !errors.As(err, &tu) {
		t.Errorf("ruby cell: %v", err)
	}
}

func TestResultDigestSurvivesJSONAndBindsOutput(t *testing.T) {
	r := Result{Outcome: OutcomeSucceeded, OK: true, Stdout: []byte("42\n\xff"), Files: []File{{Name: "a", Size: 1, Content: []byte("x")}}, Duration: time.Second}
	b, _ := json.Marshal(r)
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	back.Duration = 0 // not part of it
	if ResultDigest(back) != ResultDigest(r) {
		t.Error("the digest of a result read back from JSON differs")
	}
	for name, f := range map[string]func(*Result){
		"stdout":      func(r *Result) { r.Stdout = []byte("43\n") },
		"state reset": func(r *Result) { r.StateReset = true },
		"file":        func(r *Result) { r.Files[0].Content = []byte("y") },
		"exit":        func(r *Result) { r.ExitCode = 1 },
	} {
		c := r
		c.Files = append([]File(nil), r.Files...)
		f(&c)
		if ResultDigest(c) == ResultDigest(r) {
			t.Errorf("the result digest does not bind the %s", name)
		}
	}
	settings := "sha256:" + string(make([]byte, 0))
	chain := ChainStart(settings)
	d1 := CellDigest(settings, 1, CellCodeDigest(Python, "x = 41"), chain)
	if CellDigest(settings, 2, CellCodeDigest(Python, "x = 41"), chain) == d1 ||
		CellDigest(settings, 1, CellCodeDigest(Shell, "x = 41"), chain) == d1 ||
		CellDigest(settings, 1, CellCodeDigest(Python, "x = 41"), ChainNext(chain, d1, ResultDigest(r))) == d1 {
		t.Error("the cell digest does not bind its index, language or chain")
	}
}

// TestRedactedKeepsNoFileContentsOrEnvValues: what a host spools of a session (Redacted) holds
// the names and the digest, never a file's content or an env var's value; a cell checks against
// it as against the session.
func TestRedactedKeepsNoFileContentsOrEnvValues(t *testing.T) {
	s := CheckedSession{Languages: []string{Python}, Digest: "sha256:00", CheckedSettings: CheckedSettings{
		Files: []InputFile{{Name: "data.csv", Content: []byte("secret-file-bytes")}},
		Env:   []EnvVar{{Name: "TOKEN", Value: "secret-env-value"}},
	}}
	r := s.Redacted()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"secret-file-bytes", "c2VjcmV0LWZpbGUtYnl0ZXM", "secret-env-value"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("redacted session holds %q: %s", secret, b)
		}
	}
	if r.Files[0].Name != "data.csv" || r.Env[0].Name != "TOKEN" || r.Digest != s.Digest {
		t.Errorf("redacted session lost names or digest: %+v", r)
	}
	if string(s.Files[0].Content) != "secret-file-bytes" || s.Env[0].Value != "secret-env-value" {
		t.Error("Redacted changed the session it was called on")
	}
}
