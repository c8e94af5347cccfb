package wheels

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// unpacked is what unpacking one wheel put in the environment.
type unpacked struct {
	// TopLevel are the names at the site folder's top: modules ("x" for x.py or x/), .pth
	// files, dist-info folders.
	TopLevel []string
	// Skipped are the .data parts that were not installed (scripts, headers, data).
	Skipped []string
}

// unsafeWheel is an error about a wheel's archive; the installer reports it as
// guard.PackageUnsafeWheel.
type unsafeWheel struct{ msg string }

func (e *unsafeWheel) Error() string { return e.msg }

func unsafef(format string, args ...any) error { return &unsafeWheel{fmt.Sprintf(format, args...)} }

// unpackWheel writes the regular files of the wheel in data into dir, as an installer lays out
// a site folder: *.data/purelib and *.data/platlib merged into it, the other *.data parts left
// out (reported). It refuses anything but regular files (links, devices, folders written as
// files), absolute paths, "..", names written twice (in the archive or by an earlier wheel in
// dir), and more than maxFiles files or maxBytes bytes (counted as read, whatever the archive
// declares). It runs nothing and never follows a link: dir holds only folders it made.
func unpackWheel(data []byte, dataDir string, dir string, maxFiles int, maxBytes *int64) (unpacked, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return unpacked{}, unsafef("not a zip archive: %v", err)
	}
	if len(zr.File) > maxFiles {
		return unpacked{}, unsafef("%d files, over %d", len(zr.File), maxFiles)
	}
	var u unpacked
	seen := map[string]bool{}
	tops := map[string]bool{}
	for _, f := range zr.File {
		rel, skip, err := installPath(f, dataDir)
		if err != nil {
			return unpacked{}, err
		}
		if skip != "" {
			if !seen["skip:"+skip] {
				seen["skip:"+skip] = true
				u.Skipped = append(u.Skipped, skip)
			}
			continue
		}
		if rel == "" {
			continue // a folder entry
		}
		if seen[rel] {
			return unpacked{}, unsafef("%s is in the archive twice", rel)
		}
		seen[rel] = true
		if err := writeEntry(f, filepath.Join(dir, filepath.FromSlash(rel)), maxBytes); err != nil {
			return unpacked{}, err
		}
		top, _, _ := strings.Cut(rel, "/")
		if strings.Contains(rel, "/") {
			top += "/"
		}
		if !tops[top] {
			tops[top] = true
			u.TopLevel = append(u.TopLevel, top)
		}
	}
	return u, nil
}

// installPath is where an archive entry goes below the site folder ("" for a folder entry), or
// the .data part it belongs to when it is not installed.
func installPath(f *zip.File, dataDir string) (string, string, error) {
	name := f.Name
	mode := f.Mode()
	switch {
	case name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, `\`) || strings.ContainsRune(name, 0):
		return "", "", unsafef("entry %q: not a relative path", name)
	case len(name) >= 2 && name[1] == ':':
		return "", "", unsafef("entry %q: not a relative path", name)
	}
	for part := range strings.SplitSeq(strings.TrimSuffix(name, "/"), "/") {
		if part == "" || part == "." || part == ".." {
			return "", "", unsafef("entry %q: a path out of the archive's folder", name)
		}
	}
	if strings.HasSuffix(name, "/") {
		if !mode.IsDir() && mode.Type() != 0 {
			return "", "", unsafef("entry %q: not a folder (%v)", name, mode.Type())
		}
		return "", "", nil
	}
	if mode.Type() != 0 {
		return "", "", unsafef("entry %q: not a regular file (%v)", name, mode.Type())
	}
	if rest, ok := strings.CutPrefix(name, dataDir+"/"); ok {
		part, sub, _ := strings.Cut(rest, "/")
		switch part {
		case "purelib", "platlib":
			if sub == "" {
				return "", "", unsafef("entry %q: not a file", name)
			}
			return path.Clean(sub), "", nil
		default:
			return "", dataDir + "/" + part, nil
		}
	}
	return path.Clean(name), "", nil
}

// writeEntry writes one regular file, read-only, creating its folders; it never opens an
// existing path.
func writeEntry(f *zip.File, dst string, maxBytes *int64) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("wheels: make folder for %s: %w", f.Name, err)
	}
	rc, err := f.Open()
	if err != nil {
		return unsafef("entry %q: %v", f.Name, err)
	}
	defer rc.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return unsafef("%s is installed twice (two wheels of the lock write it)", f.Name)
		}
		return fmt.Errorf("wheels: create %s: %w", dst, err)
	}
	n, err := io.Copy(out, io.LimitReader(rc, *maxBytes+1))
	cerr := out.Close()
	*maxBytes -= n
	switch {
	case *maxBytes < 0:
		return unsafef("the wheels unpack to more bytes than the limit (at %s)", f.Name)
	case err != nil:
		return unsafef("entry %q: %v", f.Name, err)
	case cerr != nil:
		return fmt.Errorf("wheels: write %s: %w", dst, cerr)
	}
	return nil
}

// makeReadOnly takes write permission off every folder under dir (files are written
// read-only), so the environment stays as verified; 0555 lets the sandbox's uid read it.
func makeReadOnly(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(p, 0o555)
		}
		return nil
	})
}
