package pysource

import (
	"path"
	"slices"
	"strings"
)

// StartupWarning says that an input file may run without the code calling it: the interpreter
// may execute it on its own (site's start-up hooks, bytecode, native modules) or import it in
// place of a standard module. Such a file is allowed, but a reviewer must read it as part of
// what runs; every view lists these warnings.
type StartupWarning struct {
	// File is the input file's name, as the request gives it.
	File string `json:"file"`
	// Reason says what the interpreter may do with it.
	Reason string `json:"reason"`
}

// String is the warning as one line: the file (escaped, see VisibleText) and the reason.
func (w StartupWarning) String() string {
	return "input file " + VisibleText(w.File) + ": " + w.Reason
}

// moduleExts are the file endings the import system loads a module from.
var moduleExts = []string{".py", ".pyw", ".pyc", ".pyo", ".so", ".pyd"}

// isStdlibModule reports whether name is a top-level module of CPython 3.12's standard library,
// or of 3.11's.
func isStdlibModule(name string) bool {
	return slices.Contains(stdlibModules312, name) || slices.Contains(stdlibRemovedIn312, name)
}

// StartupWarnings returns the warnings for a request's input file names, in the order of the
// names and then of the reasons:
//   - a .pth file (site runs its lines that start with "import" when its folder is a site
//     folder);
//   - sitecustomize or usercustomize, as a module or a package (site imports them at start-up);
//   - anything under a __pycache__ folder, and any .pyc or .pyo file (bytecode: imported in
//     place of source, and never shown as text);
//   - a .so or .pyd file (a native module: machine code run when it is imported);
//   - a .zip, .egg, .whl or .pyz archive (Python imports from or runs it; no view shows its
//     contents);
//   - a module or package in the working folder named like a standard module (the working folder
//     can come first on sys.path, so "import json" would load it).
//
// Only top-level names are modules here: a file in a subfolder is imported only when the code
// puts that folder on sys.path, which the reviewer reads in the code. A folder counts as a
// package when it holds an __init__ file.
func StartupWarnings(names []string) []StartupWarning {
	packages := map[string]bool{}
	for _, n := range names {
		if dir, file, ok := strings.Cut(n, "/"); ok && isInitFile(file) {
			packages[dir] = true
		}
	}
	var out []StartupWarning
	add := func(n, reason string) { out = append(out, StartupWarning{File: n, Reason: reason}) }
	for _, n := range names {
		elems := strings.Split(n, "/")
		ext := strings.ToLower(path.Ext(n))
		switch ext {
		case ".pth":
			add(n, "a .pth file: site runs its lines that start with \"import\" when its folder is on the site path")
		case ".pyc", ".pyo":
			add(n, "compiled bytecode: Python runs it when it is imported, and no view can show it as text")
		case ".so", ".pyd":
			add(n, "a native extension module: its machine code runs when it is imported")
		case ".zip", ".egg", ".whl", ".pyz":
			add(n, "an archive Python can import modules from or run: its contents are not shown")
		}
		if slices.Contains(elems[:len(elems)-1], "__pycache__") {
			add(n, "in a __pycache__ folder: Python may load this bytecode instead of the source beside it")
		}
		module := topModule(elems, packages)
		switch {
		case module == "":
		case module == "sitecustomize" || module == "usercustomize":
			add(n, "module "+module+": site imports it when the interpreter starts, before the code")
		case isStdlibModule(module):
			add(n, "module "+module+" shadows the standard module of that name: \"import "+module+"\" may load this file instead")
		}
	}
	return out
}

// isInitFile reports whether a file name is a package's __init__ module: __init__ and a module
// ending, with anything between them (an extension module's __init__.cpython-311-x86_64-linux-gnu.so
// or __init__.abi3.so makes its folder a package as __init__.py does).
func isInitFile(file string) bool {
	base, _, _ := strings.Cut(file, ".")
	return base == "__init__" && slices.Contains(moduleExts, strings.ToLower(path.Ext(file)))
}

// topModule returns the top-level module that the file with these path elements makes
// importable from the working folder, or "": a module file at the top (json.py,
// json.cpython-312-x86_64-linux-gnu.so), or any file of a package folder (json/__init__.py).
func topModule(elems []string, packages map[string]bool) string {
	if len(elems) > 1 {
		if packages[elems[0]] {
			return elems[0]
		}
		return ""
	}
	base, _, _ := strings.Cut(elems[0], ".")
	if base == "" || !slices.Contains(moduleExts, strings.ToLower(path.Ext(elems[0]))) {
		return ""
	}
	return base
}
