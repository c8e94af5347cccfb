package wheels

import (
	"archive/zip"
	"bytes"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rawZip builds an archive entry by entry, as an attacker would.
func rawZip(t *testing.T, entries ...zip.FileHeader) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, h := range entries {
		body := h.Comment
		h.Comment = ""
		w, err := zw.CreateHeader(&h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func entry(name, body string, mode fs.FileMode) zip.FileHeader {
	h := zip.FileHeader{Name: name, Comment: body, Method: zip.Deflate}
	h.SetMode(mode)
	return h
}

func TestUnpackRefusesAttacks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		entries  []zip.FileHeader
		maxBytes int64
		maxFiles int
		says     string
	}{
		{"zip slip", []zip.FileHeader{entry("../../etc/cron.d/x", "boom", 0o644)}, 1 << 20, 10, "out of the archive"},
		{"zip slip inside", []zip.FileHeader{entry("pkg/../../x.py", "boom", 0o644)}, 1 << 20, 10, "out of the archive"},
		{"absolute", []zip.FileHeader{entry("/etc/passwd", "x", 0o644)}, 1 << 20, 10, "not a relative path"},
		{"backslash", []zip.FileHeader{entry(`..\x.py`, "x", 0o644)}, 1 << 20, 10, "not a relative path"},
		{"symlink", []zip.FileHeader{entry("pkg/link", "/etc/shadow", fs.ModeSymlink|0o777)}, 1 << 20, 10, "not a regular file"},
		{"device", []zip.FileHeader{entry("pkg/dev", "", fs.ModeDevice|0o666)}, 1 << 20, 10, "not a regular file"},
		{"duplicate", []zip.FileHeader{entry("a.py", "1", 0o644), entry("a.py", "2", 0o644)}, 1 << 20, 10, "twice"},
		{"duplicate through purelib", []zip.FileHeader{entry("a.py", "1", 0o644), entry("x-1.data/purelib/a.py", "2", 0o644)}, 1 << 20, 10, "twice"},
		{"huge file", []zip.FileHeader{entry("big.py", strings.Repeat("x", 1<<16), 0o644)}, 1 << 10, 10, "more bytes than the limit"},
		{"too many files", []zip.FileHeader{entry("a.py", "", 0o644), entry("b.py", "", 0o644), entry("c.py", "", 0o644)}, 1 << 20, 2, "over 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			site := filepath.Join(dir, "site")
			budget := tc.maxBytes
			_, err := unpackWheel(rawZip(t, tc.entries...), "x-1.data", site, tc.maxFiles, &budget)
			var uw *unsafeWheel
			if !errors.As(err, &uw) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v; want an unsafe wheel saying %q", err, tc.says)
			}
			// Nothing landed outside the site folder.
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if e.Name() != "site" {
					t.Errorf("%s written beside the site folder", e.Name())
				}
			}
		})
	}
}

func TestMarkers(t *testing.T) {
	for _, tc := range []struct {
		marker string
		extras []string
		want   bool
	}{
		{"", nil, true},
		{`python_version < "3.8"`, nil, false},
		{`python_version >= "3.8"`, nil, true},
		{`python_version == "3.11"`, nil, true},
		{`python_version < "3.12" and sys_platform == "linux"`, nil, true},
		{`sys_platform == "win32" or platform_machine == "x86_64"`, nil, true},
		{`(sys_platform == "darwin" or os_name == "nt") and python_version > "3"`, nil, false},
		{`extra == "fast"`, nil, false},
		{`extra == "fast"`, []string{"fast"}, true},
		{`extra == 'Fast_Lane'`, []string{"fast-lane"}, true},
		{`platform_python_implementation != "PyPy"`, nil, true},
		{`"linux" in sys_platform`, nil, true},
		{`implementation_name not in "pypy jython"`, nil, true},
		{`python_full_version >= "3.11.1"`, nil, true},
	} {
		got, err := evalMarker(tc.marker, tc.extras)
		if err != nil || got != tc.want {
			t.Errorf("evalMarker(%q, %q) = %t, %v; want %t", tc.marker, tc.extras, got, err, tc.want)
		}
	}
	for _, bad := range []string{`python_version <`, `unknown_var == "x"`, `(python_version == "3.11"`, `python_version == "3" junk`} {
		if _, err := evalMarker(bad, nil); err == nil {
			t.Errorf("evalMarker(%q) = nil error; want one", bad)
		}
	}
}

