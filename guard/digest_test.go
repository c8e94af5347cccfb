package guard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func baseRequest() Request {
	return Request{
		Code:     "print(open('a.txt').read())",
		Language: Python,
		Settings: Settings{
			Files:   map[string][]byte{"a.txt": []byte("alpha"), "b/c.bin": {0, 1, 2}},
			Env:     map[string]string{"GREETING": "hello", "NAME": "world"},
			Limits:  Limits{Timeout: 10 * time.Second},
			Network: false,
		},
	}
}

var digestPolicy = Policy{Languages: []string{Python, Shell}, AllowOpenNetwork: true}

func mustDigest(t *testing.T, req Request, backend string) string {
	t.Helper()
	c, err := digestPolicy.Check(req, backend)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if !strings.HasPrefix(c.Digest, "sha256:") || len(c.Digest) != len("sha256:")+64 {
		t.Fatalf("digest %q is not sha256:<64 hex>", c.Digest)
	}
	return c.Digest
}

func TestDigestChangesWithEveryByte(t *testing.T) {
	base := mustDigest(t, baseRequest(), "docker")
	changes := map[string]func(r *Request) string{
		"code byte": func(r *Request) string { r.Code = "print(open('a.txt').read()) "; return "docker" },
		"language":  func(r *Request) string { r.Language = Shell; return "docker" },
		"file name byte": func(r *Request) string {
			r.Files["a.txu"] = r.Files["a.txt"]
			delete(r.Files, "a.txt")
			return "docker"
		},
		"file content byte": func(r *Request) string { r.Files["a.txt"] = []byte("alphb"); return "docker" },
		"extra empty file":  func(r *Request) string { r.Files["z"] = nil; return "docker" },
		"env name byte":     func(r *Request) string { r.Env["NAMF"] = r.Env["NAME"]; delete(r.Env, "NAME"); return "docker" },
		"env value byte":    func(r *Request) string { r.Env["NAME"] = "worle"; return "docker" },
		"timeout":           func(r *Request) string { r.Limits.Timeout += time.Nanosecond; return "docker" },
		"stdout cap":        func(r *Request) string { r.Limits.MaxStdoutBytes = 63_999; return "docker" },
		"stderr cap":        func(r *Request) string { r.Limits.MaxStderrBytes = 63_999; return "docker" },
		"files cap":         func(r *Request) string { r.Limits.MaxFiles = 31; return "docker" },
		"file bytes cap":    func(r *Request) string { r.Limits.MaxFileBytes = 1000; return "docker" },
		"total bytes cap":   func(r *Request) string { r.Limits.MaxTotalFileBytes = 1000; return "docker" },
		"network":           func(r *Request) string { r.Network = true; return "docker" },
		"backend":           func(r *Request) string { return "dockes" },
	}
	for label, change := range changes {
		req := baseRequest()
		backend := change(&req)
		if got := mustDigest(t, req, backend); got == base {
			t.Errorf("%s: digest did not change", label)
		}
	}
}

func TestDigestIgnoresMapOrderAndMetadata(t *testing.T) {
	want := mustDigest(t, baseRequest(), "docker")
	for i := 0; i < 50; i++ {
		req := baseRequest()
		// Rebuild the maps so that Go's randomized iteration order differs from run to run.
		files := map[string][]byte{}
		for _, k := range []string{"b/c.bin", "a.txt"} {
			files[k] = req.Files[k]
		}
		req.Files = files
		req.Metadata = Metadata{Agent: "agent", ToolCallID: strings.Repeat("x", i)}
		req.CaptureContent = i%2 == 0
		if got := mustDigest(t, req, "docker"); got != want {
			t.Fatalf("digest changed with map order or metadata: got %s; want %s", got, want)
		}
	}
}

