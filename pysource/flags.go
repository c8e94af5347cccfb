package pysource

import "strings"

// Flags are the flags every backend starts the code's Python with, so that nothing among
// the input files or in the environment runs before the code or in place of what it imports:
// -E ignores every PYTHON* variable, -s the user site (and backends set HOME outside the working
// folder), -B writes no bytecode, -u leaves output unbuffered. When BytecodeAmongInputs(names),
// -X pycache_prefix=pycachePrefix (a folder outside the working folder, which nothing creates)
// keeps Python from reading any __pycache__ there. The Docker supervisor (supervisor.py) starts
// Python the same way.
func Flags(names []string, pycachePrefix string) []string {
	flags := []string{"-E", "-s", "-B", "-u"}
	if BytecodeAmongInputs(names) {
		flags = append(flags, "-X", "pycache_prefix="+pycachePrefix)
	}
	return flags
}

// BytecodeAmongInputs reports whether an input file, of these names, lies in a __pycache__
// folder, the one place Python reads bytecode for a source file beside it. Only then is the
// pycache prefix worth its cost: with it the standard library's own bytecode is not used either,
// and every import of it compiles from source.
func BytecodeAmongInputs(names []string) bool {
	for _, name := range names {
		for _, part := range strings.Split(name, "/") {
			if part == "__pycache__" {
				return true
			}
		}
	}
	return false
}
