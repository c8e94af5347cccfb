package guard

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestLimitsJSON(t *testing.T) {
	b, err := json.Marshal(Limits{Timeout: 30 * time.Second, MaxFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"timeout":"30s"`) {
		t.Errorf("got %s; want the timeout as \"30s\"", b)
	}
	for _, in := range []string{`{"timeout":"30s","max_files":2}`, `{"timeout":30000000000,"max_files":2}`} {
		var l Limits
		if err := json.Unmarshal([]byte(in), &l); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if l.Timeout != 30*time.Second || l.MaxFiles != 2 {
			t.Errorf("%s reads as %+v; want 30s and 2 files", in, l)
		}
	}
	var l Limits
	if err := json.Unmarshal([]byte(`{"timeout":"thirty"}`), &l); err == nil {
		t.Error("a bad duration was read without an error")
	}
}

func TestResultJSON(t *testing.T) {
	r := Result{Outcome: OutcomeSucceeded, OK: true, Stdout: []byte("héllo\n"), Stderr: []byte{'a', 0xff, 'b'},
		Files: []File{{Name: "x.bin", Size: 2, Content: []byte{0, 1}}}, Duration: 1500 * time.Millisecond}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"stdout": "héllo\n", "stderr": "a\uFFFDb", "stderr_binary": true, "duration": "1.5s", "duration_ms": 1500.0}
	for k, v := range want {
		if raw[k] != v {
			t.Errorf("%s = %#v; want %#v", k, raw[k], v)
		}
	}
	if raw["stdout_binary"] != nil {
		t.Errorf("stdout_binary = %v; want it absent for valid UTF-8", raw["stdout_binary"])
	}
	f := raw["files"].([]any)[0].(map[string]any)
	if f["content"] != "AAE=" || f["encoding"] != "base64" {
		t.Errorf("file = %v; want base64 content AAE= with encoding base64", f)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if string(back.Stdout) != "héllo\n" || back.Duration != r.Duration || !back.StderrBinary || string(back.Files[0].Content) != "\x00\x01" {
		t.Errorf("round trip gave %+v", back)
	}
	// Re-encoding a decoded result keeps the binary flag.
	again, _ := json.Marshal(back)
	if !strings.Contains(string(again), `"stderr_binary":true`) {
		t.Errorf("re-encoded %s lost stderr_binary", again)
	}
}

func TestResultJSONReadsTheOlderShape(t *testing.T) {
	old := `{"ok":true,"exit_code":0,"stdout":"NS43NQo=","stderr":"","files":[{"name":"t","size":4,"content":"NS43NQ=="}],"duration":41873205}`
	var r Result
	if err := json.Unmarshal([]byte(old), &r); err != nil {
		t.Fatal(err)
	}
	if string(r.Stdout) != "5.75\n" || r.Duration != 41873205 || string(r.Files[0].Content) != "5.75" {
		t.Errorf("older shape reads as %+v", r)
	}
}
