// Package startuptest holds, for the tests of every backend, the start-up hooks a hostile
// request can plant: input files where Python or sh look before the code's first line (the user
// site's .pth and usercustomize, sitecustomize, rc and profile files, modules the interpreter
// imports at start-up or exit), bytecode that would replace a shown module when the code imports
// it (__pycache__ with unchecked and checked hashes, a legacy .pyc beside its source), and
// PYTHON*, ENV and BASH_ENV variables set past the guard; and (RefusedCases) the attacks only the
// guard can stop. Each hook that runs prints "HOOK name" and writes MarkerPrefix+name into a
// folder the test names, so a test counts what ran by a file, not only by the output. It is
// imported only by tests.
package startuptest

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strings"
)

// MarkerPrefix starts the name of every file a hook writes.
const MarkerPrefix = "hook-"

// pycModules are the modules whose bytecode the probe forges: mod_u (an unchecked-hash pyc in
// __pycache__), mod_c (a checked-hash pyc carrying the hash of the shown source) and mod_l (a
// legacy pyc beside the source) and pkg (a package, an unchecked-hash pyc in its __pycache__).
var pycModules = []string{"mod_u", "mod_c", "mod_l", "pkg"}

// ShownModule is the source of every module the reviewer is shown.
const ShownModule = "VALUE = 'shown'\n"

// PycProbe is Python code that prints, one key=value a line, the interpreter's version (ver),
// its bytecode cache tag (tag) and, base64, the forged bytecode of each module of pycModules: a
// hidden program that runs the hook and sets VALUE to 'hidden'. Run it with the interpreter the
// backend runs (the pyc format is that version's), then give its output to ParseProbe.
func PycProbe(markerDir string) string {
	var hidden strings.Builder
	for _, name := range pycModules {
		fmt.Fprintf(&hidden, "%s: %s,\n", pyQuote(name), pyQuote(pyHook(markerDir, "pyc-"+name)+"VALUE = 'hidden'\n"))
	}
	return `import base64, importlib.util, sys
from importlib._bootstrap_external import _code_to_hash_pyc, _code_to_timestamp_pyc
shown = ` + pyQuote(ShownModule) + `.encode()
hidden = {
` + hidden.String() + `}
print("ver=%d.%d" % sys.version_info[:2])
print("tag=" + sys.implementation.cache_tag)
for name, src in hidden.items():
    code = compile(src, name + ".py", "exec")
    if name == "mod_l":
        data = _code_to_timestamp_pyc(code, 0, len(shown))
    else:
        data = _code_to_hash_pyc(code, importlib.util.source_hash(shown), checked=(name == "mod_c"))
    print(name + "=" + base64.b64encode(bytes(data)).decode())
`
}

// Interp is what PycProbe printed.
type Interp struct {
	// Version is "3.11" and the like; Tag is sys.implementation.cache_tag ("cpython-311").
	Version, Tag string
	// Pyc is the forged bytecode of each module of pycModules.
	Pyc map[string][]byte
}

// ParseProbe reads PycProbe's output.
func ParseProbe(stdout []byte) (Interp, error) {
	in := Interp{Pyc: map[string][]byte{}}
	for _, line := range strings.Split(string(stdout), "\n") {
		k, v, ok := strings.Cut(line, "=")
		switch {
		case !ok:
		case k == "ver":
			in.Version = v
		case k == "tag":
			in.Tag = v
		default:
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				return Interp{}, fmt.Errorf("startuptest: probe line %s: %w", k, err)
			}
			in.Pyc[k] = b
		}
	}
	if in.Version == "" || in.Tag == "" || len(in.Pyc) != len(pycModules) {
		return Interp{}, fmt.Errorf("startuptest: probe output %q lacks ver, tag or a module", stdout)
	}
	return in, nil
}

// Case is one attack: a request whose code reads as harmless, and hooks that would run before
// it or in place of what it imports.
type Case struct {
	Name     string
	Language string // "python" or "sh"
	Code     string
	Files    map[string][]byte
	// Env is set on the checked request past the guard, which refuses some of these names: the
	// interpreter must ignore them anyway.
	Env map[string]string
	// Stdout is the run's whole stdout when no hook ran.
	Stdout string
}

// Cases are the attacks, their hooks writing into markerDir (an absolute path the code may
// write to). Every case's relative paths are relative to the working folder, where the input
// files land and the code starts.
func Cases(in Interp, markerDir string) []Case {
	h := hooks{dir: markerDir}
	modules := forgedModules(in)
	return append(pythonCases(in, h, modules), pythonEnvCase(in, h, modules), shellCase(in, h, modules))
}

