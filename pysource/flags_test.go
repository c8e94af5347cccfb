package pysource

import (
	"slices"
	"testing"
)

func TestPythonFlags(t *testing.T) {
	tests := []struct {
		files []string
		want  []string
	}{
		{nil, []string{"-E", "-s", "-B", "-u"}},
		{[]string{"mod.py", "mod.pyc", "pycache/x.pyc", "__pycache__.txt"}, []string{"-E", "-s", "-B", "-u"}},
		{[]string{"mod.py", "__pycache__/mod.cpython-311.pyc"}, []string{"-E", "-s", "-B", "-u", "-X", "pycache_prefix=/p"}},
		{[]string{"pkg/__pycache__/__init__.cpython-312.pyc"}, []string{"-E", "-s", "-B", "-u", "-X", "pycache_prefix=/p"}},
		{[]string{"a/b/__pycache__/README"}, []string{"-E", "-s", "-B", "-u", "-X", "pycache_prefix=/p"}},
	}
	for _, tt := range tests {
		if got := Flags(tt.files, "/p"); !slices.Equal(got, tt.want) {
			t.Errorf("Flags(%q): got %q; want %q", tt.files, got, tt.want)
		}
	}
}