func TestVersions(t *testing.T) {
	for _, tc := range []struct {
		version, spec string
		want          bool
	}{
		{"2.1", ">=2.0", true}, {"2.1", ">=2.0,<2.1", false}, {"1.0", "==1", true}, {"1.0.0", "==1.0", true},
		{"2.1", "~=2.0", true}, {"3.0", "~=2.0", false}, {"2.1.5", "~=2.1.0", true}, {"2.2", "~=2.1.0", false},
		{"2.1", "==2.*", true}, {"3.1", "==2.*", false}, {"2.1", "!=2.*", false}, {"1.0rc1", "<1.0", true},
		{"1.0.dev1", "<1.0a1", true}, {"1.0.post1", ">1.0", true}, {"1.0+local", "==1.0", true}, {"1!1.0", ">2.0", true},
		{"1.0", "", true},
	} {
		got, ok := satisfiesAll(tc.version, tc.spec)
		if !ok || got != tc.want {
			t.Errorf("%s %s = %t (ok %t); want %t", tc.version, tc.spec, got, ok, tc.want)
		}
	}
	r, err := parseRequirement("Beta_Lib[Fast,extra2] (>=2.0,<3) ; python_version >= '3.8'")
	if err != nil || r.Name != "beta-lib" || r.Specifier != ">=2.0,<3" || len(r.Extras) != 2 || r.Marker != "python_version >= '3.8'" {
		t.Errorf("parseRequirement = %+v, %v", r, err)
	}
	if _, err := parseRequirement("pkg @ https://example.com/pkg.whl"); err == nil {
		t.Error("a URL requirement was read")
	}
}

func TestWheelTags(t *testing.T) {
	for _, tc := range []struct {
		file string
		want bool
	}{
		{"a-1.0-py3-none-any.whl", true}, {"a-1.0-py2.py3-none-any.whl", true}, {"a-1.0-py2-none-any.whl", false},
		{"a-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", true},
		{"a-1.0-cp311-cp311-manylinux_2_38_x86_64.whl", false}, {"a-1.0-cp312-cp312-manylinux2014_x86_64.whl", false},
		{"a-1.0-cp38-abi3-manylinux2014_x86_64.whl", true}, {"a-1.0-cp312-abi3-linux_x86_64.whl", false},
		{"a-1.0-cp311-cp311-musllinux_1_1_x86_64.whl", false}, {"a-1.0-cp311-cp311-manylinux2014_aarch64.whl", false},
		{"a-1.0-cp311-cp311-win_amd64.whl", false}, {"a-1.0-1build-py3-none-any.whl", true}, {"a-1.0-py312-none-any.whl", false},
	} {
		w, ok := parseWheelName(tc.file)
		if !ok || w.compatible() != tc.want {
			t.Errorf("%s: compatible %t (parsed %t); want %t", tc.file, w.compatible(), ok, tc.want)
		}
	}
	if !sdistOf("Beta.Lib-2.1.tar.gz", "beta-lib", "2.1") || sdistOf("beta-2.1.tar.gz", "beta", "2.2") {
		t.Error("sdistOf")
	}
}

func TestIndexPage(t *testing.T) {
	base, _ := url.Parse("http://127.0.0.1:1/simple/beta/")
	page := `<html><body><a href="beta-2.1-py3-none-any.whl#sha256=00">x</a>
<A HREF='../../files/beta-2.0.tar.gz' data-requires-python="&gt;=3">beta-2.0.tar.gz</A>
<a href="https://files.example/p/beta-1.0-py3-none-any.whl">b</a><a href="javascript:alert(1)">j</a></body></html>`
	links := parseIndexPage([]byte(page), base)
	var got []string
	for _, l := range links {
		got = append(got, l.File+" "+l.URL.String())
	}
	want := []string{
		"beta-2.1-py3-none-any.whl http://127.0.0.1:1/simple/beta/beta-2.1-py3-none-any.whl",
		"beta-2.0.tar.gz http://127.0.0.1:1/files/beta-2.0.tar.gz",
		"beta-1.0-py3-none-any.whl https://files.example/p/beta-1.0-py3-none-any.whl",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("links:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
