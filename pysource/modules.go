package pysource

import (
	"path"
	"sort"
	"strings"
)

// A module's providers, in the order Python's import system prefers them within one folder
// (importlib's FileFinder): a package folder with an __init__ file first, then a native
// extension, then source, then bytecode.
const (
	providesPackage = iota
	providesExtension
	providesSource
	providesBytecode
)

// moduleProvided returns the module name a file provides in its folder and how, or ok false: a
// top-level file of a package folder (dir/X/__init__.py provides X in dir), X.py, X.pyc, or a
// native extension X.so, X.abi3.so, X.cpython-311-x86_64-linux-gnu.so.
func moduleProvided(name string) (dir, module string, kind int, ok bool) {
	dir, base := path.Split(name)
	dir = strings.TrimSuffix(dir, "/")
	if stem, ext, found := strings.Cut(base, "."); found && stem == "__init__" && moduleExtKind(ext) >= 0 && dir != "" {
		parent, pkg := path.Split(dir)
		return strings.TrimSuffix(parent, "/"), pkg, providesPackage, true
	}
	stem, ext, found := strings.Cut(base, ".")
	if !found || stem == "" {
		return "", "", 0, false
	}
	if k := moduleExtKind(ext); k >= 0 {
		return dir, stem, k, true
	}
	return "", "", 0, false
}

// moduleExtKind says how a file ending (after the first dot of its name) provides a module, or
// -1: py, pyc, so, abi3.so, cpython-*.so.
func moduleExtKind(ext string) int {
	switch {
	case ext == "py":
		return providesSource
	case ext == "pyc":
		return providesBytecode
	case ext == "so" || ext == "abi3.so" || (strings.HasPrefix(ext, "cpython-") && strings.HasSuffix(ext, ".so") && !strings.Contains(strings.TrimSuffix(ext, ".so"), ".")):
		return providesExtension
	}
	return -1
}

// CheckModuleNames reports an *Error for input files that a program the code starts reads as code without
// the reviewer being able to tell which file it reads:
//   - a source module that Python never imports because another file in its folder provides the
//     same module first (helper.py beside helper/__init__.py, mod.py beside mod.abi3.so): a
//     package comes before a native module, which comes before source, by rules no view shows,
//     so a reviewer reads helper.py while the package runs. (Bytecode beside its source is
//     never read: source comes first.)
//   - a .pdbrc: pdb runs its commands (a ! line is Python) from the working folder when the
//     code calls breakpoint() or pdb.
//
// No run needs either.
func CheckModuleNames(names []string) error {
	type provider struct {
		name string
		kind int
	}
	providers := map[[2]string][]provider{}
	var keys [][2]string
	for _, n := range names {
		if path.Base(n) == ".pdbrc" {
			return errorf("input file %q is a .pdbrc: pdb runs its commands as Python when the code calls breakpoint() or pdb, and no view says so", n)
		}
		dir, module, kind, ok := moduleProvided(n)
		if !ok {
			continue
		}
		key := [2]string{dir, module}
		if providers[key] == nil {
			keys = append(keys, key)
		}
		providers[key] = append(providers[key], provider{n, kind})
	}
	for _, key := range keys {
		ps := providers[key]
		sort.SliceStable(ps, func(i, j int) bool { return ps[i].kind < ps[j].kind })
		for _, lost := range ps[1:] {
			if lost.kind != providesSource || ps[0].kind == providesSource {
				continue
			}
			where := "the working folder"
			if key[0] != "" {
				where = "folder " + VisibleText(key[0])
			}
			return errorf("input files %q and %q both provide module %s in %s: Python imports %q and never %q, which a reviewer may read instead; send one",
				ps[0].name, lost.name, VisibleText(key[1]), where, ps[0].name, lost.name)
		}
	}
	return nil
}
