package guard

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/sandboxflow/sandboxflow/pysource"
)

// FuzzCheck feeds arbitrary bytes to the request check: it never panics, every refusal is typed,
// and whatever it accepts is valid UTF-8 with names a reviewer can read, and survives JSON byte
// for byte.
func FuzzCheck(f *testing.F) {
	f.Add([]byte("print(1)"), "python", "in.txt", []byte("data"), "A", []byte("1"))
	f.Add([]byte("\xff\xfe"), "sh", "a\u202eb", []byte{0}, "PATH\u200b", []byte("\xff"))
	f.Add([]byte(""), "", "../x", []byte(nil), "LD_PRELOAD", []byte("x"))
	f.Fuzz(func(t *testing.T, code []byte, lang, file string, content []byte, envName string, envValue []byte) {
		req := Request{
			Code:     string(code),
			Language: lang,
			Settings: Settings{
				Files: map[string][]byte{file: content},
				Env:   map[string]string{envName: string(envValue)},
			},
		}
		encErr := CheckEncodable(req)
		if encErr != nil && TypeOf(encErr) != TypeToolUsageError {
			t.Fatalf("CheckEncodable: untyped refusal %v", encErr)
		}
		c, err := Policy{Languages: []string{Python, Shell}}.Check(req, "docker")
		if err != nil {
			if typ := TypeOf(err); typ != TypeToolUsageError && typ != TypeConfigError {
				t.Fatalf("Check: refusal %v has type %q; want ToolUsageError or ConfigError", err, typ)
			}
			return
		}
		if encErr != nil {
			t.Fatalf("Check accepted what CheckEncodable refused (%v)", encErr)
		}
		if !utf8.ValidString(c.Code) || len(pysource.SuspiciousCharacters(c.Files[0].Name)) > 0 || len(pysource.SuspiciousCharacters(c.Env[0].Name)) > 0 {
			t.Fatalf("Check accepted %+v", c)
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var back Checked
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.Code != c.Code || back.Files[0].Name != c.Files[0].Name || back.Env[0].Value != c.Env[0].Value {
			t.Fatalf("JSON changed an accepted request: %+v; want %+v", back, c)
		}
		if Digest(&back) != c.Digest {
			t.Fatal("JSON changed the digest of an accepted request")
		}
	})
}