// hooks make the files of the attacks: each prints "HOOK name" and writes its marker into dir.
type hooks struct{ dir string }

// py is a Python module that is a hook.
func (h hooks) py(name string) []byte { return []byte(pyHook(h.dir, name)) }

// pth is a .pth file whose import line is a hook.
func (h hooks) pth(name string) []byte {
	return []byte(fmt.Sprintf("import os; print('HOOK %s', flush=True); open(os.path.join(%s, '%s%s'), 'w').write('ran')\n",
		name, pyQuote(h.dir), MarkerPrefix, name))
}

// sh is a shell script that is a hook.
func (h hooks) sh(name string) []byte {
	return []byte(fmt.Sprintf("echo HOOK %s; echo ran > '%s/%s%s'\n", name, h.dir, MarkerPrefix, name))
}

// forgedModules are the modules the code imports, each shown as ShownModule beside bytecode that
// says otherwise.
func forgedModules(in Interp) map[string][]byte {
	return map[string][]byte{
		"mod_u.py":                             []byte(ShownModule),
		"__pycache__/mod_u." + in.Tag + ".pyc": in.Pyc["mod_u"],
		"mod_c.py":                             []byte(ShownModule),
		"__pycache__/mod_c." + in.Tag + ".pyc": in.Pyc["mod_c"],
		"mod_l.py":                             []byte(ShownModule),
		"mod_l.pyc":                            in.Pyc["mod_l"],
		"pkg/__init__.py":                      []byte(ShownModule),
		"pkg/__pycache__/__init__." + in.Tag + ".pyc": in.Pyc["pkg"],
	}
}

// startupFiles are the forged modules and hooks in every place Python looks at start-up.
func startupFiles(in Interp, h hooks, modules map[string][]byte) map[string][]byte {
	site := ".local/lib/python" + in.Version + "/site-packages/"
	return merge(modules, map[string][]byte{
		site + "hook.pth":         h.pth("user-site-pth"),
		site + "usercustomize.py": h.py("user-site-usercustomize"),
		"sitecustomize.py":        h.py("work-sitecustomize"),
		"usercustomize.py":        h.py("work-usercustomize"),
		".pythonrc.py":            h.py("pythonrc-py"),
		".pythonrc":               h.py("pythonrc"),
		"site-packages/hook.pth":  h.pth("work-site-packages-pth"),
		"pyvenv.cfg":              []byte("include-system-site-packages = false\n"),
		"lib/python" + in.Version + "/site-packages/hook.pth": h.pth("work-lib-pth"),
	})
}

// shadowFiles are hooks named like the modules the interpreter imports before the code (python3
// -E -s -B -u - of the test image, sys.modules of an empty program) or may import at exit,
// shadowed in the working folder: they are imported before the working folder is on sys.path,
// or not at all.
func shadowFiles(h hooks) map[string][]byte {
	shadows := map[string][]byte{"__main__.py": h.py("shadow-main"), "encodings/__init__.py": h.py("shadow-encodings")}
	for _, m := range []string{"abc", "codecs", "genericpath", "io", "os", "posixpath", "site", "stat", "time", "zipimport",
		"_collections_abc", "_sitebuiltins", "typing", "warnings", "linecache", "traceback", "tokenize", "re", "atexit",
		"threading", "readline", "rlcompleter", "weakref"} {
		shadows[m+".py"] = h.py("shadow-" + m)
	}
	return shadows
}

// pythonCases are the attacks through files alone: shadowed modules, start-up files and forged
// bytecode, in the code's interpreter and in one it starts.
func pythonCases(in Interp, h hooks, modules map[string][]byte) []Case {
	startup := startupFiles(in, h, modules)
	return []Case{
		{
			Name:     "python: files named like the modules Python imports at start-up or exit",
			Language: "python",
			Code:     "print('code')\n",
			Files:    shadowFiles(h),
			Stdout:   "code\n",
		},
		{
			Name:     "python: files where Python looks at start-up, and forged bytecode",
			Language: "python",
			Code: `import mod_u, mod_c, mod_l, pkg
print("values=%s,%s,%s,%s" % (mod_u.VALUE, mod_c.VALUE, mod_l.VALUE, pkg.VALUE))
print("debug=%s" % __debug__)
`,
			Files:  startup,
			Stdout: "values=shown,shown,shown,shown\ndebug=True\n",
		},
		{
			Name:     "python: a python3 the code starts",
			Language: "python",
			Code: `import subprocess, sys
r = subprocess.run([sys.executable, "-c", "import mod_u, mod_c, pkg; print(mod_u.VALUE, mod_c.VALUE, pkg.VALUE)"], capture_output=True, text=True)
print("child=%s|%s" % (r.stdout.strip(), r.stderr.strip()))
`,
			Files:  startup,
			Stdout: "child=shown shown shown|\n",
		},
	}
}

