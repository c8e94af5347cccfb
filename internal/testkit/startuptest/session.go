package startuptest

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sandboxflow/sandboxflow/guard"
)

// shadowModule is a module that says it ran, on stdout and stderr, and breaks what a cell driver
// would call of it.
const shadowModule = "import sys\nprint('SHADOW ' + __name__)\nsys.stderr.write('SHADOW ' + __name__ + '\\n')\nprint_exception = format_exception = None\n"

// DriverShadows are a session's input files named like the modules a session's cell driver
// imports (itself, or to print a traceback): each one, were it imported, prints "SHADOW name".
func DriverShadows() map[string][]byte {
	files := map[string][]byte{}
	for _, m := range []string{"traceback", "linecache", "tokenize", "textwrap", "os", "types", "builtins"} {
		files[m+".py"] = []byte(shadowModule)
	}
	return files
}

// SessionCell is one Python cell of ShadowCells and what its result must show.
type SessionCell struct {
	Name string
	Code string
	// Check returns what is wrong with the cell's result ("" when nothing is).
	Check func(guard.Result) string
}

// ShadowCells are the cells to run, in order, in a session opened with DriverShadows: nothing
// from /work runs before a cell, at the first cell or in the fresh interpreter after a cell
// killed its own (which also left a sourceless linecache.pyc there), and a failing cell's
// traceback is printed.
func ShadowCells() []SessionCell {
	traceback := func(res guard.Result) string {
		if res.ExitCode != 1 || !strings.Contains(string(res.Stderr), "ZeroDivisionError") {
			return fmt.Sprintf("exit %d stderr %q; want 1 and the traceback", res.ExitCode, res.Stderr)
		}
		return ""
	}
	return []SessionCell{
		{Name: "the first cell", Code: "print('code')\n", Check: func(res guard.Result) string {
			return want(res, "code\n", false)
		}},
		{Name: "a failing cell", Code: "1/0\n", Check: traceback},
		{Name: "a cell that leaves linecache.pyc and kills its interpreter",
			Code: "import os, py_compile\nos.remove('linecache.py')\nopen('/tmp/l.py', 'w').write(" + strconv.Quote(shadowModule) + ")\n" +
				"py_compile.compile('/tmp/l.py', cfile='linecache.pyc')\nos._exit(0)\n",
			Check: func(res guard.Result) string { return want(res, "", false) }},
		{Name: "the cell after the reset", Code: "print('after reset')\n1/0\n", Check: func(res guard.Result) string {
			if w := want(res, "after reset\n", true); w != "" {
				return w
			}
			return traceback(res)
		}},
	}
}

// want says what is wrong with res's stdout, its state reset and the shadows' output.
func want(res guard.Result, stdout string, reset bool) string {
	if strings.Contains(string(res.Stdout)+string(res.Stderr), "SHADOW") {
		return fmt.Sprintf("a module from the working folder ran: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if string(res.Stdout) != stdout || res.StateReset != reset {
		return fmt.Sprintf("stdout %q state_reset %t (stderr %q); want %q and %t", res.Stdout, res.StateReset, res.Stderr, stdout, reset)
	}
	return ""
}
