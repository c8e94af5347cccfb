package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
)

// TestWriteOutWritesFilesAndOutputs: --out writes each produced file under its own name
// (folders made), and each output with data as output-<index>-<n>.<ext>, n counting the
// representations of one shown thing; a left-out output is not written.
func TestWriteOutWritesFilesAndOutputs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	res := shownResult()
	res.Files = append(res.Files, guard.File{Name: "plots/a.txt", Size: 2, Content: []byte("hi")})
	out, err := writeOut(dir, res, false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"report.csv":            "a,b\n",
		"plots/a.txt":           "hi",
		"output-1-1.png":        string(make([]byte, 2048)),
		"output-1-2.txt":        "<Figure>\n",
		"output-2-1.table.json": hostileTable,
		"output-3-1.html":       "<script>x()</script>\n",
		"output-4-1.txt":        string(res.Outputs[4].Data),
	}
	var names []string
	for _, f := range out.Files {
		names = append(names, f.Name)
	}
	for name, content := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != content {
			t.Errorf("%s: %.40q, %v; want %.40q", name, b, err, content)
		}
		if !slices.Contains(names, name) {
			t.Errorf("what was written %v does not name %s", names, name)
		}
	}
	if len(out.Files) != len(want) {
		t.Errorf("wrote %v; want the %d files above (the left-out output has no data)", names, len(want))
	}
	// Again: every file exists, nothing is replaced without --force; with it, all are.
	if _, err := writeOut(dir, res, false); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("writing over existing files: %v; want a refusal naming --force", err)
	}
	res.Files[0].Content = []byte("new\n")
	if _, err := writeOut(dir, res, true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "report.csv")); string(b) != "new\n" {
		t.Errorf("--force: report.csv holds %q; want it replaced", b)
	}
}

// TestWriteOutRefusesHostileNames: a produced file named with "..", an absolute path or a
// suspicious character, a name that collides with an output's, and a symlink planted in DIR (as
// the file itself, or as a folder on its way) pointing outside are each refused before anything
// is written, and nothing outside DIR changes.
func TestWriteOutRefusesHostileNames(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	png := guard.Output{Index: 1, Source: guard.OutputFigure, MIME: guard.MIMEPNG, Size: 1, Data: []byte{1}}
	for _, tc := range []struct {
		name  string
		file  string
		plant func(dir string) error
	}{
		{name: "dot-dot", file: "../victim"},
		{name: "nested dot-dot", file: "a/../../victim"},
		{name: "absolute", file: victim},
		{name: "escape sequence", file: "a\x1b[2J.txt"},
		{name: "collides with an output", file: "OUTPUT-1-1.png"},
		{name: "symlink as the file", file: "x.txt", plant: func(dir string) error { return os.Symlink(victim, filepath.Join(dir, "x.txt")) }},
		{name: "symlink as a folder", file: "sub/victim", plant: func(dir string) error { return os.Symlink(outside, filepath.Join(dir, "sub")) }},
		{name: "dangling symlink", file: "new.txt", plant: func(dir string) error {
			return os.Symlink(filepath.Join(outside, "new.txt"), filepath.Join(dir, "new.txt"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.plant != nil {
				if err := tc.plant(dir); err != nil {
					t.Fatal(err)
				}
			}
			res := guard.Result{Files: []guard.File{{Name: "fine.txt", Content: []byte("ok")}, {Name: tc.file, Content: []byte("PWNED")}}, Outputs: []guard.Output{png}}
			for _, force := range []bool{false, true} {
				out, err := writeOut(dir, res, force)
				t.Logf("force %t: %v", force, err)
				if err == nil {
					t.Errorf("force %t: wrote %+v; want a refusal", force, out)
				}
			}
			if b, _ := os.ReadFile(victim); string(b) != "keep" {
				t.Errorf("the file outside DIR holds %q", b)
			}
			if _, err := os.Stat(filepath.Join(outside, "new.txt")); err == nil {
				t.Error("a file was created outside DIR")
			}
			if _, err := os.Lstat(filepath.Join(dir, "fine.txt")); err == nil {
				t.Error("fine.txt was written although another name was refused")
			}
		})
	}
}