// decodeCanonical parses CanonicalEncoding's output back; together with the fuzz test it shows the
// encoding is injective: different requests never share an encoding.
func decodeCanonical(b []byte) (Checked, error) {
	var c Checked
	r := bytes.NewReader(b)
	readU64 := func() (uint64, error) {
		var v uint64
		err := binary.Read(r, binary.BigEndian, &v)
		return v, err
	}
	readStr := func() (string, error) {
		n, err := readU64()
		if err != nil {
			return "", err
		}
		if n > uint64(r.Len()) {
			return "", errors.New("length past the end")
		}
		buf := make([]byte, n)
		_, err = r.Read(buf)
		return string(buf), err
	}
	version, err := readStr()
	if err != nil || version != DigestVersion {
		return c, errors.New("bad version")
	}
	if c.Language, err = readStr(); err != nil {
		return c, err
	}
	if c.Code, err = readStr(); err != nil {
		return c, err
	}
	if c.Backend, err = readStr(); err != nil {
		return c, err
	}
	n, err := readU64()
	if err != nil {
		return c, err
	}
	for i := uint64(0); i < n; i++ {
		name, err := readStr()
		if err != nil {
			return c, err
		}
		content, err := readStr()
		if err != nil {
			return c, err
		}
		c.Files = append(c.Files, InputFile{Name: name, Content: []byte(content)})
	}
	if n, err = readU64(); err != nil {
		return c, err
	}
	for i := uint64(0); i < n; i++ {
		name, err := readStr()
		if err != nil {
			return c, err
		}
		value, err := readStr()
		if err != nil {
			return c, err
		}
		c.Env = append(c.Env, EnvVar{Name: name, Value: value})
	}
	var lim [6]uint64
	for i := range lim {
		if lim[i], err = readU64(); err != nil {
			return c, err
		}
	}
	c.Limits = Limits{Timeout: time.Duration(lim[0]), MaxStdoutBytes: int64(lim[1]), MaxStderrBytes: int64(lim[2]), MaxFiles: int(lim[3]), MaxFileBytes: int64(lim[4]), MaxTotalFileBytes: int64(lim[5])}
	net, err := r.ReadByte()
	if err != nil {
		return c, err
	}
	c.Network = net == 1
	if r.Len() != 0 {
		return c, errors.New("trailing bytes")
	}
	return c, nil
}

func normalize(c Checked) Checked {
	out := Checked{Language: c.Language, Code: c.Code, CheckedSettings: CheckedSettings{Backend: c.Backend, Limits: c.Limits, Network: c.Network}}
	for _, f := range c.Files {
		if f.Content == nil {
			f.Content = []byte{}
		}
		out.Files = append(out.Files, f)
	}
	out.Env = append(out.Env, c.Env...)
	return out
}

func FuzzCanonicalEncoding(f *testing.F) {
	f.Add("python", "print(1)", "docker", "a.txt", []byte("x"), "K", "v", int64(30e9), int64(64000), true)
	f.Add("sh", "", "", "", []byte{}, "", "", int64(0), int64(-1), false)
	f.Add("python", "a\x00b", "local", "a\x00\x00\x00\x00\x00\x00\x00\x01", []byte("\x00\x00"), "A", "", int64(1), int64(1), false)
	f.Fuzz(func(t *testing.T, lang, code, backend, fname string, fcontent []byte, ename, evalue string, timeout, cap int64, network bool) {
		c := Checked{
			Language: lang, Code: code, CheckedSettings: CheckedSettings{
				Backend: backend,
				Files:   []InputFile{{Name: fname, Content: fcontent}},
				Env:     []EnvVar{{Name: ename, Value: evalue}},
				Limits:  Limits{Timeout: time.Duration(timeout), MaxStdoutBytes: cap, MaxStderrBytes: cap + 1, MaxFiles: int(cap), MaxFileBytes: -cap, MaxTotalFileBytes: cap * 3},
				Network: network,
			},
		}
		enc := CanonicalEncoding(&c)
		got, err := decodeCanonical(enc)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !reflect.DeepEqual(normalize(got), normalize(c)) {
			t.Fatalf("the encoding does not decode to the request it came from:\n got %+v\nwant %+v", got, c)
		}
		// Moving one byte between two adjacent fields must change the encoding.
		if len(code) > 0 {
			moved := c
			moved.Code, moved.Backend = code[:len(code)-1], code[len(code)-1:]+backend
			if bytes.Equal(CanonicalEncoding(&moved), enc) {
				t.Fatalf("moving a byte from code to backend left the encoding unchanged")
			}
		}
	})
}

func FuzzCheckFileName(f *testing.F) {
	for _, s := range []string{"a.txt", "../x", "/etc/passwd", "a/../../b", `C:\x`, "CON", "nul.txt", "a\nb", "a\x00b", "-rf", "a/b/c", ".hidden", "x/./y", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if CheckFileName(name) != nil {
			return
		}
		base := "/sandbox/work"
		joined := filepath.Join(base, name)
		if !strings.HasPrefix(joined, base+"/") {
			t.Fatalf("accepted %q escapes the working folder: %s", name, joined)
		}
		if filepath.Clean(name) != name || strings.HasPrefix(name, "/") {
			t.Fatalf("accepted %q is not a clean relative name", name)
		}
		if !utf8.ValidString(name) || strings.ContainsAny(name, "\\:\x00\n\r") {
			t.Fatalf("accepted %q holds a forbidden character", name)
		}
		for _, e := range strings.Split(name, "/") {
			if e == ".." || e == "." || e == "" || strings.HasPrefix(e, "-") {
				t.Fatalf("accepted %q has a forbidden element %q", name, e)
			}
		}
		if len(name) > DefaultMaxFileNameBytes {
			t.Fatalf("accepted %q is longer than %d bytes", name, DefaultMaxFileNameBytes)
		}
	})
}
