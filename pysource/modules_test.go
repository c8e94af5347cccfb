package pysource

import (
	"errors"
	"strings"
	"testing"
)

// A source module that another input file in its folder shadows is refused, naming the one Python
// imports (tried with python3 -E -s -B -u - in the Docker sandbox: helper/__init__.py ran,
// helper.py did not), as is a .pdbrc anywhere; modules of different names or folders, bytecode
// beside its source (never read), and files that only look like modules, pass.
func TestCheckModuleNames(t *testing.T) {
	refused := []struct {
		files []string
		want  string
	}{
		{[]string{"helper.py", "helper/__init__.py"}, `imports "helper/__init__.py" and never "helper.py"`},
		{[]string{"helper/__init__.py", "helper.py"}, `imports "helper/__init__.py" and never "helper.py"`},
		{[]string{"helper.py", "helper/__init__.pyc"}, `imports "helper/__init__.pyc" and never "helper.py"`},
		{[]string{"mod.py", "mod.cpython-311-x86_64-linux-gnu.so"}, `imports "mod.cpython-311-x86_64-linux-gnu.so" and never "mod.py"`},
		{[]string{"mod.abi3.so", "mod.py", "mod.pyc"}, `imports "mod.abi3.so" and never "mod.py"`},
		{[]string{"lib/util.py", "lib/util/__init__.py"}, `imports "lib/util/__init__.py" and never "lib/util.py"`},
		{[]string{"a/b/c.py", "a/b/c/__init__.py"}, `in folder a/b: Python imports "a/b/c/__init__.py"`},
		{[]string{".pdbrc"}, `".pdbrc" is a .pdbrc`},
		{[]string{"sub/.pdbrc"}, `"sub/.pdbrc" is a .pdbrc`},
	}
	for _, tt := range refused {
		err := CheckModuleNames(tt.files)
		var te *Error
		if !errors.As(err, &te) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got %v; want an *Error saying %s", tt.files, err, tt.want)
		}
	}
	for _, files := range [][]string{
		{"helper.py", "helper2/__init__.py", "other/helper.py"},
		{"helper.py", "helper/data.txt", "helper/sub.py"},
		{"mod.py", "mod.pyx", "mod.py.bak", "mod.txt", "mod.cpython-311.x.so", "libfoo.so.1"},
		{"__init__.py", "pkg/__init__.py", "pkg/mod.py", "pdbrc", ".pdbrc.txt"},
		{"mod.py", "mod.pyc", "pkg/__init__.py", "pkg/__init__.pyc"},
		{"ext.so", "ext.abi3.so", "ext.pyc", "pkg2/__init__.py", "pkg2.pyc"},
	} {
		if err := CheckModuleNames(files); err != nil {
			t.Errorf("%q: got %v; want them accepted", files, err)
		}
	}
}