// pythonEnvCase is the attack through PYTHON* variables that reach the interpreter past the guard.
func pythonEnvCase(in Interp, h hooks, modules map[string][]byte) Case {
	return Case{
		Name:     "python: PYTHON* variables past the guard",
		Language: "python",
		Code: `import sys
import mod_u
print("values=%s" % mod_u.VALUE)
print("debug=%s flags=%d%d%d%d" % (__debug__, sys.flags.optimize, sys.flags.inspect, sys.flags.verbose, sys.flags.dev_mode))
print("digits=%d" % len(str(10**1000)))
`,
		Files: merge(modules, map[string][]byte{
			"startup.py":          h.py("pythonstartup"),
			"pp/sitecustomize.py": h.py("pythonpath-sitecustomize"),
			"pp/usercustomize.py": h.py("pythonpath-usercustomize"),
			"ub/lib/python" + in.Version + "/site-packages/hook.pth":         h.pth("pythonuserbase-pth"),
			"ub/lib/python" + in.Version + "/site-packages/usercustomize.py": h.py("pythonuserbase-usercustomize"),
		}),
		Env: map[string]string{
			"PYTHONSTARTUP": "startup.py", "PYTHONPATH": "pp", "PYTHONUSERBASE": "ub",
			"PYTHONINSPECT": "1", "PYTHONOPTIMIZE": "2", "PYTHONVERBOSE": "1", "PYTHONDEVMODE": "1",
			"PYTHONSAFEPATH": "1", "PYTHONWARNINGS": "error",
			"PYTHONCASEOK": "1", "PYTHONHOME": "/nonexistent", "pythonpath": "pp",
			// These change what the shown code does: its output's encoding, and whether a
			// large integer may be printed.
			"PYTHONIOENCODING": "utf-16", "PYTHONINTMAXSTRDIGITS": "640",
		},
		Stdout: "values=shown\ndebug=True flags=0000\ndigits=1001\n",
	}
}

// shellCase is the attack on sh: profile and rc files, ENV and BASH_ENV, and a python3 it starts.
func shellCase(in Interp, h hooks, modules map[string][]byte) Case {
	return Case{
		Name:     "sh: profile and rc files, ENV and BASH_ENV, and a python3 it starts",
		Language: "sh",
		Code: `echo start
python3 -c 'import mod_u, mod_c; print(mod_u.VALUE, mod_c.VALUE)'
echo end
`,
		Files: merge(modules, map[string][]byte{
			".profile": h.sh("profile"), ".shrc": h.sh("shrc"), ".ashrc": h.sh("ashrc"), ".kshrc": h.sh("kshrc"),
			".bashrc": h.sh("bashrc"), ".bash_profile": h.sh("bash-profile"), ".bash_login": h.sh("bash-login"),
			"env.sh": h.sh("env"), "bash_env.sh": h.sh("bash-env"),
			".local/lib/python" + in.Version + "/site-packages/hook.pth": h.pth("sh-user-site-pth"),
		}),
		Env:    map[string]string{"ENV": "env.sh", "BASH_ENV": "bash_env.sh"},
		Stdout: "start\nshown shown\nend\n",
	}
}

// pyHook is Python code that prints "HOOK name" and writes its marker.
func pyHook(markerDir, name string) string {
	return fmt.Sprintf("import os\nprint('HOOK %s', flush=True)\nopen(os.path.join(%s, '%s%s'), 'w').write('ran')\n",
		name, pyQuote(markerDir), MarkerPrefix, name)
}

// pyQuote is s as a Python string literal.
func pyQuote(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		switch {
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

func merge(ms ...map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// Markers returns the hook names among names (the marker files found), sorted.
func Markers(names []string) []string {
	var out []string
	for _, n := range names {
		base := n[strings.LastIndex(n, "/")+1:]
		if strings.HasPrefix(base, MarkerPrefix) {
			out = append(out, strings.TrimPrefix(base, MarkerPrefix))
		}
	}
	sort.Strings(out)
	return out
}
