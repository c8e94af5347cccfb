package linediff

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

func id(s string) string { return s }

func TestUnified(t *testing.T) {
	old := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n"
	new := "a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\n"
	want := "--- old\n+++ new\n@@ -1,5 +1,5 @@\n a\n-b\n+B\n c\n d\n e\n@@ -8,3 +8,4 @@\n h\n i\n j\n+k\n"
	if got := Unified("old", "new", old, new, id); got != want {
		t.Errorf("Unified =\n%s\nwant\n%s", got, want)
	}
	if got := Unified("old", "new", old, old, id); got != "" {
		t.Errorf("Unified of equal texts = %q; want empty", got)
	}
	if got, want := Unified("o", "n", "", "x\n", id), "--- o\n+++ n\n@@ -0,0 +1 @@\n+x\n"; got != want {
		t.Errorf("Unified from empty = %q; want %q", got, want)
	}
}

// patch(1) applies what Unified writes and gets the new text back.
func TestUnifiedAppliesWithPatch(t *testing.T) {
	need.Need(t, need.Patch)
	const patch = "patch"
	cases := [][2]string{
		{"x = 1\nprint(x)\n", "import os\nx = 2\nprint(x)\nprint(os.getcwd())\n"},
		{strings.Repeat("same\n", 20) + "old\n" + strings.Repeat("same\n", 20), strings.Repeat("same\n", 20) + "new\n" + strings.Repeat("same\n", 5) + "more\n" + strings.Repeat("same\n", 15)},
		{"one\ntwo\nthree\n", ""},
	}
	for i, c := range cases {
		dir := t.TempDir()
		f := filepath.Join(dir, "f")
		if err := os.WriteFile(f, []byte(c[0]), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(patch, "-s", f)
		cmd.Stdin = strings.NewReader(Unified("a/f", "b/f", c[0], c[1], id))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("case %d: patch: %v\n%s", i, err, out)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c[1] {
			t.Errorf("case %d: patched text %q; want %q", i, got, c[1])
		}
	}
}
