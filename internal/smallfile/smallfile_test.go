package smallfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestReadCapsAndKeepsNotExist(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(p, 5); err != nil || string(b) != "12345" {
		t.Fatalf("Read at the cap: %q, %v", b, err)
	}
	var tl *TooLargeError
	if _, err := Read(p, 4); !errors.As(err, &tl) || tl.Max != 4 || tl.Path != p {
		t.Fatalf("Read over the cap: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "missing"), 4); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Read of a missing file: %v", err)
	}
	if _, err := Read(dir, 4); err == nil {
		t.Fatal("Read of a directory: no error")
	}
}
