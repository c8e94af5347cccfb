package startuptest

import (
	"fmt"
	"sort"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Refused is an attack that no backend can contain on its own, because the program it fools is
// one the shown code starts on purpose (perl, pdb, the import system): its hook runs when
// nothing refuses the request, so the guard must refuse it before approval.
type Refused struct {
	Case
	// Hook is the name of the marker the hook writes when it runs.
	Hook string
	// Naming is what the guard's ToolUsageError must name (the env name or the input file).
	Naming string
}

// RefusedCases are the attacks the guard refuses, their hooks writing into markerDir. Files and
// Env hold the whole attack (Env is part of the request, not set past the guard). Tests run the
// attack past the guard too, to show that its hook runs then (the attack is real and its marker
// counted right), and that the guard refuses the request naming what.
func RefusedCases(markerDir string) []Refused {
	return []Refused{
		{
			// The shell code runs a one-line perl; PERL5OPT makes perl load a module first, from the
			// working folder (-I.).
			Case: Case{
				Name:     "perl: PERL5OPT loads a module from the working folder before perl's -e",
				Language: "sh",
				Code:     "perl -e 'print qq(perl ok\\n)'\n",
				Files: map[string][]byte{"Startup.pm": []byte(fmt.Sprintf(
					"package Startup;\nprint qq(HOOK perl5opt\\n);\nopen(my $f, '>', '%s/%sperl5opt') or die;\nprint $f 'ran';\nclose($f);\n1;\n",
					markerDir, MarkerPrefix))},
				Env: map[string]string{"PERL5OPT": "-I. -MStartup"},
			},
			Hook:   "perl5opt",
			Naming: "PERL5OPT",
		},
		{
			// The reviewer reads helper.py; Python imports the package helper/ beside it.
			Case: Case{
				Name:     "python: a package beside the module of the same name",
				Language: "python",
				Code:     "import helper\nprint('value=' + helper.VALUE)\n",
				Files: map[string][]byte{
					"helper.py":          []byte("VALUE = 'shown'\n"),
					"helper/__init__.py": []byte(pyHook(markerDir, "package-beside-module") + "VALUE = 'hidden'\n"),
				},
			},
			Hook:   "package-beside-module",
			Naming: "helper/__init__.py",
		},
		{
			// pdb runs the commands of a .pdbrc in the working folder (its ! lines are Python)
			// when the code calls breakpoint().
			Case: Case{
				Name:     "python: a .pdbrc in the working folder runs when the code calls breakpoint()",
				Language: "python",
				Code:     "print('before', flush=True)\nbreakpoint()\nprint('after')\n",
				Files: map[string][]byte{".pdbrc": []byte(fmt.Sprintf(
					"!import os; print('HOOK pdbrc', flush=True); open(os.path.join(%s, '%spdbrc'), 'w').write('ran')\ncontinue\n",
					pyQuote(markerDir), MarkerPrefix))},
			},
			Hook:   "pdbrc",
			Naming: ".pdbrc",
		},
	}
}

// PastTheGuard returns files and env as a checked request holds them, sorted by name, to set on
// a request checked without them.
func PastTheGuard(files map[string][]byte, env map[string]string) ([]guard.InputFile, []guard.EnvVar) {
	var fs []guard.InputFile
	for name, content := range files {
		fs = append(fs, guard.InputFile{Name: name, Content: content})
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].Name < fs[j].Name })
	var es []guard.EnvVar
	for name, value := range env {
		es = append(es, guard.EnvVar{Name: name, Value: value})
	}
	sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
	return fs, es
}
