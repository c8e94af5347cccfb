package pysource

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// stdlibNamesScript prints the interpreter's version and sys.stdlib_module_names as JSON.
const stdlibNamesScript = `import sys, json; print(json.dumps({"version": list(sys.version_info[:2]), "names": sorted(sys.stdlib_module_names)}))`

// checkStdlibTable compares the embedded table with what an interpreter reports: every name it
// has must be in the table (3.12's plus 3.11's), and a 3.12 interpreter must report exactly
// stdlibModules312.
func checkStdlibTable(t *testing.T, out []byte) {
	t.Helper()
	var got struct {
		Version []int    `json:"version"`
		Names   []string `json:"names"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("interpreter output %q: %v", out, err)
	}
	for _, n := range got.Names {
		if !isStdlibModule(n) {
			t.Errorf("python %v has standard module %q, which the table lacks", got.Version, n)
		}
	}
	if slices.Equal(got.Version, []int{3, 12}) && !slices.Equal(got.Names, stdlibModules312) {
		t.Errorf("python 3.12 reports %d names; the table has %d that differ", len(got.Names), len(stdlibModules312))
	}
	if !slices.IsSorted(stdlibModules312) {
		t.Error("stdlibModules312 is not sorted")
	}
	t.Logf("python %v: %d standard modules, all in the table", got.Version, len(got.Names))
}

func TestStdlibTableHostPython(t *testing.T) {
	need.Need(t, need.Python3)
	found := false
	for _, py := range []string{"python3", "python3.12"} {
		path, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		out, err := exec.Command(path, "-c", stdlibNamesScript).Output()
		if err != nil {
			continue // a shim without that version
		}
		found = true
		checkStdlibTable(t, out)
	}
	if !found {
		t.Fatal("python3 is on PATH but printed no module names")
	}
}

func TestStartupWarnings(t *testing.T) {
	names := []string{
		"data.csv", "helper.py", "json.py", "lib/json.py", "site.pth", "sitecustomize.py",
		"usercustomize/__init__.py", "usercustomize/x.py", "__pycache__/helper.cpython-312.pyc", "fast.so",
		"ssl.cpython-312-x86_64-linux-gnu.so", "logging/__init__.py", "logging/extra.py", "test/data.txt",
		"old.pyo", "asyncore.py", "Json.py", "deps.zip", "xml/__init__.cpython-311-x86_64-linux-gnu.so", "xml/dom.py",
	}
	var got []string
	for _, w := range StartupWarnings(names) {
		got = append(got, w.File+": "+strings.SplitN(w.Reason, ":", 2)[0])
	}
	want := []string{
		"json.py: module json shadows the standard module of that name",
		"site.pth: a .pth file",
		"sitecustomize.py: module sitecustomize",
		"usercustomize/__init__.py: module usercustomize",
		"usercustomize/x.py: module usercustomize",
		"__pycache__/helper.cpython-312.pyc: compiled bytecode",
		"__pycache__/helper.cpython-312.pyc: in a __pycache__ folder",
		"fast.so: a native extension module",
		"ssl.cpython-312-x86_64-linux-gnu.so: a native extension module",
		"ssl.cpython-312-x86_64-linux-gnu.so: module ssl shadows the standard module of that name",
		"logging/__init__.py: module logging shadows the standard module of that name",
		"logging/extra.py: module logging shadows the standard module of that name",
		"old.pyo: compiled bytecode",
		"asyncore.py: module asyncore shadows the standard module of that name",
		"deps.zip: an archive Python can import modules from or run",
		"xml/__init__.cpython-311-x86_64-linux-gnu.so: a native extension module",
		"xml/__init__.cpython-311-x86_64-linux-gnu.so: module xml shadows the standard module of that name",
		"xml/dom.py: module xml shadows the standard module of that name",
	}
	if !slices.Equal(got, want) {
		t.Errorf("StartupWarnings:\n got %q\nwant %q", got, want)
	}
	if w := StartupWarnings([]string{"a\u202eb.pth"}); len(w) != 1 || !strings.Contains(w[0].String(), `a\u202eb.pth`) {
		t.Errorf("a warning's line must escape the name: %v", w)
	}
}

// TestStartupWarningsPackageOfAnExtension: python3 imports a folder whose __init__ is an
// extension module (__init__ and the interpreter's own extension suffix) in place of the
// standard package of that name, and StartupWarnings says so.
func TestStartupWarningsPackageOfAnExtension(t *testing.T) {
	need.Need(t, need.Python3)
	out, err := exec.Command("python3", "-c", "import importlib.machinery as m; print(m.EXTENSION_SUFFIXES[0])").Output()
	if err != nil {
		t.Fatal(err)
	}
	name := "json/__init__" + strings.TrimSpace(string(out))
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "json"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.py"), []byte("import json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "-E", "-s", "-B", "main.py")
	cmd.Dir = dir
	res, _ := cmd.CombinedOutput()
	if !strings.Contains(string(res), filepath.Join(dir, name)) {
		t.Fatalf("python3 did not load %s for import json: %s (the test shows nothing)", name, res)
	}
	var reasons []string
	for _, w := range StartupWarnings([]string{name}) {
		reasons = append(reasons, w.Reason)
	}
	if !slices.ContainsFunc(reasons, func(r string) bool { return strings.HasPrefix(r, "module json shadows the standard module") }) {
		t.Errorf("StartupWarnings(%s) = %q; want it to say the file shadows json", name, reasons)
	}
}
